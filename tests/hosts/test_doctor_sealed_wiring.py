"""``eidolons doctor`` on a project wired to Claude Code: the host's own rules for the file
tools' writes of the wiring, and a project whose git history keeps the sealed directories
(every sandboxed shell reads ``.git``)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import clean_env, emit_payload, run_cli


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return clean_env(XDG_CONFIG_HOME=str(tmp_path / "xdg"))


@pytest.fixture
def wired(project: Path, env: dict[str, str]) -> Path:
    assert run_cli("init", "--hosts", "claude-code", cwd=project, env=env).code == 0
    return project


def hosts(project: Path, env: dict[str, str]) -> list[dict[str, str]]:
    r = run_cli("doctor", "--json", cwd=project, env=env)
    return [f for f in r.json()["findings"] if f["check"] == "hosts"]


def test_doctor_reports_wiring_the_file_tools_may_write(wired: Path, env: dict[str, str]) -> None:
    assert hosts(wired, env) == []
    settings = wired / ".claude" / "settings.json"
    doc = json.loads(settings.read_text())
    doc["permissions"]["deny"] = [r for r in doc["permissions"]["deny"] if ".codex" not in r]
    settings.write_text(json.dumps(doc))
    found = hosts(wired, env)
    assert [f["subject"] for f in found] == [".codex/hooks.json", ".codex/config.toml"], found
    assert all("Edit(./.codex/" in f["message"] for f in found), found


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_doctor_reports_handoffs_the_projects_git_keeps(wired: Path, env: dict[str, str]) -> None:
    cli: Any = lambda *a, **kw: run_cli(*a, cwd=wired, env=env, **kw)  # noqa: E731
    emit_payload(cli, wired, "drafts/report.md")
    git = ["git", "-c", "user.name=Dev", "-c", "user.email=dev@example.invalid"]
    for args in (["init", "-q"], ["add", "-A"], ["add", "-f", ".eidolons"], ["commit", "-qm", "x"]):
        subprocess.run([*git, *args], cwd=wired, check=True, capture_output=True)
    found = [f for f in hosts(wired, env) if f["subject"] == ".eidolons/handoffs"]
    assert len(found) == 1 and "git keeps 2 files" in found[0]["message"], found


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_repository_git_cannot_list_is_a_finding_not_a_clean_report(
    wired: Path, env: dict[str, str]
) -> None:
    """Whether git keeps the hand-offs is unknown when git fails on the repository (a
    damaged index): a finding, never a check passed by default."""
    subprocess.run(["git", "init", "-q"], cwd=wired, check=True, capture_output=True)
    (wired / ".git" / "index").write_bytes(b"not an index")
    found = [f for f in hosts(wired, env) if f["subject"] == "git"]
    assert len(found) == 1, hosts(wired, env)
    assert found[0]["message"].startswith("cannot ask git which sealed files it keeps: ")


def test_doctor_reports_a_configured_handoff_dir_git_would_store(
    wired: Path, env: dict[str, str]
) -> None:
    """A hand-off directory the configuration adds outside .eidolons/ without the
    .gitignore init writes there: a project checked in whole would store its hand-offs."""
    (wired / ".eidolons" / "config.toml").write_text('[handoffs]\ndirs = ["inbox"]\n')
    found = [f for f in hosts(wired, env) if f["subject"] == "inbox"]
    assert len(found) == 1 and "git" in found[0]["message"], found
    assert run_cli("init", "--hosts", "claude-code", cwd=wired, env=env).code == 0
    assert [f for f in hosts(wired, env) if f["subject"] == "inbox"] == []


def test_init_and_doctor_say_what_the_claude_code_seal_does_not_cover(
    project: Path, env: dict[str, str]
) -> None:
    """A ``.claude/`` a shell makes below the root is not write-protected (the sandbox
    denies only the paths it names): both commands say so, in words, on every run."""
    r = run_cli("init", "--hosts", "claude-code", cwd=project, env=env)
    assert r.code == 0
    said = [line for line in r.err.splitlines() if "below the project root" in line]
    assert said and said[0].startswith("init: note: claude-code: "), r.err
    assert "pkg/.claude/skills/" in said[0] and "outside it" in said[0]
    notes = run_cli("doctor", "--json", cwd=project, env=env).json()["notes"]
    assert [n for n in notes if "below the project root" in n] == [said[0][len("init: note: ") :]]
    plain = run_cli("init", "--hosts", "cursor", cwd=project, env=env)
    assert "below the project root" not in plain.err
