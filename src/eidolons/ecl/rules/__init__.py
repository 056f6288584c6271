"""The conformance checker's gates (digest section 10.3) beyond those of the envelope
and the contract: I-1..I-5 (:mod:`.integrity`), every gate for one envelope in upstream
order and the exit code (:mod:`.run`). ``eidolons check`` and the receiver gate share the
rules (ADR 0023)."""
