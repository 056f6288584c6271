"""``eidolons doctor``: D8 without upstream's holes, skill drift, host wiring, keys, agents.
Exit 0 clean, 1 findings, 2 usage."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Run, clean_env, project_venv, run_cli

SEED_PROSE = (
    "# verify-incoming\n\nREFUSE with the exact line. Previous versions processed the payload "
    "anyway. That is now superseded. Blocking, not warn-only.\n"
)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return clean_env(XDG_CONFIG_HOME=str(tmp_path / "xdg"))


@pytest.fixture
def doctor(project: Path, env: dict[str, str]) -> Any:
    def _run(*args: str) -> Run:
        return run_cli("doctor", *args, cwd=project, env=env)

    return _run


@pytest.fixture
def initialised(project: Path, env: dict[str, str]) -> Path:
    argv = ("init", "--hosts", "claude-code", "--receivers", "vigil,gilgamesh")
    assert run_cli(*argv, cwd=project, env=env).code == 0
    return project


def findings(r: Run) -> list[dict[str, str]]:
    return list(r.json()["findings"])


def test_a_project_set_up_by_init_is_clean(doctor: Any, initialised: Path) -> None:
    r = doctor()
    *notes, last = r.out.splitlines()
    assert (r.code, last) == (0, "doctor: all checks passed"), r.out
    assert all(line.startswith("doctor: note: ") for line in notes), r.out  # host limits


def test_a_bare_project_has_findings(doctor: Any, project: Path) -> None:
    r = doctor("--json")
    assert r.code == 1
    checks = {f["check"] for f in findings(r)}
    assert {"keys"} <= checks


def member(project: Path, name: str, skill: str | None, layout: str = "flat") -> Path:
    tree = project / ".eidolons" / name
    (tree / "skills").mkdir(parents=True)
    (tree / "PERSONA.md").write_text(f"# {name}\n")
    if skill is None:
        return tree
    path = (
        tree / "skills" / "verify-incoming.md"
        if layout == "flat"
        else tree / "skills" / "verify-incoming" / "SKILL.md"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(skill)
    return path


def d8(r: Run) -> list[dict[str, str]]:
    return [f for f in findings(r) if f["check"] == "D8"]


def test_d8_finds_a_warn_only_skill_and_counts_each_violation_once(
    doctor: Any, initialised: Path
) -> None:
    member(
        initialised,
        "vigil",
        "# old gate\n\nThe payload is always processed. WARN-ONLY on failure.\n",
    )
    r = doctor("--json")
    assert r.code == 1
    got = sorted(f["message"] for f in d8(r))
    assert got == [
        "declares no blocking posture (no REFUSE / SHALL NOT)",
        "declares warn-only posture ('WARN-ONLY on failure')",
        "declares warn-only posture ('payload is always processed')",
    ], got


def test_d8_the_seeds_contrast_prose_passes(doctor: Any, initialised: Path) -> None:
    member(initialised, "vigil", SEED_PROSE)
    assert d8(doctor("--json")) == []


def test_d8_reads_the_eiis_3_layout(doctor: Any, initialised: Path) -> None:
    member(initialised, "atlas", "no marker at all\n", layout="eiis-3")
    (f,) = d8(doctor("--json"))
    assert f["subject"] == ".eidolons/atlas/skills/verify-incoming/SKILL.md"


def test_d8_an_unknown_member_or_missing_skill_is_a_finding(doctor: Any, initialised: Path) -> None:
    member(initialised, "newbie", SEED_PROSE)
    member(initialised, "forge", None)
    member(initialised, "crystalium", None)  # memory class: exempt
    got = {(f["subject"], f["message"]) for f in d8(doctor("--json"))}
    assert got == {
        ("newbie", "not in the roster (no capability class known)"),
        ("forge", "missing blocking verify-incoming skill"),
    }


def test_drift_finds_a_table_that_no_longer_matches_the_contracts(
    doctor: Any, initialised: Path
) -> None:
    skill = initialised / ".claude" / "skills" / "vigil-verify-incoming" / "SKILL.md"
    lines = skill.read_text().splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith("| atlas"))
    del lines[row]
    skill.write_text("\n".join(lines) + "\n")
    r = doctor("--json")
    assert r.code == 1
    (f,) = [f for f in findings(r) if f["check"] == "drift"]
    assert f["subject"] == ".claude/skills/vigil-verify-incoming/SKILL.md"
    assert "inbound-edges table differs" in f["message"]


def test_drift_finds_a_changed_refuse_line(doctor: Any, initialised: Path) -> None:
    skill = initialised / ".agents" / "skills" / "gilgamesh-verify-incoming" / "SKILL.md"
    text = skill.read_text()
    assert "[gilgamesh-verify-incoming] REFUSE: <FAILURE_CODE> from <from.eidolon>" in text
    skill.write_text(
        text.replace("-verify-incoming] REFUSE: <FAILURE_CODE>", "-verify-incoming] WARN")
    )
    (f,) = [f for f in findings(doctor("--json")) if f["check"] == "drift"]
    assert "REFUSE line" in f["message"]


def settings_path(project: Path) -> Path:
    return project / ".claude" / "settings.json"


def edit_handler(project: Path, **changes: Any) -> None:
    doc = json.loads(settings_path(project).read_text())
    group = doc["hooks"]["PreToolUse"][0]
    for key, value in changes.items():
        if key == "matcher":
            group["matcher"] = value
        elif value is None:
            del group["hooks"][0][key]
        else:
            group["hooks"][0][key] = value
    settings_path(project).write_text(json.dumps(doc))


def hosts(r: Run) -> list[str]:
    return [f["message"] for f in findings(r) if f["check"] == "hosts"]


def test_hosts_finds_a_hook_without_on_failure(doctor: Any, initialised: Path) -> None:
    edit_handler(initialised, onFailure=None)
    r = doctor("--json")
    assert r.code == 1
    assert hosts(r) == [
        'the hook has no "onFailure": "block": a crash or timeout lets the read through'
    ]


def test_hosts_finds_a_matcher_that_misses_bash(doctor: Any, initialised: Path) -> None:
    edit_handler(initialised, matcher="Read|Grep|Glob")
    assert hosts(doctor("--json")) == ["the hook's matcher 'Read|Grep|Glob' does not cover Bash"]


def test_hosts_finds_a_missing_hook(doctor: Any, initialised: Path) -> None:
    settings_path(initialised).write_text("{}")
    assert any("no PreToolUse hook" in m for m in hosts(doctor("--json")))


def test_hosts_finds_cursor_without_fail_closed(doctor: Any, initialised: Path, env: Any) -> None:
    assert run_cli("init", "--hosts", "cursor", cwd=initialised, env=env).code == 0
    path = initialised / ".cursor" / "hooks.json"
    doc = json.loads(path.read_text())
    doc["hooks"]["beforeReadFile"][0]["failClosed"] = False
    path.write_text(json.dumps(doc))
    assert hosts(doctor("--json")) == [
        'the beforeReadFile hook lacks "failClosed": true (Cursor fails open)'
    ]


def test_a_receiver_agent_that_inherits_every_tool_is_a_finding(
    doctor: Any, initialised: Path
) -> None:
    agents = initialised / ".claude" / "agents"
    agents.mkdir()
    (agents / "vigil.md").write_text("---\nname: vigil\ndescription: d\ntools: Read, Bash\n---\n")
    assert [f for f in findings(doctor("--json")) if f["check"] == "agents"] == []
    (agents / "vigil.md").write_text("---\nname: vigil\ndescription: d\n---\n")
    (f,) = [f for f in findings(doctor("--json")) if f["check"] == "agents"]
    assert f["subject"] == ".claude/agents/vigil.md" and "names no tools" in f["message"]


def test_text_output_and_usage(doctor: Any, initialised: Path) -> None:
    edit_handler(initialised, onFailure=None)
    r = doctor()
    assert r.code == 1
    assert r.out.splitlines()[-1] == "doctor: 1 finding"
    assert r.out.startswith("doctor: [hosts] .claude/settings.json: the hook has no")
    assert doctor("--root", "/no/such/dir").code == 2


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"members: [vigil\n", "not valid YAML"),
        (b"\xff\xfe members", "not UTF-8"),
        (b"- vigil\n", "not a mapping"),
        (b"members: vigil\n", "members is not a list"),
        (b"members:\n  - {version: 1}\n", "members[0] has no name"),
        (None, "not a regular file"),
    ],
)
def test_d8_an_unreadable_lock_is_a_finding_not_no_members(
    doctor: Any, initialised: Path, content: bytes | None, why: str
) -> None:
    """A lock file that cannot be read is never "no members installed": the members it
    lists would go unchecked. It is a D8 finding with the reason."""
    lock = initialised / "eidolons.lock"
    if content is None:
        lock.mkdir()
    else:
        lock.write_bytes(content)
    r = doctor("--json")
    assert r.code == 1, r.out
    (f,) = d8(r)
    assert f["subject"] == "eidolons.lock" and why in f["message"], f


def test_d8_a_readable_lock_lists_members(doctor: Any, initialised: Path) -> None:
    (initialised / "eidolons.lock").write_text("members:\n  - name: forge\n  - newbie\n")
    got = {(f["subject"], f["message"]) for f in d8(doctor("--json"))}
    assert got == {
        ("forge", "missing blocking verify-incoming skill"),
        ("newbie", "not in the roster (no capability class known)"),
    }
    (initialised / "eidolons.lock").write_text("# nothing installed yet\n")
    assert d8(doctor("--json")) == []


def test_keys_an_unusable_trust_store_is_a_finding(
    doctor: Any, initialised: Path, env: dict[str, str]
) -> None:
    """A trust store every gate fails closed on (it does not parse, or it is not the one
    this host pinned) is never reported as "present": every hand-off would be refused."""
    trust = initialised / ".eidolons" / "trust.json"
    assert not [f for f in findings(doctor("--json")) if f["check"] == "keys"]
    good = trust.read_bytes()
    trust.write_text("{not json")
    (f,) = [f for f in findings(doctor("--json")) if f["check"] == "keys"]
    assert f["subject"] == ".eidolons/trust.json" and "every gate refuses" in f["message"], f
    trust.write_bytes(good.replace(b'"version": ', b'"version":  '))  # edited, not re-pinned
    (f,) = [f for f in findings(doctor("--json")) if f["check"] == "keys"]
    assert "differs from the one this host pinned" in f["message"], f
    trust.unlink()  # a pinned store deleted: a downgrade, not "unsigned"
    (f,) = [f for f in findings(doctor("--json")) if f["check"] == "keys"]
    assert "it is gone" in f["message"], f


def test_d8_a_state_directory_that_cannot_be_listed_is_a_finding(
    doctor: Any, initialised: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``.eidolons/`` that cannot be listed (EACCES for a non-root user, EIO) is never "no
    members installed": the members under it would go unchecked and doctor would pass."""

    state = str(initialised / ".eidolons")
    real = os.scandir

    def scandir(path: Any = ".") -> Any:
        if os.fspath(path) == state:
            raise PermissionError(13, "Permission denied", state)
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    r = doctor("--json")
    assert r.code == 1, r.out
    (f,) = d8(r)
    assert f["subject"] == ".eidolons" and "cannot be listed" in f["message"], f


def _edit_json(path: Path, change: Any) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def hosts_findings(doctor: Any) -> list[str]:
    r = doctor("--json")
    return [f["message"] for f in r.json()["findings"] if f["check"] == "hosts"]


def test_a_broken_interpreter_path_is_a_finding(doctor: Any, initialised: Path) -> None:
    local = initialised / ".claude" / "settings.local.json"
    _edit_json(local, lambda d: d["env"].update(EIDOLONS_PYTHON="/gone/bin/python3"))
    assert any("not an interpreter on this machine" in m for m in hosts_findings(doctor))


def test_a_disabled_or_loose_sandbox_is_a_finding(doctor: Any, initialised: Path) -> None:
    shared = initialised / ".claude" / "settings.json"
    _edit_json(shared, lambda d: d["sandbox"].update(allowUnsandboxedCommands=True))
    assert any("allowUnsandboxedCommands" in m for m in hosts_findings(doctor))
    _edit_json(shared, lambda d: d["sandbox"].update(enabled=False, allowUnsandboxedCommands=False))
    assert any("not enabled" in m for m in hosts_findings(doctor))


def test_a_handoff_directory_the_sandbox_does_not_hide_is_a_finding(
    doctor: Any, initialised: Path
) -> None:
    (initialised / ".eidolons" / "config.toml").write_text('[handoffs]\ndirs = ["out"]\n')
    (initialised / "out").mkdir()
    assert any("does not hide" in m and m.endswith("(denyRead)") for m in hosts_findings(doctor))
    shared = initialised / ".claude" / "settings.json"
    _edit_json(shared, lambda d: d["sandbox"]["filesystem"]["denyRead"].append("./out"))
    _edit_json(shared, lambda d: d["sandbox"]["filesystem"].update(allowRead=["."]))
    assert any("re-opens" in m for m in hosts_findings(doctor))


def test_a_handoff_directory_the_host_itself_may_read_is_a_finding(
    doctor: Any, initialised: Path
) -> None:
    """A memory file (CLAUDE.md and its @-imports) is read by the host outside every hook:
    only a Read deny rule keeps a hand-off directory out of it."""
    assert not [m for m in hosts_findings(doctor) if "permissions.deny" in m]  # init's wiring
    shared = initialised / ".claude" / "settings.json"
    rule = "Read(./.eidolons/handoffs/**)"
    _edit_json(shared, lambda d: d["permissions"]["deny"].remove(rule))
    assert any(f"no permissions.deny rule {rule}" in m for m in hosts_findings(doctor))


def test_host_wiring_a_sandboxed_shell_may_write_is_a_finding(
    doctor: Any, initialised: Path
) -> None:
    """A hook written for another host (Codex, Cursor...) runs outside every sandbox when
    the project is opened there: the shell must not write any host's wiring."""
    assert not [m for m in hosts_findings(doctor) if "host wiring" in m]  # init's wiring
    shared = initialised / ".claude" / "settings.json"
    _edit_json(
        shared, lambda d: d["sandbox"]["filesystem"]["denyWrite"].remove("./.codex/hooks.json")
    )
    findings = [f for f in doctor("--json").json()["findings"] if "host wiring" in f["message"]]
    assert [f["subject"] for f in findings] == [".codex/hooks.json"], findings


def test_a_hook_wired_to_a_machine_path_is_a_finding(doctor: Any, initialised: Path) -> None:
    shared = initialised / ".claude" / "settings.json"

    def legacy(doc: dict[str, Any]) -> None:  # what earlier versions of init wrote
        handler = doc["hooks"]["PreToolUse"][0]["hooks"][0]
        handler["command"] = sys.executable
        handler["args"] = ["-I", "-c", BOOTSTRAP, "claude-code", "--root", "/elsewhere"]

    from eidolons.hosts.hook.fast import BOOTSTRAP

    _edit_json(shared, legacy)
    assert any("a path of one machine" in m for m in hosts_findings(doctor))


def test_gate_code_in_a_venv_a_sandboxed_shell_could_write_is_a_finding(
    doctor: Any, initialised: Path
) -> None:
    python = project_venv(initialised)  # wired after init: nothing of it is in denyWrite
    local = initialised / ".claude" / "settings.local.json"
    _edit_json(local, lambda d: d["env"].update(EIDOLONS_PYTHON=str(python)))
    found = [
        f["subject"]
        for f in doctor("--json").json()["findings"]
        if "a sandboxed shell can write" in f["message"]
    ]
    assert ".venv" in found, found  # the venv's root, with its pyvenv.cfg


def test_an_interpreter_that_cannot_say_its_gate_code_is_a_finding(
    doctor: Any, initialised: Path, tmp_path: Path
) -> None:
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nexit 1\n")
    python.chmod(0o755)
    local = initialised / ".claude" / "settings.local.json"
    _edit_json(local, lambda d: d["env"].update(EIDOLONS_PYTHON=str(python)))
    assert any("which code it runs as the gate" in m for m in hosts_findings(doctor))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap is Linux's sandbox")
def test_a_sandbox_that_cannot_start_here_is_a_finding(
    doctor: Any, initialised: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    found = shutil.which
    monkeypatch.setattr(shutil, "which", lambda n, *a, **k: None if n == "bwrap" else found(n))
    r = doctor("--json")
    assert r.code == 1
    messages = [f["message"] for f in r.json()["findings"] if f["subject"] == "sandbox"]
    assert any("bwrap not installed" in m and "apt-get install bubblewrap" in m for m in messages)


def test_a_missing_mcp_server_is_a_finding(doctor: Any, initialised: Path) -> None:
    (initialised / ".mcp.json").write_text("{}")
    assert any("MCP server is not registered" in m for m in hosts_findings(doctor))


def test_doctor_runs_the_wired_hook(doctor: Any, initialised: Path) -> None:
    launcher = initialised / ".claude" / "hooks" / "eidolons"
    launcher.write_text("#!/bin/sh\ncat >/dev/null\nexit 0\n")  # a hook that allows all
    found = hosts_findings(doctor)
    assert any("hand-off without its envelope with exit 0 (expected 2)" in m for m in found), found
    assert not list((initialised / ".eidolons" / "handoffs").glob(".doctor-probe-*"))


def test_a_copy_at_another_path_passes_unchanged(
    doctor: Any, initialised: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    import shutil

    copy = tmp_path / "elsewhere" / "proj"
    shutil.copytree(initialised, copy, symlinks=True)
    r = run_cli("doctor", "--json", cwd=copy, env=env)
    assert [f for f in r.json()["findings"] if f["check"] == "hosts"] == []


def test_other_hosts_get_a_note_not_a_promise(
    doctor: Any, initialised: Path, env: dict[str, str]
) -> None:
    assert run_cli("init", "--hosts", "codex", cwd=initialised, env=env).code == 0
    notes = doctor("--json").json()["notes"]
    assert any(n.startswith("codex: the gate holds for the host's file tools") for n in notes)
    assert any("fails open" in n for n in notes)
