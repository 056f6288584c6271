"""Opening files beneath a boundary directory, by descriptor (ADR 0002).

Every component is opened relative to its parent's descriptor with ``O_NOFOLLOW``; a link
is resolved here, never above the boundary, at most :data:`MAX_SYMLINKS`; only a regular
file is opened for reading (``O_NONBLOCK``, checked by ``fstat``). :func:`open_state_path`
follows no link at all, for the tool's own state.
"""

from __future__ import annotations

import errno
import io
import os
import stat

from eidolons.errors import EidolonsError
from eidolons.io import paths as pathstr

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from eidolons.io.paths import StrPath

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
    base = os.fspath(boundary) if resolved else os.path.realpath(boundary)
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
                target = os.readlink(comp, dir_fd=stack[-1])
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
    base = os.fspath(boundary) if resolved else os.path.realpath(boundary)
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


def open_state_path(
    anchor: StrPath, parts: tuple[str, ...], flags: int, *, create: bool, mode: int = 0o644
) -> int:
    """Open ``anchor/parts...`` following no link below ``anchor``, for the tool's own
    state. With ``create``, missing directories are made one by one (``mkdirat``) and
    the file is created with ``mode``. Raises :class:`OSError` as the open would, and
    :class:`BeneathError` when a component is a link or not a directory."""
    fd = os.open(anchor, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    try:
        for i, comp in enumerate(parts[:-1]):
            if create:
                try:
                    os.mkdir(comp, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                child = os.open(comp, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ENOTDIR, errno.ELOOP):
                    where = pathstr.join(anchor, *parts[: i + 1])
                    raise BeneathError(
                        f"{where} is a symbolic link or not a directory; "
                        "the gates' state is never reached through a link"
                    ) from None
                raise
            os.close(fd)
            fd = child
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
