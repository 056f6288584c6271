"""Host hooks: ``eidolons hook HOST`` makes the receiver gate mechanical inside agent hosts.

- :mod:`eidolons.hooks.fast`: the entry point. Reads one hook event, normalises it into a
  :class:`~eidolons.hooks.events.ToolCall` and decides the calls that touch nothing of
  ECL's at once, with nothing but the standard library's core (no ``json``, no ``re``,
  no ``argparse``): the hook runs on every tool call an agent makes.
- :mod:`eidolons.hooks.events`: strict parsing of the host's stdin and the per-host
  field mapping (pure), and the project layout (which paths are hand-offs, keys, gate
  state or hook wiring).
- :mod:`eidolons.hooks.shell`: best-effort reading of a shell command's file operands.
- :mod:`eidolons.hooks.decide`: the full decision, with the receiver gate in-process.
- :mod:`eidolons.hooks.dialects`: each host's answer (stdout, stderr, exit code).

Whatever goes wrong, the hook denies: it never fails open (ADR 0040).
"""
