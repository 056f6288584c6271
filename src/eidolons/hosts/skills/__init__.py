"""Generated receiver skills: ``eidolons skill render`` and ``eidolons skill install``.

:mod:`eidolons.hosts.skills.render` is pure (contracts in, bytes out);
:mod:`eidolons.hosts.skills.install` writes those bytes where hosts and the nexus read skills.
"""
