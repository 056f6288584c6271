"""``eidolons hook HOST``: the receiver gate inside agent hosts (ADR 0015).

:mod:`~eidolons.hosts.hook.fast` is the entry point and allows at once what touches
nothing of ECL's; :mod:`~eidolons.hosts.hook.events` parses the event and holds the
layout; :mod:`~eidolons.hosts.hook.decide` decides the rest, with
:mod:`~eidolons.hosts.hook.orchestrator` for the orchestrator gate (on a dispatch, on the
main loop's reads). Whatever goes wrong, the hook denies.
"""
