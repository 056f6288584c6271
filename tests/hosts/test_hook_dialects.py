"""``eidolons hook`` for Codex, Cursor, Gemini CLI and Copilot: golden stdin built field for
field from ``shared/hosts/README.md`` (sections 2.1 to 2.5), exact stdout and exit code.

Cursor, Gemini CLI and Copilot name no agent in their events: a hand-off read there is
judged as the envelope's addressee (``--as`` names another). Of a shell command these hosts
run, the hook judges a plain ``eidolons`` command only (ADR 0015)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.hosts.conftest import SECRET, Handoff

REFUSE = "[vigil-verify-incoming] REFUSE: INTEGRITY_MISMATCH from atlas"
ADDRESSEE_REFUSE = "[vigil-verify-incoming] REFUSE: UNVERIFIED from atlas"


def tamper(handoff: Handoff) -> None:
    handoff.verify()
    handoff.payload.write_text("rewritten in transit\n")


# --- Codex (section 2.2: pre_tool_use.rs::command_input_json) ---------------------------


def codex(handoff: Handoff, command: str, agent_type: str | None = "vigil") -> dict[str, Any]:
    return {
        "session_id": "019a0000-0000-7000-8000-000000000001",
        "turn_id": "turn-1",
        "agent_id": "agent-1" if agent_type else None,
        "agent_type": agent_type,
        "transcript_path": None,
        "cwd": str(handoff.root),
        "hook_event_name": "PreToolUse",
        "model": "gpt-5-codex",
        "permission_mode": "default",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": "call_1",
    }


def test_codex_receiver_running_the_gate_as_another_exits_2_with_stderr(handoff: Handoff) -> None:
    r = handoff.hook("codex", codex(handoff, "eidolons verify-incoming handoff.md --as forge"))
    assert (r.code, r.out) == (2, "")
    assert r.err == (
        "eidolons hook: vigil runs `eidolons verify-incoming` only as itself (--as vigil), "
        "not --as forge\n"
    )


def test_codex_main_loop_running_a_state_command_exits_2(handoff: Handoff) -> None:
    r = handoff.hook("codex", codex(handoff, "eidolons init --undo", agent_type=None))
    assert (r.code, r.out) == (2, "") and "writes the gate's state" in r.err


def test_codex_shell_is_not_read_by_the_hook(handoff: Handoff) -> None:
    """Codex's own sandbox holds its shell: the hook has no Claude Code sandbox to ask
    about, and judges no command but a plain ``eidolons`` one."""
    tamper(handoff)
    for command in ("cat handoff.md", "eidolons verify-incoming handoff.md --as vigil"):
        r = handoff.hook("codex", codex(handoff, command))
        assert (r.code, r.out, r.err) == (0, "", ""), command


def test_codex_apply_patch_to_the_trace_is_refused(handoff: Handoff) -> None:
    doc = codex(handoff, "")
    doc["tool_name"] = "apply_patch"
    doc["tool_input"] = {
        "command": "*** Begin Patch\n*** Update File: .eidolons/.trace/t.jsonl\n@@\n+x\n"
        "*** End Patch\n"
    }
    r = handoff.hook("codex", doc)
    assert r.code == 2 and "written only by eidolons" in r.err


def test_codex_ordinary_command_is_allowed(handoff: Handoff) -> None:
    r = handoff.hook("codex", codex(handoff, "ls -la"))
    assert (r.code, r.out, r.err) == (0, "", "")


# --- Cursor (section 2.3: flat snake_case output, failClosed blocks on silence) ---------


def cursor_read(handoff: Handoff, path: str) -> dict[str, Any]:
    return {
        "conversation_id": "c-1",
        "generation_id": "g-1",
        "hook_event_name": "beforeReadFile",
        "workspace_roots": [str(handoff.root)],
        "file_path": path,
        "content": "whatever Cursor read",
        "attachments": [],
    }


def test_cursor_allow_is_explicit(handoff: Handoff) -> None:
    (handoff.root / "a.py").write_text("x = 1\n")
    r = handoff.hook("cursor", cursor_read(handoff, str(handoff.root / "a.py")))
    assert (r.code, r.out, r.err) == (0, '{"permission":"allow"}\n', "")


def test_cursor_receiver_read_of_a_tampered_handoff_is_a_json_deny(handoff: Handoff) -> None:
    tamper(handoff)
    r = handoff.hook("cursor", cursor_read(handoff, str(handoff.payload)), "--as", "vigil")
    assert r.code == 0
    out = json.loads(r.out)
    assert set(out) == {"permission", "user_message", "agent_message"}
    assert out["permission"] == "deny" and out["user_message"].splitlines()[0] == REFUSE
    assert SECRET not in r.out


def test_cursor_read_as_an_unknown_receiver_is_denied_and_records_nothing(
    handoff: Handoff,
) -> None:
    trace = sorted((handoff.root / ".eidolons").rglob("*.jsonl"))
    before = [p.read_bytes() for p in trace]
    r = handoff.hook("cursor", cursor_read(handoff, str(handoff.payload)), "--as", "vigl")
    out = json.loads(r.out)
    assert out["permission"] == "deny" and SECRET not in r.out
    assert out["user_message"] == (
        "eidolons hook: --as vigl: no contract names a receiver 'vigl' (did you mean 'vigil'?)"
    )
    assert sorted((handoff.root / ".eidolons").rglob("*.jsonl")) == trace
    assert [p.read_bytes() for p in trace] == before


def test_cursor_without_as_is_judged_as_the_addressee(handoff: Handoff) -> None:
    r = handoff.hook("cursor", cursor_read(handoff, str(handoff.payload)))
    out = json.loads(r.out)
    assert out["permission"] == "deny" and out["user_message"].splitlines()[0] == ADDRESSEE_REFUSE
    tamper(handoff)
    out = json.loads(handoff.hook("cursor", cursor_read(handoff, str(handoff.payload))).out)
    assert out["permission"] == "deny" and out["user_message"].splitlines()[0] == REFUSE


def test_cursor_without_as_reads_a_handoff_its_addressee_may_read(handoff: Handoff) -> None:
    handoff.verify()
    r = handoff.hook("cursor", cursor_read(handoff, str(handoff.payload)))
    assert (r.code, r.out, r.err) == (0, '{"permission":"allow"}\n', "")


def cursor_shell(handoff: Handoff, command: str) -> dict[str, Any]:
    return {
        "conversation_id": "c-1",
        "generation_id": "g-1",
        "hook_event_name": "preToolUse",
        "workspace_roots": [str(handoff.root)],
        "tool_name": "Shell",
        "tool_input": {"command": command},
    }


def test_cursor_shell_pre_tool_use_judges_a_plain_eidolons_command(handoff: Handoff) -> None:
    r = handoff.hook("cursor", cursor_shell(handoff, "eidolons keys rotate"), "--as", "vigil")
    out = json.loads(r.out)
    assert r.code == 0 and out["permission"] == "deny"
    assert "`eidolons keys rotate` writes the gate's state" in out["agent_message"]
    tamper(handoff)
    r = handoff.hook("cursor", cursor_shell(handoff, "cat handoff.md"), "--as", "vigil")
    assert (r.code, r.out) == (0, '{"permission":"allow"}\n')  # the shell is not read


def test_cursor_malformed_input_is_still_a_deny_object(handoff: Handoff) -> None:
    r = handoff.hook("cursor", b"not json")
    assert r.code == 0 and json.loads(r.out)["permission"] == "deny"


# --- Gemini CLI (section 2.4: BeforeTool, exit 2 = block) -------------------------------


@pytest.mark.parametrize("key", ["absolute_path", "file_path", "path"])
def test_gemini_read_file_of_an_unverified_handoff_exits_2(handoff: Handoff, key: str) -> None:
    doc = {
        "session_id": "s-1",
        "transcript_path": "/tmp/t.json",
        "cwd": str(handoff.root),
        "hook_event_name": "BeforeTool",
        "timestamp": "2026-12-01T09:00:00Z",
        "tool_name": "read_file",
        "tool_input": {key: str(handoff.payload)},
        "mcp_context": None,
    }
    r = handoff.hook("gemini", doc)
    assert r.code == 2 and r.out == "" and r.err.splitlines()[0] == ADDRESSEE_REFUSE
    handoff_ok = {**doc, "tool_input": {key: str(handoff.root / "README.md")}}
    assert handoff.hook("gemini", handoff_ok).code == 0


# --- Copilot (section 2.5: toolArgs is a JSON string, only deny is processed) ---------


def test_copilot_view_of_an_unverified_handoff_is_denied(handoff: Handoff) -> None:
    doc = {
        "timestamp": 1764579600000,
        "cwd": str(handoff.root),
        "toolName": "view",
        "toolArgs": json.dumps({"path": str(handoff.payload)}),
    }
    r = handoff.hook("copilot", doc)
    assert r.code == 0
    out = json.loads(r.out)
    assert set(out) == {"permissionDecision", "permissionDecisionReason"}
    assert out["permissionDecision"] == "deny"
    assert out["permissionDecisionReason"].splitlines()[0] == ADDRESSEE_REFUSE


def test_copilot_allow_is_silent(handoff: Handoff) -> None:
    doc = {
        "timestamp": 1,
        "cwd": str(handoff.root),
        "toolName": "bash",
        "toolArgs": '{"command": "ls"}',
    }
    assert (lambda r: (r.code, r.out, r.err))(handoff.hook("copilot", doc)) == (0, "", "")


def test_copilot_tool_args_with_duplicate_keys_deny(handoff: Handoff) -> None:
    doc = {
        "timestamp": 1,
        "cwd": str(handoff.root),
        "toolName": "view",
        "toolArgs": '{"path": "/etc/hostname", "path": ' + json.dumps(str(handoff.payload)) + "}",
    }
    assert json.loads(handoff.hook("copilot", doc).out)["permissionDecision"] == "deny"


@pytest.mark.parametrize("host", ["gemini", "copilot"])
def test_a_read_is_judged_as_the_addressee_on_a_host_that_names_no_agent(
    handoff: Handoff, host: str
) -> None:
    """As the envelope's addressee (vigil), not as the orchestrator: the verified hand-off
    reads, and once tampered it is refused with vigil's REFUSE line."""
    handoff.verify()
    doc: dict[str, Any]
    if host == "gemini":
        doc = {
            "session_id": "s-1",
            "cwd": str(handoff.root),
            "hook_event_name": "BeforeTool",
            "tool_name": "read_file",
            "tool_input": {"absolute_path": str(handoff.payload)},
        }
    else:
        doc = {
            "timestamp": 1,
            "cwd": str(handoff.root),
            "toolName": "view",
            "toolArgs": json.dumps({"path": str(handoff.payload)}),
        }
    assert (lambda r: (r.code, r.out, r.err))(handoff.hook(host, doc)) == (0, "", "")
    tamper(handoff)
    r = handoff.hook(host, doc)
    line = r.err if host == "gemini" else json.loads(r.out)["permissionDecisionReason"]
    assert line.splitlines()[0] == REFUSE


def test_as_disagreeing_with_the_hosts_identity_is_refused(handoff: Handoff) -> None:
    handoff.verify()
    r = handoff.hook("codex", codex(handoff, "cat handoff.md"), "--as", "gilgamesh")
    assert r.code == 2 and "the host says vigil" in r.err
