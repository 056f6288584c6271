"""Plain reads and writes of a file the user named on the command line (a public key, an
``-o FILE``, a demo's payload): no descriptor walk beneath a root, since the user chose the
path. Every function raises :class:`OSError` as ``open()`` does."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from typing import BinaryIO

    from eidolons.io.paths import StrPath

__all__ = ["create", "empty_dir", "read_bytes", "write_bytes"]


def read_bytes(path: StrPath) -> bytes:
    """The whole file."""
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
