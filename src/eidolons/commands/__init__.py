"""Sub-commands of the ``eidolons`` CLI, one module each (see :mod:`eidolons.cli`)."""
