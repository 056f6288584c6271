"""Writing a file whole: through a temporary file beside it and a rename, so a reader
never sees half of it. The one place the package writes a file atomically."""

from __future__ import annotations

import os

from eidolons.io import paths as pathstr

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from eidolons.io.paths import StrPath

__all__ = ["atomic_write", "readable_mode"]


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


def _mkstemp(directory: str) -> tuple[int, str]:
    """``tempfile.mkstemp(prefix=".eidolons-", suffix=".tmp", dir=directory)``: a new file
    (``O_EXCL``, no link followed, mode 0600) under a random name, without importing
    :mod:`tempfile` (``shutil``, ``random``: a receipt is written on every signed gate)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    flags |= getattr(os, "O_CLOEXEC", 0)
    for _ in range(10000):  # tempfile.TMP_MAX
        name = os.path.join(directory, f".eidolons-{os.urandom(6).hex()}.tmp")
        try:
            return os.open(name, flags, 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(f"no usable temporary name in {directory}")
