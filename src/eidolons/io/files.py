"""Whole files and file locks, on ``str`` paths, ``os`` only at import.

A write goes through a temporary file beside the target and a rename, so a reader never
sees half of it: the one place the package writes a file atomically. The plain reads and
writes (:func:`read_bytes`, :func:`write_bytes`, :func:`create`) are for a file the user
named (a public key, an ``-o FILE``): no walk beneath a root, since the user chose it. A
lock is waited for until a deadline (:func:`flock_until`): an agent can hold a lock on any
project file forever.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat  # loaded by os itself
import time

from eidolons.io import paths as pathstr

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Any, BinaryIO

    from eidolons.io.paths import StrPath

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class FileContentError(ValueError):
    """A file that cannot be read as what it should hold; the message names the file."""


def readable_mode() -> int:
    """The mode ``open()`` gives a new file under this process's umask (0666 less it): for
    files others must read (an envelope, a receipt) where ``mkstemp`` would make 0600."""
    mask = os.umask(0o022)  # the umask can only be read by setting it
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write(path: StrPath, data: bytes, mode: int) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename (never half a file)."""
    directory = pathstr.parent(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp_name = _mkstemp(directory)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp_name, path)
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)


def write_text(path: StrPath, text: str, mode: int = 0o644) -> None:
    """:func:`atomic_write` of ``text`` as UTF-8."""
    atomic_write(path, text.encode("utf-8"), mode)


def read_text(path: StrPath, limit: int | None = None, errors: str = "strict") -> str | None:
    """The text of ``path`` (UTF-8; with ``limit``, its first ``limit`` bytes, less a
    character cut in two); None when it does not exist. Raises OSError, UnicodeDecodeError."""
    try:
        with open(path, "rb") as fh:
            data = fh.read() if limit is None else fh.read(limit)
    except FileNotFoundError:
        return None
    try:
        return data.decode("utf-8", errors)
    except UnicodeDecodeError as exc:
        if limit is None or len(data) < limit or exc.reason != "unexpected end of data":
            raise
        return data[: exc.start].decode("utf-8", errors)


def read_regular(path: StrPath, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of the regular file ``path``, its last link not followed
    (a caller sees a file over ``limit`` by its length). Raises OSError (ELOOP for a link,
    EINVAL for anything but a regular file)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | _NOFOLLOW)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        chunks, remaining = [], limit + 1
        while remaining > 0:
            chunk = os.read(fd, remaining)
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_json_object(path: StrPath, limit: int | None = None) -> dict[str, Any] | None:
    """The JSON object in ``path`` (no duplicate keys); None when it does not exist.
    Raises :class:`FileContentError` when it cannot be read or is not one."""
    import json

    try:
        text = read_text(path, limit)
    except (OSError, UnicodeDecodeError) as exc:
        raise FileContentError(f"cannot read {path}: {exc}") from None
    if text is None:
        return None
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicates)
    except ValueError as exc:
        raise FileContentError(f"{path} is not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise FileContentError(f"{path} is not a JSON object")
    return doc


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def package_text(*parts: str) -> str:
    """The text of the package's file ``eidolons/<parts>`` (as installed)."""
    from importlib import resources

    return resources.files("eidolons").joinpath(*parts).read_text(encoding="utf-8")


def move_aside(path: StrPath, to: StrPath) -> None:
    """Rename ``path`` to ``to`` (replacing it)."""
    os.replace(path, to)


def create_new(directory: StrPath, prefix: str, suffix: str) -> str:
    """Create an empty new file (mode 0600) under a random name in ``directory``, made if
    missing; return its path. Raises OSError."""
    os.makedirs(directory, exist_ok=True)
    fd, name = _mkstemp(os.fspath(directory), prefix, suffix)
    os.close(fd)
    return name


def _mkstemp(directory: str, prefix: str = ".eidolons-", suffix: str = ".tmp") -> tuple[int, str]:
    """``tempfile.mkstemp(prefix, suffix, dir=directory)``: a new file (``O_EXCL``, no link
    followed, mode 0600) under a random name, without importing :mod:`tempfile`
    (``shutil``, ``random``: a receipt is written on every signed gate)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | _NOFOLLOW
    for _ in range(10000):  # tempfile.TMP_MAX
        name = os.path.join(directory, f"{prefix}{os.urandom(6).hex()}{suffix}")
        try:
            return os.open(name, flags, 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(f"no usable temporary name in {directory}")


def read_bytes(path: StrPath) -> bytes:
    """The whole file the user named (OSError as ``open()``)."""
    with open(path, "rb") as fh:
        return fh.read()


def write_bytes(
    path: StrPath, data: bytes, *, mode: int | None = None, parents: bool = False
) -> None:
    """Write ``data`` to ``path`` (created or truncated; with ``parents``, its missing
    parent directories too), then set its ``mode`` if given."""
    if parents:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data)
    if mode is not None:
        os.chmod(path, mode)


def create(path: StrPath) -> BinaryIO:
    """A new file open for writing (``FileExistsError`` if ``path`` exists)."""
    return open(path, "xb")


def empty_dir(path: StrPath) -> bool:
    """Create ``path`` and its parents if missing; whether it is empty."""
    os.makedirs(path, exist_ok=True)
    return not os.listdir(path)


FIRST_SLEEP_S = 0.001
MAX_SLEEP_S = 0.02  # an honest holder keeps a lock for milliseconds


class LockTimeout(TimeoutError):
    """A lock another process held past the deadline."""


def deadline(seconds: float | None = None) -> float:
    """The monotonic time a wait for a lock ends: ``seconds`` from now, else the trace
    timeout (``EIDOLONS_TRACE_TIMEOUT_S``) from now. Raises
    :class:`~eidolons.errors.UsageError` for a bad value."""
    from eidolons.io.config import trace_timeout_s  # the configuration: only when waiting

    return time.monotonic() + (trace_timeout_s() if seconds is None else seconds)


def flock_until(fd: int, until: float, name: object) -> None:
    """An exclusive ``flock`` on ``fd``, tried with ``LOCK_NB`` and retried until the
    monotonic time ``until``; past it :class:`LockTimeout` (an OSError, so a caller's
    handling of a file it cannot open covers it; ``name`` says which file)."""
    started = time.monotonic()
    pause = FIRST_SLEEP_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        now = time.monotonic()
        if now >= until:
            raise LockTimeout(
                errno.ETIMEDOUT,
                f"{name} is locked by another process: gave up after "
                f"{now - started:.1f} s (EIDOLONS_TRACE_TIMEOUT_S)",
            )
        time.sleep(min(pause, until - now))
        pause = min(pause * 2, MAX_SLEEP_S)
