"""``eidolons check`` gives, byte for byte, the output recorded before the speed work
(issue 12, goal 5b): stdout, stderr and exit code of every run in
:data:`tests.golden_check.corpus.RUNS` (plain, ``-q``, ``--json``, level filters,
``--strict``, HMAC key set / wrong / unset, size caps, several PATHs, usage errors) on
the generated corpus and on the twelve upstream fixtures.

A faster checker that changes one reason, one order or one exit code fails here, and the
message shows the first lines that differ.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES
from tests.golden_check import corpus

EXPECTED = corpus.decode(corpus.EXPECTED.read_bytes())


@pytest.fixture(scope="module")
def golden_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    root = tmp_path_factory.mktemp("golden").resolve() / "project"
    corpus.build(root, FIXTURES)
    return dict(corpus.run_all(root))


def _diff(expected: bytes, actual: bytes) -> str:
    lines = difflib.unified_diff(
        expected.decode("utf-8", "backslashreplace").splitlines(),
        actual.decode("utf-8", "backslashreplace").splitlines(),
        "expected",
        "actual",
        n=1,
        lineterm="",
    )
    return "\n".join(list(lines)[:40])


def test_the_corpus_covers_every_run() -> None:
    assert set(EXPECTED) == set(corpus.RUNS)


@pytest.mark.parametrize("name", sorted(corpus.RUNS))
def test_output_is_identical(name: str, golden_runs: dict[str, dict[str, Any]]) -> None:
    if name.startswith("fixtures") and not FIXTURES.is_dir():
        pytest.skip(f"upstream conformance fixtures not found at {FIXTURES}")
    expected, actual = EXPECTED[name], golden_runs[name]
    assert actual["argv"] == expected["argv"] and actual["env"] == expected["env"]
    assert actual["stdout"] == expected["stdout"], _diff(expected["stdout"], actual["stdout"])
    assert actual["stderr"] == expected["stderr"], _diff(expected["stderr"], actual["stderr"])
    assert actual["code"] == expected["code"]


def test_the_corpus_is_what_was_recorded(tmp_path: Path) -> None:
    """The generator is deterministic: the same tree twice (so the expected output is
    about these inputs, not a tree that changed under it)."""
    one, two = tmp_path / "a" / "project", tmp_path / "b" / "project"
    corpus.build(one, None)
    corpus.build(two, None)

    def listing(root: Path) -> list[tuple[str, bytes]]:
        out = []
        for p in sorted(root.rglob("*")):
            rel = str(p.relative_to(root))
            if p.is_symlink():
                link = str(p.readlink()).replace(str(root.parent), "")
                out.append((rel, f"-> {link}".encode()))
            elif p.is_file():
                out.append((rel, p.read_bytes()))
        return out

    assert listing(one) == listing(two)
    assert len([p for p in one.rglob("*.envelope.json") if p.is_file()]) > 500
