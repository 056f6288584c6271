"""``eidolons check`` (and the MCP ``check`` tool) list each distinct directory once.

A directory named 100,000 times, or by several spellings (``d``, ``d/``, ``./d``, a link
to it), or inside another named directory, is listed once: directories are told apart
by ``(st_dev, st_ino)``, not by how they were named. Counted by the ``os.scandir`` calls
on the tree, not timed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from eidolons.hosts.mcp.tools import Toolbox
from tests.conftest import run_cli

MANY = 100_000


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """``proj/d/a.envelope.json`` and ``proj/d/s/b.envelope.json``, and ``proj/link -> d``."""
    root = tmp_path / "proj"
    (root / ".eidolons").mkdir(parents=True)
    (root / "d" / "s").mkdir(parents=True)
    (root / "d" / "a.envelope.json").write_text("{}\n", encoding="utf-8")
    (root / "d" / "s" / "b.envelope.json").write_text("{}\n", encoding="utf-8")
    (root / "link").symlink_to("d")
    return root


@pytest.fixture
def listings(tree: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The real path of every directory of the tree ``os.scandir`` lists, in order."""
    seen: list[str] = []
    real_scandir = os.scandir
    inside = os.path.realpath(tree / "d")

    def counting(path: Any = ".") -> Any:
        real = os.path.realpath(path)
        if real == inside or real.startswith(inside + os.sep):
            seen.append(os.path.relpath(real, tree))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", counting)
    return seen


def _envelopes(out: dict[str, Any]) -> int:
    return int(out["envelopes"])


def test_a_directory_named_many_times_is_listed_once(tree: Path, listings: list[str]) -> None:
    r = run_cli("check", *(["d"] * MANY), "--json", cwd=tree)
    assert r.code == 2, r.err  # "{}" fails the MUSTs: what matters is what was read
    assert sorted(listings) == ["d", "d/s"]
    assert _envelopes(r.json()) == 2


def test_every_spelling_of_a_directory_is_one_directory(tree: Path, listings: list[str]) -> None:
    spellings = ["d", "d/", "./d", str(tree / "d"), "link", "link/", "d/../d"]
    r = run_cli("check", *spellings, "--json", cwd=tree)
    assert r.code == 2, r.err
    assert sorted(listings) == ["d", "d/s"]
    assert _envelopes(r.json()) == 2  # each envelope checked once, by its first spelling


@pytest.mark.parametrize("order", [["d/s", "d"], ["d", "d/s"], ["link/s", "d", "link"]])
def test_a_directory_inside_a_named_one_is_listed_once(
    tree: Path, listings: list[str], order: list[str]
) -> None:
    r = run_cli("check", *order, "--json", cwd=tree)
    assert r.code == 2, r.err
    assert sorted(listings) == ["d", "d/s"]
    assert _envelopes(r.json()) == 2


def test_a_directory_without_envelopes_is_still_refused(tree: Path) -> None:
    (tree / "empty").mkdir()
    r = run_cli("check", "d", "empty", "empty", cwd=tree)
    assert r.code == 1 and "No *.envelope.json files found under" in r.err


def test_the_mcp_check_tool_lists_a_directory_named_many_times_once(
    tree: Path, listings: list[str]
) -> None:
    box = Toolbox(tree, memory=False, log=lambda line: None)
    reply = box.check(["d", "link", "d/s", *(["d"] * 5000)])
    assert reply.structured is not None, reply.text
    assert sorted(listings) == ["d", "d/s"]
    names = sorted(Path(e["envelope"]).name for e in reply.structured["envelopes"])
    assert names == ["a.envelope.json", "b.envelope.json"]
