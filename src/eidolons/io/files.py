"""Files on ``str`` paths, ``os`` only at import: opened beneath a boundary by descriptor,
whole files, atomic writes and locks.

Beneath a boundary (ADR 0002): every component is opened relative to its parent's
descriptor with ``O_NOFOLLOW``; a link is resolved here, never above the boundary, at most
:data:`MAX_SYMLINKS`; only a regular file is opened for reading (``O_NONBLOCK``, checked by
``fstat``). :func:`open_state_path` follows no link at all, for the tool's own state.

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
import io
import os
import stat  # loaded by os itself
import time

from eidolons.errors import EidolonsError
from eidolons.io import paths as pathstr

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Mapping
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


def write_directory(path: StrPath, files: Mapping[str, tuple[bytes, int]]) -> bool:
    """Create the directory ``path`` holding ``files`` (name -> (bytes, mode)), whole or
    not at all: written beside it, then renamed in. False when ``path`` exists already with
    content (another writer put its own there first); OSError otherwise."""
    import shutil
    import tempfile

    parent = pathstr.parent(path)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".incoming-", dir=parent)
    try:
        for name, (data, mode) in files.items():
            atomic_write(pathstr.join(staging, name), data, mode)
        os.rename(staging, path)
    except OSError:
        if os.path.lexists(path):
            return False
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return True


def create_new(directory: StrPath, prefix: str, suffix: str) -> str:
    """Create an empty new file (mode 0600) under a random name in ``directory``, made if
    missing; return its path. Raises OSError."""
    os.makedirs(directory, exist_ok=True)
    fd, name = _mkstemp(os.fspath(directory), prefix, suffix)
    os.close(fd)
    return name


def _mkstemp(
    directory: str, prefix: str = ".eidolons-", suffix: str = ".tmp", dir_fd: int | None = None
) -> tuple[int, str]:
    """``tempfile.mkstemp(prefix, suffix, dir=directory)``: a new file (``O_EXCL``, no link
    followed, mode 0600) under a random name, without importing :mod:`tempfile`
    (``shutil``, ``random``: a receipt is written on every signed gate). With ``dir_fd``,
    ``directory`` is relative to that directory (``""``: in it)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | _NOFOLLOW
    for _ in range(10000):  # tempfile.TMP_MAX
        name = os.path.join(directory, f"{prefix}{os.urandom(6).hex()}{suffix}")
        try:
            return os.open(name, flags, 0o600, dir_fd=dir_fd), name
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


# --------------------------------------------------------------------------- beneath

MAX_SYMLINKS = 40
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | _CLOEXEC


class BeneathError(EidolonsError):
    """The path leaves the boundary, is a dangling or looping link, is not a regular
    file, or changed while it was being opened."""

    code = "OUTSIDE_BOUNDARY"

    def __init__(self, message: str, *, not_regular: bool = False) -> None:
        super().__init__(message)
        #: something exists and resolves inside the boundary, but is not a regular file
        self.not_regular = not_regular


class Opened:
    """A regular file opened beneath a boundary: ``fd`` (owned; closed by :meth:`close`
    or when collected), ``real`` (the boundary joined with the components actually
    opened) and ``st`` (``fstat`` of the descriptor: its identity and size)."""

    __slots__ = ("fd", "real", "st")

    def __init__(self, fd: int, real: str, st: os.stat_result) -> None:
        self.fd = fd
        self.real = real
        self.st = st

    @property
    def identity(self) -> tuple[int, int]:
        return (self.st.st_dev, self.st.st_ino)

    def file(self) -> io.FileIO:
        """A binary reader over the file from its start (a new descriptor each time)."""
        dup = os.dup(self.fd)
        os.lseek(dup, 0, os.SEEK_SET)
        return io.FileIO(dup, "rb", closefd=True)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        try:
            self.close()
        except OSError:
            pass

    def __repr__(self) -> str:
        return f"Opened({str(self.real)!r})"


def _under(boundary: str, path: str) -> str | None:
    """``path`` relative to ``boundary`` when it lies under it, else None (textual)."""
    norm = os.path.normpath(path)
    if norm == boundary:
        return ""
    prefix = boundary.rstrip("/") + "/"
    return norm[len(prefix) :] if norm.startswith(prefix) else None


def open_beneath(boundary: StrPath, rel: str, *, resolved: bool = False) -> Opened | None:
    """Open the regular file ``rel`` beneath ``boundary`` (taken as given; ``resolved``: it
    is a real path already), by descriptor from the boundary down. None when nothing is
    there; :class:`BeneathError` when what is there resolves outside, is a dangling or
    looping link, is not a regular file, or was swapped while being opened."""
    base = os.fspath(boundary) if resolved else pathstr.realpath(boundary)
    aliases = {base, os.path.normpath(os.path.abspath(boundary))}
    root_fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    stack: list[int] = [root_fd]
    names: list[str] = []
    # the components still to open, the next one last (a stack: a link's target goes on top)
    todo: list[str] = rel.split("/")[::-1]
    links = 0
    in_link = False  # once a link was followed, a missing target is dangling, not absent

    def reset() -> None:
        while len(stack) > 1:
            os.close(stack.pop())
        names.clear()

    try:
        while todo:
            comp = todo.pop()
            if comp in ("", "."):
                continue
            if comp == "..":
                if len(stack) == 1:
                    raise BeneathError(f"{rel} resolves outside {base}")
                os.close(stack.pop())
                names.pop()
                continue
            last = not any(c not in ("", ".") for c in todo)
            try:
                st = os.stat(comp, dir_fd=stack[-1], follow_symlinks=False)
            except (FileNotFoundError, NotADirectoryError):
                if in_link:
                    raise BeneathError(f"{rel} is a dangling symlink") from None
                return None
            if stat.S_ISLNK(st.st_mode):
                links += 1
                if links > MAX_SYMLINKS:
                    raise BeneathError(f"{rel}: too many levels of symbolic links")
                try:
                    target = os.readlink(comp, dir_fd=stack[-1])
                except OSError as exc:  # no longer a link: swapped since the stat
                    raise BeneathError(
                        f"{rel} changed while being opened ({exc.strerror})"
                    ) from None
                in_link = True
                if target.startswith("/"):
                    inside = next(
                        (r for r in (_under(a, target) for a in aliases) if r is not None), None
                    )
                    if inside is None:
                        raise BeneathError(f"{rel} resolves outside {base}")
                    reset()
                    todo.extend(reversed(inside.split("/")))
                else:
                    todo.extend(reversed(target.split("/")))
                continue
            if last:
                if not stat.S_ISREG(st.st_mode):
                    raise BeneathError(f"{rel} is not a regular file", not_regular=True)
                try:
                    fd = os.open(comp, _FILE_FLAGS, dir_fd=stack[-1])
                except OSError as exc:
                    raise BeneathError(
                        f"{rel} changed while being opened ({exc.strerror})"
                    ) from None
                st2 = os.fstat(fd)
                if not stat.S_ISREG(st2.st_mode):
                    os.close(fd)
                    raise BeneathError(f"{rel} is not a regular file", not_regular=True)
                os.set_blocking(fd, True)
                return Opened(fd, pathstr.join(base, *names, comp), st2)
            if not stat.S_ISDIR(st.st_mode):
                if in_link:
                    raise BeneathError(f"{rel} is a dangling symlink")
                return None
            try:
                fd = os.open(comp, _DIR_FLAGS, dir_fd=stack[-1])
            except OSError as exc:
                raise BeneathError(f"{rel} changed while being opened ({exc.strerror})") from None
            stack.append(fd)
            names.append(comp)
        raise BeneathError(f"{rel} is a directory, not a regular file", not_regular=True)
    finally:
        for fd in stack:
            os.close(fd)


def open_path_beneath(path: StrPath, boundary: StrPath, *, resolved: bool = False) -> Opened | None:
    """:func:`open_beneath` for an absolute or relative ``path`` that must lie under
    ``boundary``. A path textually outside it is refused if it exists (even as a
    dangling link), else None. ``resolved``: ``boundary`` is already a real path."""
    base = os.fspath(boundary) if resolved else pathstr.realpath(boundary)
    absolute = os.path.normpath(os.path.abspath(path))
    rel = _under(base, absolute)
    if rel is None:
        rel = _under(os.path.normpath(os.path.abspath(boundary)), absolute)
    if rel is None:
        if os.path.lexists(absolute):
            raise BeneathError(f"{path} resolves outside {base}")
        return None
    if rel == "":
        raise BeneathError(f"{path} is a directory, not a regular file", not_regular=True)
    return open_beneath(base, rel, resolved=True)


def _open_state_dir(anchor: StrPath, dirs: tuple[str, ...], *, create: bool) -> int:
    """A descriptor of the directory ``anchor/dirs...``, reached following no link below
    ``anchor`` (made one by one with ``create``). Raises :class:`OSError` as the open would,
    and :class:`BeneathError` when a component is a link or not a directory."""
    fd = os.open(anchor, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    try:
        for i, comp in enumerate(dirs):
            if create:
                try:
                    os.mkdir(comp, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                child = os.open(comp, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ENOTDIR, errno.ELOOP):
                    where = pathstr.join(anchor, *dirs[: i + 1])
                    raise BeneathError(
                        f"{where} is a symbolic link or not a directory; "
                        "the gates' state is never reached through a link"
                    ) from None
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_state_path(
    anchor: StrPath, parts: tuple[str, ...], flags: int, *, create: bool, mode: int = 0o644
) -> int:
    """Open ``anchor/parts...`` following no link below ``anchor``, for the tool's own
    state. With ``create``, missing directories are made one by one (``mkdirat``) and
    the file is created with ``mode``. Raises :class:`OSError` as the open would, and
    :class:`BeneathError` when a component is a link or not a directory."""
    fd = _open_state_dir(anchor, parts[:-1], create=create)
    try:
        try:
            return os.open(
                parts[-1],
                flags | os.O_NOFOLLOW | _CLOEXEC | (os.O_CREAT if create else 0),
                mode,
                dir_fd=fd,
            )
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise BeneathError(
                    f"{pathstr.join(anchor, *parts)} is a symbolic link; "
                    "the gates' state is never reached through a link"
                ) from None
            raise
    finally:
        os.close(fd)


def write_state_file(anchor: StrPath, rel: str, data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` as the state file ``rel`` below ``anchor``, whole: a new temporary
    file renamed over it, both in its directory reached following no link below
    ``anchor`` (missing directories are made); a link in the file's place is replaced,
    never followed. Raises :class:`BeneathError` or :class:`OSError`."""
    parts = tuple(rel.split(os.sep))  # a relative path the caller spells: no normalising
    dfd = _open_state_dir(anchor, parts[:-1], create=True)
    try:
        fd, tmp = _mkstemp("", dir_fd=dfd)
        try:
            with os.fdopen(fd, "wb") as fh:
                os.fchmod(fh.fileno(), mode)
                fh.write(data)
            os.replace(tmp, parts[-1], src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
            raise
    finally:
        os.close(dfd)


def read_state_file(anchor: StrPath, rel: str, size: int, name: str | None = None) -> bytes:
    """At most ``size`` bytes of the regular state file ``rel`` below ``anchor``
    (:func:`open_state_path`; a FIFO never blocks). Raises :class:`FileNotFoundError`,
    :class:`BeneathError` (a link, or not a regular file: ``name`` in the message) or
    :class:`OSError`."""
    parts = tuple(rel.split(os.sep))  # a constant relative path: no normalising
    fd = open_state_path(anchor, parts, os.O_RDONLY | os.O_NONBLOCK, create=False)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise BeneathError(f"{name or rel} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(size)
    finally:
        os.close(fd)
