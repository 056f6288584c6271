"""What two commands share (no command imports another): status lines, the JSON
printer, colour, the project root, the contract set and the gate's memory."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path
    from typing import Any, TextIO

    from eidolons.errors import EidolonsError
    from eidolons.io.contracts import ContractSet
    from eidolons.memory import Memory


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


def project_root(explicit: str | None, *, note: bool = False) -> Path | int:
    """The project root (:func:`eidolons.io.config.find_root`), or exit 2 after its one
    line when ``--root`` or ``EIDOLONS_ROOT`` is not a directory."""
    from eidolons.errors import UsageError
    from eidolons.io.config import find_root

    try:
        return find_root(explicit, note=note)
    except UsageError as exc:
        return fail(exc)
