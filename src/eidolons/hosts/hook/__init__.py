"""``eidolons hook HOST``: the receiver gate inside agent hosts (ADR 0015).

:mod:`~eidolons.hosts.hook.fast` is the entry point and allows at once what touches
nothing of ECL's; :mod:`~eidolons.hosts.hook.events` parses the event and holds the
layout; :mod:`~eidolons.hosts.hook.decide` decides the rest; :mod:`~eidolons.hosts.hook.dispatch`
runs the orchestrator gate when the main loop starts a subagent. Whatever goes wrong,
the hook denies.
"""
