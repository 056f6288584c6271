"""What the commands share (no command imports another): the hot commands' options,
declared once for argparse and for :func:`fast_parse`, and how a command speaks (status
lines, JSON, colour, exit codes) and finds the project root, its contracts and memory.

:func:`fast_parse` reads the hot commands' simple argv without importing argparse (ADR
0022: ``bench/bench_verify.py`` shows the start-up budget needs it), and answers only when
it is sure argparse would answer the same: positionals not starting with ``-``, options
spelled exactly as declared with their value in the next argument, each non-repeatable
option at most once, the declared positionals and every required option. Anything else
(help, ``--``, abbreviations, ``--opt=value``, errors) answers None and goes to the full
parser."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from pathlib import Path
    from typing import Any, TextIO

    from eidolons.errors import EidolonsError
    from eidolons.io.contracts import ContractSet
    from eidolons.memory import Memory


#: the actions a declaration may use (what :func:`fast_parse` knows argparse does)
ACTIONS = ("store", "store_true", "append")


class Option:
    """One argument, in ``add_argument``'s terms: one positional name or the option
    strings, and the keywords of the same name."""

    __slots__ = ("action", "default", "dest", "help", "metavar", "names", "positional", "required")

    def __init__(
        self,
        *names: str,
        action: str = "store",
        dest: str | None = None,
        default: Any = None,
        metavar: str | None = None,
        help: str | None = None,
        required: bool = False,
    ) -> None:
        if action not in ACTIONS:
            raise ValueError(f"action {action!r} is not one of {ACTIONS}")
        positional = not names[0].startswith("-")
        if positional and (len(names) != 1 or action != "store" or required or dest):
            raise ValueError(f"positional {names[0]!r}: one name, action store, no dest")
        self.names = names
        self.positional = positional
        self.action = action
        self.dest = dest or (names[0] if positional else names[0].lstrip("-").replace("-", "_"))
        if action == "store_true" and default is None:
            default = False
        self.default = default
        self.metavar = metavar
        self.help = help
        self.required = required

    def kwargs(self) -> dict[str, Any]:
        """``add_argument``'s keywords for this declaration."""
        out: dict[str, Any] = {}
        if self.action != "store":
            out["action"] = self.action
        if not self.positional and self.dest != self.names[0].lstrip("-").replace("-", "_"):
            out["dest"] = self.dest
        if self.default is not None and not (self.action == "store_true" and not self.default):
            out["default"] = self.default
        for key in ("metavar", "help"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.required:
            out["required"] = True
        return out


class Args:
    """The parsed arguments, as ``argparse.Namespace`` holds them (attributes by dest)."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)


def add_options(parser: argparse.ArgumentParser, options: Sequence[Option]) -> None:
    """Declare ``options`` on an argparse parser (the full parser: ``--help``, errors)."""
    for option in options:
        parser.add_argument(*option.names, **option.kwargs())


def fast_parse(argv: Sequence[str], options: Sequence[Option]) -> Args | None:
    """``argv`` (after the command name) parsed as argparse would, or None."""
    by_name = {name: o for o in options if not o.positional for name in o.names}
    positionals = [o for o in options if o.positional]
    values: dict[str, Any] = {}
    seen: set[str] = set()
    given: list[str] = []
    i, n = 0, len(argv)
    while i < n:
        arg = argv[i]
        if not arg.startswith("-"):
            given.append(arg)
            i += 1
            continue
        option = by_name.get(arg)
        if option is None:
            return None
        if option.dest in seen and option.action != "append":
            return None
        seen.add(option.dest)
        if option.action == "store_true":
            values[option.dest] = True
            i += 1
            continue
        if i + 1 >= n or argv[i + 1].startswith("-"):
            return None
        if option.action == "append":
            values.setdefault(option.dest, list(option.default or ())).append(argv[i + 1])
        else:
            values[option.dest] = argv[i + 1]
        i += 2
    if len(given) != len(positionals):
        return None
    out = Args()
    for option in options:
        if option.required and option.dest not in seen:
            return None
        if option.positional:
            value: Any = given[positionals.index(option)]
        elif option.dest in values:
            value = values[option.dest]
        elif option.action == "append":
            value = list(option.default) if option.default is not None else None
        else:
            value = option.default
        setattr(out, option.dest, value)
    return out


def use_color(stream: TextIO) -> bool:
    """Colour only on a TTY, and never when ``NO_COLOR`` is set (https://no-color.org)."""
    if "NO_COLOR" in os.environ:
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def say(*lines: str) -> None:
    """Write status lines to stderr; a closed or broken stderr is ignored (never stdout,
    as ``print(file=None)`` would), so it never changes the exit code."""
    stream = sys.stderr
    if stream is None:
        return
    try:
        for line in lines:
            stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


def speak(code: int, answer: Callable[[], object], undelivered: int | None = None) -> int:
    """Say a gate's answer (``answer()``) and return ``code``, the verdict's exit code,
    even if the answer cannot be written (ADR 0003); ``undelivered`` replaces a 0 when
    the answer was the hand-over itself (``--print-payload``)."""
    try:
        answer()
    except (OSError, ValueError):  # BrokenPipeError, ENOSPC, a closed stream
        _quiet_stdout()
        return undelivered if undelivered is not None and code == 0 else code
    return code


def _quiet_stdout() -> None:
    """Point fd 1 at /dev/null after a failed write, so the last flush cannot exit 120."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    try:
        os.dup2(fd, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real descriptor (or none)
        pass
    finally:
        os.close(fd)


def error(message: str, code: int = 2) -> int:
    say(f"eidolons: {message}")
    return code


def fail(exc: EidolonsError, exit_code: int | None = None) -> int:
    """Say ``eidolons: <diagnostics()>``; return the error's exit code, or ``exit_code``."""
    say(f"eidolons: {exc.diagnostics()}")
    return exc.exit_code if exit_code is None else exit_code


def print_json(value: Any) -> None:
    # ASCII: untrusted strings (lone surrogates, non-UTF-8 names) stay valid JSON
    from eidolons.ecl.grammar import dumps

    sys.stdout.write(dumps(value, indent=2) + "\n")
    sys.stdout.flush()


def contract_set(root: Path, dirs: Sequence[str | Path] = ()) -> ContractSet | int:
    """The effective contract set, or exit 2 after ``eidolons: <file>: <why>`` (for the
    commands that show a set; the gates refuse with the loader's typed answer)."""
    from eidolons.io.contracts import ContractSetUnavailable, load_contracts

    contracts = load_contracts(root, dirs)
    if isinstance(contracts, ContractSetUnavailable):
        return error(contracts.reason)
    return contracts


def gate_memory(
    root: str | os.PathLike[str], *, disabled: bool = False
) -> tuple[Memory | None, str | None]:
    """The gate's memory and None, or None and why it is off (``disabled``: without
    importing :mod:`eidolons.memory`); never raises."""
    if disabled:
        return None, "off (--no-memory)"
    from eidolons.memory import open_gate_memory

    return open_gate_memory(root)


def project_root(explicit: str | None) -> Path | int:
    """The project root (:func:`eidolons.io.config.find_root`), or exit 2 after its one
    line when ``--root`` or ``EIDOLONS_ROOT`` is not a directory."""
    from eidolons.errors import UsageError
    from eidolons.io.config import find_root

    try:
        return find_root(explicit)
    except UsageError as exc:
        return fail(exc)
