"""The MCP server behind the Claude Code hook: the hook sees an ``mcp__eidolons__*`` call's
path arguments as reads by the calling agent (``agent_type`` from the host, never from the
call), so naming another receiver in ``read_verified`` does not get a subagent past it
(ADR 0020). Golden stdin from the recorded Claude Code samples."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Run, emit_payload
from tests.hosts.conftest import PAYLOAD_TEXT, SECRET, Handoff, needs_samples, sample

pytestmark = needs_samples
VIGIL_READ = "hook_stdin_read_subagent_vigil"


@pytest.fixture
def handoff(cli: Callable[..., Run], project: Path) -> Handoff:
    payload, envelope, doc = emit_payload(cli, project, "handoff.md", PAYLOAD_TEXT)
    return Handoff(project, payload, envelope, doc)


def mcp_call(handoff: Handoff, agent_type: str | None, receiver: str) -> dict[str, object]:
    return sample(
        VIGIL_READ,
        handoff.root,
        tool_name="mcp__eidolons__read_verified",
        tool_input={"artifact": str(handoff.payload), "receiver": receiver},
        agent_type=agent_type,
        agent_id=None if agent_type is None else "ae03233dc7de3192d",
    )


def test_a_subagent_naming_another_receiver_is_denied_by_the_hook(handoff: Handoff) -> None:
    handoff.verify()
    r = handoff.hook("claude-code", mcp_call(handoff, "gilgamesh", "vigil"))
    assert r.code == 2 and SECRET not in r.out + r.err
    assert r.err.splitlines()[0] == "[gilgamesh-verify-incoming] REFUSE: UNDECLARED_EDGE from atlas"


def test_the_addressed_receiver_gets_through_the_hook(handoff: Handoff) -> None:
    handoff.verify()
    r = handoff.hook("claude-code", mcp_call(handoff, "vigil", "vigil"))
    assert r.code == 0, r.err


def test_the_main_loop_needs_the_orchestrators_pass_first(handoff: Handoff) -> None:
    r = handoff.hook("claude-code", mcp_call(handoff, None, "vigil"))
    assert r.code == 2 and SECRET not in r.out + r.err


def mcp_emit(handoff: Handoff, agent_type: str | None, **args: object) -> dict[str, object]:
    tool_input = {
        "payload": "report.md",
        "to": "vigil",
        "performative": "PROPOSE",
        "kind": "scout-report",
        "objective": "o",
        **args,
    }
    return sample(
        VIGIL_READ,
        handoff.root,
        tool_name="mcp__eidolons__emit",
        tool_input=tool_input,
        agent_type=agent_type,
        agent_id=None if agent_type is None else "ae03233dc7de3192d",
    )


@pytest.mark.parametrize("sender", ["atlas", "atlas@1.4.2", None])
def test_a_subagent_emitting_as_another_sender_is_denied_by_the_hook(
    handoff: Handoff, sender: str | None
) -> None:
    args = {} if sender is None else {"sender": sender}
    r = handoff.hook("claude-code", mcp_emit(handoff, "vigil", **args))
    assert r.code == 2
    assert r.err == (
        f"eidolons hook: vigil emits only as itself (sender vigil), not as {sender!r}\n"
    )


@pytest.mark.parametrize("sender", ["vigil", "vigil@1.9.0"])
def test_a_subagent_emitting_as_itself_gets_through_the_hook(handoff: Handoff, sender: str) -> None:
    r = handoff.hook("claude-code", mcp_emit(handoff, "vigil", sender=sender))
    assert (r.code, r.out, r.err) == (0, "", "")


@pytest.mark.parametrize("sender", ["orchestrator", "human@n/a"])
def test_the_main_loop_emits_as_the_orchestrator_or_the_human(
    handoff: Handoff, sender: str
) -> None:
    r = handoff.hook("claude-code", mcp_emit(handoff, None, sender=sender))
    assert (r.code, r.out, r.err) == (0, "", "")


def test_the_main_loop_cannot_emit_as_a_subagent(handoff: Handoff) -> None:
    """The main loop is an agent too: a hand-off "from atlas" it wrote would pass every gate
    as ATLAS's."""
    r = handoff.hook("claude-code", mcp_emit(handoff, None, sender="atlas"))
    assert r.code == 2
    assert "the main loop emits only as orchestrator or human" in r.err


def test_an_emit_naming_a_key_or_the_gates_copies_as_its_payload_is_denied(
    handoff: Handoff,
) -> None:
    for rel in (".eidolons/keys/signing.key", ".eidolons/verified/x.md"):
        doc = mcp_emit(handoff, "vigil", sender="vigil", payload=str(handoff.root / rel))
        r = handoff.hook("claude-code", doc)
        assert r.code == 2 and r.err.startswith(f"eidolons hook: {handoff.root / rel}: "), rel


@pytest.mark.parametrize("tool", ["emit", "MCP:emit", "mcp__other__emit"])
def test_another_servers_emit_is_judged_by_its_paths(handoff: Handoff, tool: str) -> None:
    """Only the eidolons server's emit skips the read gate for its new payload: a tool of
    another server that happens to be named emit, handed a hand-off, is gated as a read."""
    doc = mcp_emit(handoff, "gilgamesh", sender="gilgamesh", payload=str(handoff.payload))
    doc["tool_name"] = tool
    r = handoff.hook("claude-code", doc)
    assert r.code == 2 and SECRET not in r.out + r.err
    assert r.err.splitlines()[0].startswith("[gilgamesh-verify-incoming] REFUSE: ")
