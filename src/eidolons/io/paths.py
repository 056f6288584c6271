"""Paths as ``str``, spelled exactly as :mod:`pathlib` spells them, ``os`` only: the hot
paths avoid importing :mod:`pathlib` (ADR 0022); ``tests/test_pathstr.py`` checks each
function against :class:`pathlib.PurePosixPath`.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    StrPath = str | os.PathLike[str]


def pure(path: StrPath) -> str:
    """``str(PurePosixPath(path))``: empty and ``.`` components dropped, a trailing
    slash dropped, exactly two leading slashes kept (POSIX leaves ``//`` to the system),
    ``.`` for nothing. ``..`` is kept (it is not lexical)."""
    text = os.fspath(path)
    if (  # already in that spelling (the common case): nothing to drop
        text
        and "//" not in text
        and "/./" not in text
        and text[-1] != "/"
        and not text.endswith("/.")
        and not text.startswith("./")
        and text != "."
    ):
        return text
    if text[:1] == "/":
        root = "//" if text[:2] == "//" and text[:3] != "///" else "/"
    else:
        root = ""
    kept = []  # a loop, not a generator: one profiler call per path, not per component
    for part in text.split("/"):
        if part and part != ".":
            kept.append(part)
    body = "/".join(kept)
    return root + body if root or body else "."


def join(*parts: StrPath) -> str:
    """``str(PurePosixPath(*parts))``: a later absolute part replaces what precedes it."""
    return pure(os.path.join(*parts) if parts else "")


def name(path: StrPath) -> str:
    """``PurePosixPath(path).name`` (empty for a root or ``.``)."""
    text = pure(path)
    return "" if text in ("/", "//", ".") else text.rpartition("/")[2]


def stem(path: StrPath) -> str:
    """``PurePosixPath(path).stem``: the name without its suffix (a last dot that is
    neither the name's first nor its last character)."""
    base = name(path)
    dot = base.rfind(".")
    return base[:dot] if 0 < dot < len(base) - 1 else base


def parent(path: StrPath) -> str:
    """``str(PurePosixPath(path).parent)``."""
    text = pure(path)
    root = "//" if text[:2] == "//" else text[:1] if text[:1] == "/" else ""
    rest = text[len(root) :]
    if "/" not in rest:
        return root or "."
    return root + rest.rpartition("/")[0]


def parts(path: StrPath) -> tuple[str, ...]:
    """``PurePosixPath(path).parts``: the root (``/`` or ``//``) if any, then each
    component."""
    text = pure(path)
    root = "//" if text[:2] == "//" else text[:1] if text[:1] == "/" else ""
    rest = text[len(root) :]
    comps = tuple(rest.split("/")) if rest and rest != "." else ()  # pure() dropped the rest
    return (root, *comps) if root else comps


def is_relative_to(path: str, base: str) -> bool:
    """:meth:`pathlib.PurePosixPath.is_relative_to` for absolute, normalised paths (as
    :func:`os.path.abspath` and :func:`os.path.realpath` give them)."""
    # POSIX keeps exactly two leading slashes (``//x``) as a root of their own
    anchor = "//" if path[:2] == "//" and path[:3] != "///" else "/"
    if anchor != ("//" if base[:2] == "//" and base[:3] != "///" else "/"):
        return False
    rest, base_rest = path[len(anchor) :], base[len(anchor) :]
    return not base_rest or rest == base_rest or rest.startswith(base_rest + "/")


def relative_to(path: str, base: str) -> str:
    """``str(PurePosixPath(path).relative_to(base))`` for absolute, normalised paths with
    :func:`is_relative_to` true."""
    path, base = pure(path), pure(base)
    if path == base:
        return "."
    if base in ("/", "//"):
        return path[len(base) :]
    return path[len(base) + 1 :]
