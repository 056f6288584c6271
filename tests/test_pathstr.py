"""``eidolons.io.paths`` spells every path as :class:`pathlib.PurePosixPath` does."""

from __future__ import annotations

import random
from pathlib import PurePosixPath

from eidolons.io import paths as pathstr

PIECES = ["", "/", "//", "///", ".", "..", "a", "b.c", "x y", "é", ".hidden", "a.b.c", "-"]


def generated(n: int = 4000) -> list[str]:
    rng = random.Random(5)
    out = ["", ".", "/", "//", "///", "./", "a//b", "/./a/./", "//a/b", "a/..", "../a"]
    for _ in range(n):
        out.append("".join(rng.choice(PIECES) + rng.choice(["", "/", "//"]) for _ in range(4)))
    return out


def test_pure_name_parent_equal_pathlib() -> None:
    for text in generated():
        p = PurePosixPath(text)
        assert pathstr.pure(text) == str(p), text
        assert pathstr.name(text) == p.name, text
        assert pathstr.parent(text) == str(p.parent), text
        assert pathstr.parts(text) == p.parts, text
        assert pathstr.stem(text) == p.stem, text


def test_join_equals_pathlib() -> None:
    rng = random.Random(6)
    values = generated(800)
    for _ in range(3000):
        parts = rng.sample(values, rng.randint(1, 3))
        assert pathstr.join(*parts) == str(PurePosixPath(*parts)), parts


def test_relative_to_equals_pathlib() -> None:
    rng = random.Random(7)
    absolute = [pathstr.pure("/" + t) for t in generated(600)] + ["//x/y", "//x"]
    for _ in range(3000):
        path, base = rng.choice(absolute), rng.choice(absolute)
        if rng.random() < 0.5:
            path = pathstr.join(base, rng.choice(["a", "a/b", "", "c.d"]))
        p, b = PurePosixPath(path), PurePosixPath(base)
        assert pathstr.is_relative_to(path, base) is p.is_relative_to(b), (path, base)
        if p.is_relative_to(b):
            assert pathstr.relative_to(path, base) == str(p.relative_to(b)), (path, base)
