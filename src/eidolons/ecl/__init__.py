"""The pure core of eidolons: ECL over bytes and objects, no I/O (ADR 0007).

Every module here takes bytes, parsed objects and contracts and returns results. None
opens a file, a socket, a database or a process, reads the environment or prints:
``tests/test_layout.py`` walks every import of this package (module level, inside
functions and through ``importlib`` strings) and fails on any module that does. The
shells around it (:mod:`eidolons.io.payload`, :mod:`eidolons.trace.log`, the gates, the
commands) read, then hand the core what they read.

- :mod:`~eidolons.ecl.grammar`: every lexical rule once (slug, versions, hex digest,
  safe relative path and its one ``..`` rule, thread file names), always ``fullmatch``.
- :mod:`~eidolons.ecl.strict_json`: the one parser of untrusted JSON.
- :mod:`~eidolons.ecl.envelope`: the envelope model and its schema rules.
- :mod:`~eidolons.ecl.integrity`: tags over a stream, compared in constant time.
- :mod:`~eidolons.ecl.verdict`: verdicts, refusal codes (one enumeration), exit codes.
- :mod:`~eidolons.ecl.limits`: every cap in one record.
- :mod:`~eidolons.ecl.contract`: contracts and the contract set.
- :mod:`~eidolons.ecl.conformance`, :mod:`~eidolons.ecl.sections`,
  :mod:`~eidolons.ecl.results`: the conformance rules and required sections.
- :mod:`~eidolons.ecl.events`: the trace-event vocabulary and its one builder.
- :mod:`~eidolons.ecl.builder`: the sender's envelope builder.
"""
