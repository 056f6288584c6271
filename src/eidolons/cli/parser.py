"""The one parser class of the command line: a usage error at any level of the parser
tree is one ``usage:`` line, ``eidolons ...: error: <message>`` and exit 2. Imported only
when a parser is built (the ``hook`` and hot-command fast paths never load argparse)."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

#: the usage exit code of every command (ADR 0003's vocabulary)
EXIT_USAGE = 2


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` exiting 2 on a usage error (its sub-parsers too)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")
