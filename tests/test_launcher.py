"""The console launcher (ADR 0022): a plain script that runs the CLI, so nothing is
imported before our code (pip's generated entry-point shim imports ``re``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, clean_env

LAUNCHER = REPO / "bin" / "eidolons"


def imported(argv: list[str], cwd: Path, stdin: str = "", **extra: str) -> tuple[set[str], int]:
    """The modules a fresh interpreter imports running ``argv`` (``-X importtime``)."""
    env = clean_env(**extra)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )
    names = {
        line.rsplit("|", 1)[1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    return names, proc.returncode


def test_installed_script_is_the_launcher() -> None:
    installed = Path(sys.executable).parent / "eidolons"
    if not installed.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"no console script at {installed}")
        pytest.skip(f"no console script at {installed} (not installed here)")
    body = installed.read_text().splitlines()
    assert body[0].startswith("#!") and "python" in body[0]
    assert body[1:] == LAUNCHER.read_text().splitlines()[1:]


def test_launcher_imports_no_re_on_the_no_work_path(tmp_path: Path) -> None:
    (tmp_path / ".eidolons").mkdir()
    event = {
        "hook_event_name": "PreToolUse",
        "tool_name": "Read",
        "tool_input": {"file_path": str(tmp_path / "src.py")},
        "cwd": str(tmp_path),
    }
    argv = [str(LAUNCHER), "hook", "claude-code", "--root", str(tmp_path)]
    names, code = imported(argv, tmp_path, json.dumps(event))
    assert code == 0
    assert "eidolons.cli.main" in names  # the launcher ran the CLI
    assert not {"re", "argparse", "json", "pathlib", "typing"} & names


def test_launcher_behaves_as_the_module(tmp_path: Path) -> None:
    for args in (["--version"], ["--help"], ["verify-envelope"], ["nope"]):
        a = subprocess.run(
            [sys.executable, str(LAUNCHER), *args], capture_output=True, text=True, timeout=60
        )
        b = subprocess.run(
            [sys.executable, "-m", "eidolons", *args], capture_output=True, text=True, timeout=60
        )
        assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)
