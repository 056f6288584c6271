"""What `mypy` with no arguments checks (what land.sh and .ci/run run): the package and the
tests, strictly (ADR 0024)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_checks_the_package_and_the_tests_strictly() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["strict"] is True
    assert {"src/eidolons", "tests"} <= set(config["files"])
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "mypy" in ci  # bare: the files above, not a narrower list
