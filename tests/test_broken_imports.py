"""A module the CLI cannot import (a broken install, a missing dependency, a module
shadowed on ``PYTHONPATH``) is an internal error: one line, exit 70, never a traceback
and never a pass; for ``eidolons hook`` it is the hook's deny (exit 2), never the exit 1
Claude Code takes as "run the tool" (ADR 0022)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from eidolons.cli.main import main
from tests.conftest import REPO, clean_env

LAUNCHER = REPO / "bin" / "eidolons"

BROKEN = {
    "ImportError": "raise ImportError('shadowed and broken')\n",
    "SyntaxError": "def (\n",
}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("broken")
    (root / ".eidolons").mkdir()
    (root / "notes.md").write_text("not a hand-off\n")
    return root


def _spawn(
    entry: list[str], args: list[str], cwd: Path, shadow: Path
) -> subprocess.CompletedProcess[str]:
    env = clean_env(PYTHONPATH=str(shadow))
    return subprocess.run(
        [sys.executable, *entry, *args],
        cwd=cwd,
        env=env,
        input="",
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_a_module_shadowed_on_the_path_is_one_line_and_exit_70(
    kind: str, project: Path, tmp_path: Path
) -> None:
    # __future__ is the first module every eidolons module imports: shadowed, the CLI
    # cannot load at all (before: a traceback and exit 1 from either entry)
    (tmp_path / "__future__.py").write_text(BROKEN[kind])
    for entry in ([str(LAUNCHER)], ["-m", "eidolons"]):
        for args in (
            ["verify-incoming", "notes.md", "--as", "vigil"],  # the early SKIP's input
            ["verify-envelope", "notes.envelope.json", "--json"],
        ):
            proc = _spawn(entry, args, project, tmp_path)
            assert proc.returncode == 70, (entry, args, proc.stderr)
            assert "Traceback" not in proc.stderr, proc.stderr
            lines = proc.stderr.splitlines()
            assert len(lines) == 1 and lines[0].startswith(f"eidolons: internal error: {kind}:"), (
                proc.stderr
            )
            assert proc.stdout == ""


def test_the_hook_with_a_module_it_cannot_import_denies(project: Path, tmp_path: Path) -> None:
    (tmp_path / "__future__.py").write_text(BROKEN["ImportError"])
    for entry in ([str(LAUNCHER)], ["-m", "eidolons"]):
        proc = _spawn(entry, ["hook", "claude-code", "--root", str(project)], project, tmp_path)
        assert proc.returncode == 2, proc.stderr  # exit 1 would let Claude Code run the tool
        assert proc.stderr.startswith("eidolons hook: denied (internal error: ImportError:")
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_the_launchers_say_what_the_cli_says(tmp_path: Path) -> None:
    """The last resort in ``bin/eidolons`` and ``__main__`` (which cannot import the
    rule when the package is what is broken) says the line :func:`internal_error` says."""
    from eidolons.cli.main import internal_error

    (tmp_path / "__future__.py").write_text(BROKEN["ImportError"])
    proc = _spawn([str(LAUNCHER)], ["verify-envelope", "x"], tmp_path, tmp_path)
    from tests.conftest import _Capture

    err = _Capture()
    saved, sys.stderr = sys.stderr, err
    try:
        code = internal_error(ImportError("shadowed and broken"))
    finally:
        sys.stderr = saved
    assert (code, err.value()) == (proc.returncode, proc.stderr)


def _failing_import(monkeypatch: pytest.MonkeyPatch, name: str, exc: BaseException) -> None:
    real = importlib.import_module

    def fake(module: str, package: str | None = None) -> Any:
        if module == name:
            raise exc
        return real(module, package)

    monkeypatch.setattr(importlib, "import_module", fake)


@pytest.mark.parametrize(
    "exc", [SyntaxError("invalid syntax"), ImportError("no markdown_it"), RuntimeError("x")]
)
@pytest.mark.parametrize(
    "argv",
    [
        ["verify-incoming", "notes.md", "--as", "vigil"],  # the fast argv reader's command
        ["verify-envelope", "notes.envelope.json", "--json"],
        ["verify-envelope", "--help"],  # the one parser's path
        ["check", "notes.md"],
    ],
)
def test_a_command_module_that_cannot_load_is_an_internal_error(
    argv: list[str],
    exc: BaseException,
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from eidolons.cli.main import COMMANDS

    _failing_import(monkeypatch, f"eidolons.cli.{COMMANDS[argv[0]]}", exc)
    monkeypatch.chdir(project)
    assert main(argv) == 70
    out, err = capsys.readouterr()
    assert out == "" and err == f"eidolons: internal error: {type(exc).__name__}: {exc}\n"


def test_the_fast_argv_reader_that_cannot_load_is_an_internal_error(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import eidolons.cli.common as common

    monkeypatch.delattr(common, "fast_parse")  # ``from eidolons.cli.common import`` fails
    monkeypatch.chdir(project)
    assert main(["verify-incoming", "notes.md", "--as", "vigil"]) == 70
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("eidolons: internal error: ImportError: cannot import")
    assert err.count("\n") == 1


def test_a_stray_exit_while_loading_is_not_a_pass(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _failing_import(monkeypatch, "eidolons.cli.verify_incoming", SystemExit(0))
    monkeypatch.chdir(project)
    assert main(["verify-incoming", "notes.md", "--as", "vigil"]) == 70
    assert capsys.readouterr().err == "eidolons: internal error: SystemExit: 0\n"


def test_the_hook_module_that_cannot_load_denies(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "eidolons.hosts.hook.fast", None)
    assert main(["hook", "claude-code", "--root", str(project)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("eidolons hook: denied (internal error: ModuleNotFoundError:")
    assert err.count("\n") == 1


def test_the_registered_hook_command_denies_when_the_cli_cannot_load(
    project: Path, tmp_path: Path
) -> None:
    """The command ``init`` registers (``python -I -c BOOTSTRAP HOST --root ROOT``) when
    ``eidolons.cli.main`` cannot be imported: exit 2 and the deny on stderr in every dialect,
    not exit 1 (a non-blocking error for Codex and Gemini, and for Claude Code without
    ``onFailure: "block"``). Run without ``-I`` here so the shadow on ``PYTHONPATH`` is
    seen: what is tested is the bootstrap string itself."""
    from eidolons.hosts.hook.fast import BOOTSTRAP, HOSTS

    (tmp_path / "__future__.py").write_text(BROKEN["ImportError"])
    for host in HOSTS:
        proc = _spawn(["-c", BOOTSTRAP], [host, "--root", str(project)], project, tmp_path)
        assert proc.returncode == 2, (host, proc.returncode, proc.stderr)
        assert proc.stderr == (
            "eidolons hook: denied (internal error: ImportError: shadowed and broken)\n"
        )


def test_a_hook_registered_by_an_earlier_version_is_still_ours() -> None:
    from eidolons.hosts.hook.fast import BOOTSTRAP, LEGACY_BOOTSTRAPS
    from eidolons.hosts.wiring import Entry, is_ours, merge

    old = {"type": "command", "command": sys.executable, "args": ["-I", "-c", LEGACY_BOOTSTRAPS[0]]}
    new = {"type": "command", "command": sys.executable, "args": ["-I", "-c", BOOTSTRAP]}
    assert is_ours(old) and is_ours(new)
    doc: dict[str, Any] = {"hooks": {"PreToolUse": [old, {"type": "command", "command": "x"}]}}
    merge(doc, [Entry(("hooks", "PreToolUse"), new)], {})
    assert doc["hooks"]["PreToolUse"] == [new, {"type": "command", "command": "x"}]


def test_a_failure_inside_the_early_skip_is_never_a_skip(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The early SKIP (``verify_incoming._skip_early``) answers exit 0 for a file it rules
    out: a module it calls that fails is exit 70, never that 0."""
    import eidolons.io.paths

    def broken(*args: Any, **kw: Any) -> bool:
        raise ImportError("cannot import name 'read_index'")

    monkeypatch.setattr(eidolons.io.paths, "rules_out", broken)
    monkeypatch.chdir(project)
    for extra in ([], ["--json"]):
        assert main(["verify-incoming", "notes.md", "--as", "vigil", *extra]) == 70
        out, err = capsys.readouterr()
        assert out == ""
        assert err == "eidolons: internal error: ImportError: cannot import name 'read_index'\n"


@pytest.mark.parametrize(
    ("argv", "code"),
    [(["check", "."], 1), (["verify-envelope", "x.envelope.json", "--json"], 2), (["doctor"], 2)],
)
def test_a_closed_standard_output_is_a_usage_error(
    tmp_path: Path, argv: list[str], code: int
) -> None:
    """Started with fd 1 closed (``>&-``), Python's ``sys.stdout`` is None: a command says
    so in one line and exits with its usage code (2; ``check``'s is 1, the upstream
    checker's), never an internal error's AttributeError or a 0."""
    proc = subprocess.run(
        [sys.executable, "-m", "eidolons", *argv],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        close_fds=True,
        preexec_fn=lambda: os.close(1),
    )
    assert proc.returncode == code, proc.stderr
    assert proc.stderr == (
        "eidolons: standard output is closed (send it to /dev/null to discard it) [USAGE]\n"
    )
