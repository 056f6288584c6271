"""The commands' plumbing, once: error printing, colour, the JSON printer, the project
root (the rule is :func:`eidolons.io.config.find_root`; the contract loader is
:func:`eidolons.io.contracts.load_contracts`), the memory opener. No command imports another
command; what two commands share lives here (``tests/test_layout.py`` checks it)."""

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
    """Write status lines to stderr. A closed or broken stderr never changes the outcome:
    a refusal still ends in its refusal exit code (and nothing falls back to stdout, as
    ``print(file=None)`` would when Python starts with fd 2 closed)."""
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
    """Say a gate's answer once its verdict is on record, and return ``code``, the exit
    code that verdict decided (ADR 0098): an answer that cannot be written (stdout or
    stderr closed, broken or full) never changes it, so a refusal on record still exits
    3 and a pass 0. ``undelivered``: the code instead of a 0 when the answer was the
    hand-over itself (``--print-payload``: the receiver did not get the bytes whole)."""
    try:
        answer()
    except (OSError, ValueError):  # BrokenPipeError, ENOSPC, a closed stream
        _quiet_stdout()
        return undelivered if undelivered is not None and code == 0 else code
    return code


def _quiet_stdout() -> None:
    """Point fd 1 at /dev/null after a failed write, so the interpreter's last flush of
    what is still buffered cannot fail and turn the exit code into 120."""
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
    """A typed error as the CLI says it: ``eidolons: <diagnostics()>`` (the message, then
    the stable code), and the error's own exit code, or ``exit_code`` where the command's
    documented code for that error differs from its class's."""
    say(f"eidolons: {exc.diagnostics()}")
    return exc.exit_code if exit_code is None else exit_code


def print_json(value: Any) -> None:
    # ASCII: untrusted strings (lone surrogates, file names that are not UTF-8) can never
    # make the encoder fail, and stay valid JSON
    from eidolons.ecl.jsontext import dumps

    sys.stdout.write(dumps(value, indent=2) + "\n")
    sys.stdout.flush()


def contract_set(root: Path, dirs: Sequence[str | Path] = ()) -> ContractSet | int:
    """For a command that reports a contract set which fails to load (``contracts``,
    ``skill``): the effective set by the one loader
    (:func:`eidolons.io.contracts.load_contracts`), or the usage exit code after its one line
    (``eidolons: <file>: <why>``). The gates take the loader's typed, fail-closed
    :class:`~eidolons.io.contracts.ContractSetUnavailable` instead and refuse with it."""
    from eidolons.io.contracts import ContractSetUnavailable, load_contracts

    contracts = load_contracts(root, dirs)
    if isinstance(contracts, ContractSetUnavailable):
        return error(contracts.reason)
    return contracts


def open_memory(root: Path) -> Memory | None:
    """The one memory opener of the commands and gates: the backend the project's
    configuration names (``EIDOLONS_MEMORY``...: :func:`eidolons.memory.open_memory`), or
    None when memory is off. Raises :class:`~eidolons.errors.UsageError` for a malformed
    configuration (``memory recall``/``stats`` print it and exit 2)."""
    from eidolons.memory import open_memory as open_configured

    return open_configured(root)


def gate_memory(
    root: str | os.PathLike[str], *, disabled: bool = False
) -> tuple[Memory | None, str | None]:
    """:func:`open_memory` for a gate command (``verify-incoming``): the memory and None,
    or None and why it is not used (``off (--no-memory)`` when ``disabled``: then
    :mod:`eidolons.memory` is not even imported); never raises
    (:func:`eidolons.memory.open_gate_memory`, which the MCP tools call too: the library
    never imports the CLI)."""
    if disabled:
        return None, "off (--no-memory)"
    from eidolons.memory import open_gate_memory

    return open_gate_memory(root)


def project_root(explicit: str | None, *, note: bool = False) -> Path | int:
    """The project root by the one rule (:func:`eidolons.io.config.find_root`: ``--root``,
    else ``EIDOLONS_ROOT``, else the nearest ancestor holding ``.eidolons/`` or ``.git/``,
    else the current directory, said on stderr with ``note``), or, when ``--root`` or
    ``EIDOLONS_ROOT`` is not a directory, the usage exit code after its one line
    (``eidolons: --root 'x' is not a directory [USAGE]``)."""
    from eidolons.errors import UsageError
    from eidolons.io.config import find_root

    try:
        return find_root(explicit, note=note)
    except UsageError as exc:
        return fail(exc)
