"""``eidolons init``: idempotent, merging, never overwriting what it did not write, undoable;
and the hook it registers really runs and really blocks."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Run, clean_env, emit_payload, run_cli

FOREIGN: dict[str, Any] = {  # a settings.json of the user's, as JSON reads it
    "model": "opus",
    "hooks": {
        "PreToolUse": [{"matcher": "Write", "hooks": [{"type": "command", "command": "mine"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify"}]}],
    },
    "permissions": {"deny": ["Read(./.env)"], "allow": ["Bash(npm test)"]},
}


@pytest.fixture
def init(tmp_path: Path, project: Path) -> Any:
    env = clean_env(XDG_CONFIG_HOME=str(tmp_path / "xdg"))

    def _run(*args: str) -> Run:
        return run_cli("init", *args, cwd=project, env=env)

    return _run


def settings(project: Path) -> dict[str, Any]:
    doc = json.loads((project / ".claude" / "settings.json").read_text())
    assert isinstance(doc, dict)
    return doc


def our_handler(doc: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    for group in doc["hooks"]["PreToolUse"]:
        for handler in group["hooks"]:
            if "args" in handler and "hook" in " ".join(handler["args"]):
                return group, handler
    raise AssertionError("no eidolons hook")


def test_init_wires_claude_code_fail_closed(init: Any, project: Path) -> None:
    r = init("--hosts", "claude-code")
    assert r.code == 0, r.err
    assert "init: created .eidolons/handoffs/" in r.out.splitlines()
    group, handler = our_handler(settings(project))
    assert group["matcher"] == "*"
    assert handler["onFailure"] == "block" and handler["timeout"] == 30
    assert Path(handler["command"]).is_absolute() and handler["args"][:2] == ["-I", "-c"]
    assert handler["args"][-3:] == ["claude-code", "--root", str(project)]
    deny = settings(project)["permissions"]["deny"]
    assert f"Edit(/{project}/.eidolons/.trace/**)" in deny
    assert f"Read(/{project}/.eidolons/keys/**)" in deny
    assert (project / ".eidolons" / ".ignore").read_text().splitlines()[1:] == [
        "handoffs/",
        "keys/",
        "memory/",
    ]
    assert (project / ".eidolons" / "trust.json").is_file()  # keys init ran


def test_init_is_idempotent(init: Any, project: Path) -> None:
    assert init("--hosts", "claude-code,cursor").code == 0
    before = {
        p: p.read_bytes() for p in project.rglob("*") if p.is_file() and ".trace" not in p.parts
    }
    r = init("--hosts", "claude-code,cursor")
    assert r.code == 0
    assert all(" unchanged " in f" {line} " for line in r.out.splitlines()), r.out
    after = {
        p: p.read_bytes() for p in project.rglob("*") if p.is_file() and ".trace" not in p.parts
    }
    assert after == before


def test_init_merges_and_undo_restores_foreign_settings(init: Any, project: Path) -> None:
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps(FOREIGN))
    assert init("--hosts", "claude-code").code == 0
    doc = settings(project)
    assert doc["model"] == "opus" and doc["hooks"]["Stop"] == FOREIGN["hooks"]["Stop"]
    assert doc["hooks"]["PreToolUse"][0] == FOREIGN["hooks"]["PreToolUse"][0]
    assert doc["permissions"]["allow"] == ["Bash(npm test)"]
    assert doc["permissions"]["deny"][0] == "Read(./.env)"
    r = init("--undo")
    assert r.code == 0, r.err
    assert settings(project) == FOREIGN
    assert not (project / ".eidolons" / ".ignore").exists()
    assert (project / ".eidolons" / "trust.json").exists()  # keys are never removed


def test_init_updates_its_own_stale_entry_in_place(init: Any, project: Path) -> None:
    assert init("--hosts", "claude-code").code == 0
    doc = settings(project)
    _, handler = our_handler(doc)
    handler["command"] = "/old/python"
    del handler["onFailure"]
    (project / ".claude" / "settings.json").write_text(json.dumps(doc))
    assert init("--hosts", "claude-code").code == 0
    groups = settings(project)["hooks"]["PreToolUse"]
    assert len(groups) == 1 and our_handler(settings(project))[1]["onFailure"] == "block"


def test_init_never_overwrites_a_file_it_cannot_merge(init: Any, project: Path) -> None:
    (project / ".claude").mkdir()
    path = project / ".claude" / "settings.json"
    path.write_text('{"hooks": ')
    r = init("--hosts", "claude-code")
    assert r.code == 2 and "not valid JSON" in r.err
    assert path.read_text() == '{"hooks": '
    path.write_text('{"a": 1, "a": 2}')
    assert init("--hosts", "claude-code").code == 2
    r = init("--hosts", "claude-code", "--force")
    assert r.code == 0
    assert Path(f"{path}.bak").read_text() == '{"a": 1, "a": 2}'
    our_handler(settings(project))


def test_dry_run_writes_nothing(init: Any, project: Path) -> None:
    r = init("--hosts", "claude-code,codex", "--dry-run")
    assert r.code == 0
    assert "init: would create .claude/settings.json" in r.out
    assert sorted(p.name for p in project.iterdir()) == [".eidolons"]
    assert list((project / ".eidolons").iterdir()) == []


def test_other_hosts_are_wired_fail_closed(init: Any, project: Path) -> None:
    assert init("--hosts", "cursor,codex,gemini,copilot").code == 0
    cursor = json.loads((project / ".cursor" / "hooks.json").read_text())
    assert cursor["version"] == 1
    for event in ("beforeReadFile", "preToolUse", "beforeShellExecution"):
        (handler,) = cursor["hooks"][event]
        assert handler["failClosed"] is True and "cursor --root" in handler["command"]
    codex = json.loads((project / ".codex" / "hooks.json").read_text())
    (group,) = codex["hooks"]["PreToolUse"]
    assert "matcher" not in group and "codex --root" in group["hooks"][0]["command"]
    gemini = json.loads((project / ".gemini" / "settings.json").read_text())
    assert gemini["hooks"]["BeforeTool"][0]["matcher"] == ".*"
    copilot = json.loads((project / ".github" / "hooks" / "eidolons.json").read_text())
    assert copilot["version"] == 1 and "copilot --root" in copilot["hooks"]["preToolUse"][0]["bash"]
    assert init("--undo").code == 0
    assert not (project / ".cursor" / "hooks.json").exists()
    assert not (project / ".github" / "hooks" / "eidolons.json").exists()


def test_unknown_host_is_a_usage_error(init: Any) -> None:
    r = init("--hosts", "claude-code,emacs")
    assert r.code == 2 and "emacs" in r.err


def test_receiver_agent_with_a_shell_gets_advice(init: Any, project: Path) -> None:
    agents = project / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "vigil.md").write_text("---\nname: vigil\ndescription: d\ntools: Read, Bash\n---\n")
    (agents / "gilgamesh.md").write_text("---\nname: gilgamesh\ndescription: d\n---\n")
    (agents / "helper.md").write_text("---\nname: helper\ndescription: d\ntools: Bash\n---\n")
    r = init("--hosts", "claude-code")
    advice = [line for line in r.err.splitlines() if line.startswith("init: advice: ")]
    assert len(advice) == 2
    assert any("vigil has Bash" in a for a in advice)
    assert any("gilgamesh names no tools" in a for a in advice)
    assert all("tools: Read, Grep, Glob, mcp__eidolons__read_verified" in a for a in advice)


def test_the_registered_command_runs_and_blocks(
    init: Any, cli: Any, project: Path, tmp_path: Path
) -> None:
    """The exact argv init registered, as Claude Code would spawn it (a real process)."""
    assert init("--hosts", "claude-code").code == 0
    payload, _, _ = emit_payload(cli, project, ".eidolons/handoffs/r.md")
    _, handler = our_handler(settings(project))
    env = clean_env(XDG_CONFIG_HOME=str(tmp_path / "xdg"))

    def read(path: Path) -> subprocess.CompletedProcess[str]:
        event = {
            "session_id": "s",
            "cwd": str(project),
            "hook_event_name": "PreToolUse",
            "tool_name": "Read",
            "tool_input": {"file_path": str(path)},
            "agent_id": "a",
            "agent_type": "vigil",
        }
        return subprocess.run(
            [handler["command"], *handler["args"]],
            input=json.dumps(event),
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=60,
        )

    proc = read(payload)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == "[vigil-verify-incoming] REFUSE: UNVERIFIED from atlas"
    proc = read(project / "README.md")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
