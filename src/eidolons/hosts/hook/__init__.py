"""Host hooks: ``eidolons hook HOST`` makes the receiver gate mechanical inside agent hosts.

- :mod:`eidolons.hosts.hook.fast`: the entry point. Reads one hook event, normalises it into a
  :class:`~eidolons.hosts.hook.events.ToolCall` and decides the calls that touch nothing of
  ECL's at once, with nothing but the standard library's core (no ``json``, no ``re``,
  no ``argparse``): the hook runs on every tool call an agent makes.
- :mod:`eidolons.hosts.hook.events`: strict parsing of the host's stdin and the per-host
  field mapping (pure), and the project layout (which paths are hand-offs, keys, gate
  state or hook wiring).
- :mod:`eidolons.hosts.hook.decide`: the full decision, with the receiver gate in-process.
- :mod:`eidolons.hosts.hook.dispatch`: the orchestrator gate run when the main loop starts a
  subagent.
- :mod:`eidolons.hosts.wiring`: what ``init`` writes into each host's settings (the hook,
  Claude Code's sandbox, the MCP server), and the checks ``doctor`` and the hook make of it.

The hook judges tools by their exact arguments; the shell is kept out of the hand-offs by
the host's sandbox, not by the hook (ADR 0140). Whatever goes wrong, the hook denies: it
never fails open (ADR 0040).
"""
