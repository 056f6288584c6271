"""The one parser class of the command line: every parser the CLI builds (the root, each
sub-command, each action and each ``parents=`` option group) is a :class:`Parser`, so a
usage error is one ``usage:`` line, ``eidolons ...: error: <message>`` and exit 2
(:data:`EXIT_USAGE`), whichever level of the tree reports it. It lives outside
:mod:`eidolons.cli` so that :mod:`eidolons.cli.main` reaches it without an import cycle.

Imported only when a parser is built (``argparse`` is never loaded on the ``hook`` fast
path, which dispatches before :mod:`eidolons.cli.main` builds anything).
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

#: the usage exit code of every command (ADR 0027's vocabulary)
EXIT_USAGE = 2


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` with the CLI's usage exit code. Sub-parsers made with
    ``add_subparsers`` are of this class too (argparse's default ``parser_class``)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")
