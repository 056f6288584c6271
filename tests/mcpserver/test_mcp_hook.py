"""The MCP server behind the Claude Code hook: the hook sees an ``mcp__eidolons__*`` call's
path arguments as reads by the calling agent (``agent_type`` from the host, never from the
call), so naming another receiver in ``read_verified`` does not get a subagent past it
(ADR 0053). Golden stdin from the recorded Claude Code samples."""

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
