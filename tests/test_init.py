"""``eidolons init``: idempotent, merging, never overwriting what it did not write, undoable;
and the hook it registers really runs and really blocks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
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
    doc = settings(project)
    group, handler = our_handler(doc)
    assert group["matcher"] == "*"
    assert handler["onFailure"] == "block" and handler["timeout"] == 30
    assert handler["command"] == "${CLAUDE_PROJECT_DIR}/.claude/hooks/eidolons"
    assert handler["args"] == ["hook", "claude-code"]
    sandbox = doc["sandbox"]
    assert sandbox["enabled"] is True and sandbox["allowUnsandboxedCommands"] is False
    assert sandbox["failIfUnavailable"] is True
    assert "./.eidolons/handoffs" in sandbox["filesystem"]["denyRead"]
    assert sandbox["filesystem"]["denyWrite"][0] == "./.eidolons"
    for wiring in (".codex/hooks.json", ".cursor/hooks.json", ".agents/skills", ".github/hooks"):
        assert f"./{wiring}" in sandbox["filesystem"]["denyWrite"]
    assert "Edit(./.eidolons/.trace/**)" in doc["permissions"]["deny"]
    assert "Read(./.eidolons/keys/**)" in doc["permissions"]["deny"]
    assert (project / ".eidolons" / ".ignore").read_text().splitlines()[1:] == [
        "handoffs/",
        "keys/",
        "memory/",
        "verified/",
    ]
    assert (project / ".eidolons" / "trust.json").is_file()  # keys init ran
    assert (project / ".eidolons" / "sealed").is_file()
    assert "the sandbox is on for every Bash command" in r.err


def test_the_shared_wiring_names_no_path_of_this_machine(init: Any, project: Path) -> None:
    assert init("--hosts", "claude-code").code == 0
    shared = (project / ".claude" / "settings.json").read_text()
    shared += (project / ".mcp.json").read_text()
    assert str(project) not in shared and sys.executable not in shared
    local = json.loads((project / ".claude" / "settings.local.json").read_text())
    assert os.access(local["env"]["EIDOLONS_PYTHON"], os.X_OK)
    assert local["enabledMcpjsonServers"] == ["eidolons"]
    import eidolons

    denied = local["sandbox"]["filesystem"]["denyWrite"]
    assert os.path.realpath(os.path.dirname(eidolons.__file__ or "")) in denied
    # the venv's root too: its pyvenv.cfg names the interpreter and stdlib the gate starts
    assert {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)} <= set(denied)
    server = json.loads((project / ".mcp.json").read_text())["mcpServers"]["eidolons"]
    assert server == {"command": ".claude/hooks/eidolons", "args": ["mcp", "serve"]}
    launcher = project / ".claude" / "hooks" / "eidolons"
    assert os.access(launcher, os.X_OK) and str(project) not in launcher.read_text()


def test_skills_are_installed_for_the_projects_receivers_only(init: Any, project: Path) -> None:
    agents = project / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "vigil.md").write_text("---\nname: vigil\ndescription: d\ntools: Read\n---\n")
    assert init("--hosts", "claude-code").code == 0
    skills = sorted(p.name for p in (project / ".claude" / "skills").iterdir())
    assert skills == ["vigil-verify-incoming"]


def test_no_receiver_no_skill_and_the_note_says_how(init: Any, project: Path) -> None:
    r = init("--hosts", "claude-code")
    assert r.code == 0 and not (project / ".claude" / "skills").exists()
    assert "--receivers" in r.err
    assert init("--hosts", "claude-code", "--receivers", "apivr").code == 0
    skills = sorted(p.name for p in (project / ".claude" / "skills").iterdir())
    assert skills == ["apivr-verify-incoming"]


def test_other_hosts_are_told_their_shell_is_not_sealed(init: Any, project: Path) -> None:
    r = init("--hosts", "cursor,codex")
    assert r.code == 0
    notes = [line for line in r.err.splitlines() if "not for its shell" in line]
    assert [n.split(":")[2].strip() for n in notes] == ["cursor", "codex"], r.err
    assert "an administrator can seal it: docs/hosts.md" in notes[1]


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


def test_a_receiver_agent_without_a_tool_list_gets_advice(init: Any, project: Path) -> None:
    agents = project / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "vigil.md").write_text("---\nname: vigil\ndescription: d\ntools: Read, Bash\n---\n")
    (agents / "gilgamesh.md").write_text("---\nname: gilgamesh\ndescription: d\n---\n")
    (agents / "helper.md").write_text("---\nname: helper\ndescription: d\ntools: Bash\n---\n")
    r = init("--hosts", "claude-code")
    advice = [line for line in r.err.splitlines() if line.startswith("init: advice: ")]
    # a sandboxed shell is fine for a receiver; inheriting every tool is not
    assert len(advice) == 1 and "gilgamesh names no tools" in advice[0]
    assert "tools: Read, Grep, Glob, mcp__eidolons__read_verified" in advice[0]


def test_the_registered_command_runs_and_blocks(
    init: Any, cli: Any, project: Path, tmp_path: Path
) -> None:
    """The exact command init registered, as Claude Code would spawn it (a real process),
    from the project and from a copy of it at another path, which works as it is."""
    assert init("--hosts", "claude-code").code == 0
    emit_payload(cli, project, ".eidolons/handoffs/r.md")
    (project / "README.md").write_text("plain\n")
    copy = tmp_path / "moved" / "proj"
    shutil.copytree(project, copy, symlinks=True)
    local = json.loads((project / ".claude" / "settings.local.json").read_text())

    def read(root: Path, path: Path) -> subprocess.CompletedProcess[str]:
        _, handler = our_handler(settings(root))
        command = handler["command"].replace("${CLAUDE_PROJECT_DIR}", str(root))
        event = {
            "session_id": "s",
            "cwd": str(root),
            "hook_event_name": "PreToolUse",
            "tool_name": "Read",
            "tool_input": {"file_path": str(path)},
            "agent_id": "a",
            "agent_type": "vigil",
        }
        env = clean_env(XDG_CONFIG_HOME=str(tmp_path / "xdg"), CLAUDE_PROJECT_DIR=str(root))
        env.update(local["env"])  # what Claude Code sets from settings.local.json
        return subprocess.run(
            [command, *handler["args"]],
            input=json.dumps(event),
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=60,
        )

    for root in (project, copy):
        proc = read(root, root / ".eidolons" / "handoffs" / "r.md")
        assert proc.returncode == 2
        first = proc.stderr.splitlines()[0]
        assert first == "[vigil-verify-incoming] REFUSE: UNVERIFIED from atlas"
        assert json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
        proc = read(root, root / "README.md")
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    # each refusal's hand-back was written in the project that refused, never the other
    assert len(list((copy / ".eidolons" / "refusals").glob("vigil-*.envelope.json"))) == 1
    assert len(list((project / ".eidolons" / "refusals").glob("vigil-*.envelope.json"))) == 1


def test_the_launcher_without_an_interpreter_denies_in_one_line(init: Any, project: Path) -> None:
    assert init("--hosts", "claude-code").code == 0
    launcher = project / ".claude" / "hooks" / "eidolons"
    env = clean_env(CLAUDE_PROJECT_DIR=str(project))
    env.pop("EIDOLONS_PYTHON", None)
    proc = subprocess.run(
        [str(launcher), "hook", "claude-code"], input="{}", capture_output=True, text=True, env=env
    )
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1
    assert "eidolons init --hosts claude-code" in proc.stderr


def test_allow_domain_opens_the_sandbox_network_for_that_domain(init: Any, project: Path) -> None:
    r = init("--hosts", "claude-code", "--allow-domain", "pypi.org")
    assert r.code == 0, r.err
    assert settings(project)["sandbox"]["network"]["allowedDomains"] == ["pypi.org"]
    assert init("--undo").code == 0
    assert not (project / ".claude" / "settings.json").exists()


def without(monkeypatch: pytest.MonkeyPatch, *programs: str) -> None:
    """This machine as one without ``programs`` on its PATH."""
    found = shutil.which
    monkeypatch.setattr(
        shutil, "which", lambda name, *a, **k: None if name in programs else found(name, *a, **k)
    )


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap is Linux's sandbox")
def test_init_says_how_to_install_what_the_sandbox_needs(
    init: Any, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    without(monkeypatch, "socat")
    r = init("--hosts", "claude-code")
    assert r.code == 0, r.err
    assert "the sandbox cannot start here: socat not installed" in r.err
    assert "sudo apt-get install bubblewrap socat" in r.err
    assert settings(project)["sandbox"]["failIfUnavailable"] is True  # Claude Code will refuse


def test_an_interpreter_prefix_above_the_project_does_not_seal_the_whole_project(
    init: Any, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An interpreter installed with its prefix above the project (``--prefix=$HOME``): its
    standard library is the gate's code, the project under it is not."""
    monkeypatch.setattr(sys, "base_prefix", str(project.parent))
    assert init("--hosts", "claude-code").code == 0
    local = json.loads((project / ".claude" / "settings.local.json").read_text())
    denied = local["sandbox"]["filesystem"]["denyWrite"]
    above = [d for d in denied if project.resolve().is_relative_to(d)]
    assert above == [], above
    assert os.path.realpath(os.path.dirname(os.__file__)) in denied  # the standard library


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_configured_handoff_dir_outside_the_state_is_kept_out_of_git(
    init: Any, project: Path
) -> None:
    """A project checked in whole stores no hand-off of a directory the configuration adds
    (every sandboxed shell reads git's history): init writes a .gitignore there, deeper
    than the project's own, which a shell can write (a line there re-includes nothing)."""
    import subprocess

    (project / ".eidolons").mkdir(exist_ok=True)
    (project / ".eidolons" / "config.toml").write_text(
        '[handoffs]\ndirs = ["inbox", "shared/out", ".eidolons/more"]\n'
    )
    (project / "inbox").mkdir()
    (project / "inbox" / "late.md").write_text("a hand-off\n")
    assert init("--hosts", "claude-code").code == 0
    for rel in ("inbox", "shared/out"):
        lines = (project / rel / ".gitignore").read_text().splitlines()
        assert lines[1:] == ["*", "!.gitignore"], lines
    assert not (project / ".eidolons" / "more" / ".gitignore").exists()
    (project / ".gitignore").write_text("!/inbox/\n!/inbox/*\n")  # what a shell can write
    git = ["git", "-c", "user.name=Dev", "-c", "user.email=dev@example.invalid", "-C", str(project)]
    for args in (["init", "-q"], ["add", "-A"]):
        assert subprocess.run([*git, *args], capture_output=True).returncode == 0
    kept = subprocess.run([*git, "ls-files"], capture_output=True, text=True).stdout.split()
    assert "inbox/.gitignore" in kept and not [f for f in kept if "late.md" in f], kept
    assert init("--undo").code == 0
    assert not (project / "inbox" / ".gitignore").exists()
    assert (project / "inbox" / "late.md").exists()


def test_a_configured_handoff_dir_that_is_a_file_stops_init_with_the_reason(
    init: Any, project: Path
) -> None:
    (project / ".eidolons").mkdir(exist_ok=True)
    (project / ".eidolons" / "config.toml").write_text('[handoffs]\ndirs = ["inbox"]\n')
    (project / "inbox").write_text("not a directory\n")
    r = init("--hosts", "claude-code")
    assert r.code == 2 and "hand-off directory inbox" in r.err, r
