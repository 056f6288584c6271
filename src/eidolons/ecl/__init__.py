"""The pure core of eidolons: ECL over bytes and objects, no I/O (ADR 0001).

No module here opens a file, socket, database or process, reads the environment or
prints (``tests/test_layout.py`` walks every import). Grammar, strict JSON, the envelope,
integrity tags, verdicts, limits, contracts, the conformance rules (:mod:`.rules`,
:mod:`.sections`), trace events and the sender's builder; the shells read, then hand the
core what they read.
"""
