"""The ECL conformance rules (digest section 10.3), one module per gate family.

``eidolons check`` and the receiver gate decide with these functions, so a rule cannot
drift between the two (ADR 0023, which also lists every deliberate difference from the
upstream checker). Pure: envelope bytes, parsed objects, contracts and an injected
payload reader in, :class:`~eidolons.ecl.envelope.GateResult` records out.

- :mod:`.envelope`: the envelope's field rules, one table for the schema problems and the
  E-, I- and S- gates, and E-1..E-8; :mod:`.integrity` (I-1..I-5), :mod:`.edge` (C-1..C-4,
  D-0..D-3 and R-1), :mod:`.ise` (S-1..S-4);
- :mod:`.run`: every gate for one envelope, in upstream order; :mod:`.common` the
  result, its recorder, the readings of a value and the exit code (digest 10.2).
"""
