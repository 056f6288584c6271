"""One way of speaking: -V, every --help with examples and the exit-code
vocabulary, shell completion by shtab at no start-up cost, and check's -q, --fail-on,
--exit-zero with cwd-relative `path: gate level ...` lines."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from eidolons import __version__
from eidolons.cli.main import COMMANDS
from tests.conftest import FIXTURES, clean_env, needs_fixtures, run_cli


def test_short_version_flag(tmp_path: Path) -> None:
    for flag in ("-V", "--version"):
        r = run_cli(flag, cwd=tmp_path)
        assert r.code == 0 and r.out == f"eidolons {__version__}\n"


@pytest.mark.parametrize("command", sorted(set(COMMANDS) - {"hook"}))
def test_every_help_has_examples_and_exit_codes(tmp_path: Path, command: str) -> None:
    from eidolons.cli.main import _load

    if _load(command) is None:
        pytest.skip(f"{command} is not built in this version")
    r = run_cli(command, "--help", cwd=tmp_path)
    assert r.code == 0, r.err
    assert "examples:\n  eidolons " in r.out and "exit codes" in r.out


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts(tmp_path: Path, shell: str) -> None:
    r = run_cli("completion", shell, cwd=tmp_path)
    assert r.code == 0 and "verify-incoming" in r.out and "require-envelope" in r.out


def test_completion_bad_shell_and_no_start_up_cost(tmp_path: Path) -> None:
    r = run_cli("completion", "tcsh", cwd=tmp_path)
    assert r.code == 2 and r.err.count("\n") == 1
    code = (
        "import sys; from eidolons.cli.main import main; main(['contracts', 'list']); "
        "print(sorted(m for m in ('shtab', 'markdown_it') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=clean_env(), capture_output=True,
        text=True, timeout=60,
    ).stdout  # fmt: skip
    assert out.splitlines()[-1] == "[]"


@needs_fixtures
def test_check_quiet_lines_tell_two_same_named_envelopes_apart(tmp_path: Path) -> None:
    for d in ("a", "b"):
        shutil.copytree(FIXTURES / "missing-integrity", tmp_path / d)
    r = run_cli("check", "a", "b", "-q", cwd=tmp_path)
    assert r.code == 2
    lines = r.out.splitlines()
    assert any(x.startswith("a/scout-report.envelope.json: I-3 MUST fail ") for x in lines)
    assert any(x.startswith("b/scout-report.envelope.json: I-3 MUST fail ") for x in lines)
    assert all(" ok " not in x for x in lines) and "ECL conformance check" not in r.out


@needs_fixtures
def test_check_fail_on_and_exit_zero(tmp_path: Path) -> None:
    warn_only = FIXTURES / "high-trust-sha256-v2"
    assert run_cli("check", warn_only, cwd=tmp_path).code == 4
    assert run_cli("check", warn_only, "--fail-on", "must", cwd=tmp_path).code == 0
    failing = FIXTURES / "missing-integrity"
    assert run_cli("check", failing, "--fail-on", "must", cwd=tmp_path).code == 2
    assert run_cli("check", failing, "--exit-zero", cwd=tmp_path).code == 0
    assert run_cli("check", failing, "--fail-on", "never", cwd=tmp_path).code == 1


def test_mistyped_command_names_the_nearest_one(tmp_path: Path) -> None:
    r = run_cli("verfy-envelope", "x", cwd=tmp_path)
    assert r.code == 2 and r.out == ""
    error = r.err.splitlines()[-1]
    assert error == (
        "eidolons: error: unknown command 'verfy-envelope' (did you mean 'verify-envelope'?)"
    )


def test_command_nothing_is_near_keeps_the_list_of_commands(tmp_path: Path) -> None:
    r = run_cli("zzzz", cwd=tmp_path)
    assert r.code == 2 and "did you mean" not in r.err
    assert "invalid choice: 'zzzz'" in r.err and "verify-envelope" in r.err
