"""Generated receiver skills: ``eidolons skill render`` and ``eidolons skill install``.

:mod:`eidolons.skills.render` is pure (contracts in, bytes out);
:mod:`eidolons.skills.install` writes those bytes where hosts and the nexus read skills.
"""
