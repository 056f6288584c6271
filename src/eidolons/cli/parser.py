"""The one parser class of the command line: a usage error at any level of the parser
tree is one ``usage:`` line, ``eidolons ...: error: <message>`` and exit 2; a mistyped
command or action names the nearest one. Imported only when a parser is built (the
``hook`` and hot-command fast paths never load argparse)."""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

from eidolons._text import did_you_mean

#: the usage exit code of every command (ADR 0003's vocabulary)
EXIT_USAGE = 2


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` exiting 2 on a usage error (its sub-parsers too)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """argparse's check, naming the nearest command or action when one is close."""
        choices = action.choices
        if isinstance(action, argparse._SubParsersAction) and value not in (choices or ()):
            near = did_you_mean(str(value), [str(c) for c in choices or ()])
            if near:
                thing = str(action.metavar or "command").lower()
                raise argparse.ArgumentError(None, f"unknown {thing} {value!r}{near}")
        super()._check_value(action, value)
