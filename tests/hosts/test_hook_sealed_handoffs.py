"""The hand-off directory is sealed for writes, and the gate's copies for reads (ADR 0015).

In a hand-off directory an agent may only create a new payload file with the Write tool
(each host's tool that creates a file and cannot change one): never change an existing
file (Write over it, Edit, a patch), never write an envelope, a receipt or a signature, and
never a payload an envelope already names. The gate's verified copies
(``.eidolons/verified/``) hold hand-off bytes: no agent reads them but through the gate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.hosts.conftest import (
    PAYLOAD_TEXT,
    Handoff,
    claude_deny,
    needs_samples,
    sample,
    verified_read,
)

pytestmark = needs_samples

IN_PLACE = (
    "a hand-off is never changed in place; write a new payload file with Write and emit it "
    "(mcp__eidolons__emit)"
)
GATES_OWN = (
    "envelopes, receipts and signatures in a hand-off directory are written only by the gate (emit)"
)
NAMED = "an envelope already names this payload; write the new payload under a new name"
AGENTS = ["vigil", None]


def tool(
    handoff: Handoff, name: str, tool_input: dict[str, Any], agent: str | None
) -> dict[str, Any]:
    doc = sample("hook_stdin_read_main", handoff.root, tool_name=name, tool_input=tool_input)
    if agent is not None:
        doc.update(agent_id="ae03233dc7de3192d", agent_type=agent)
    return doc


def write(handoff: Handoff, path: Path, agent: str | None, name: str = "Write") -> dict[str, Any]:
    return tool(handoff, name, {"file_path": str(path), "content": "# new\n"}, agent)


def edit(handoff: Handoff, path: Path, agent: str | None, name: str = "Edit") -> dict[str, Any]:
    tool_input = {"file_path": str(path), "old_string": "race", "new_string": "RACE"}
    return tool(handoff, name, tool_input, agent)


@pytest.fixture
def inside(handoff: Handoff) -> Handoff:
    """The hand-off pair moved into ``.eidolons/handoffs/``."""
    handoff.move_into_handoff_dir()
    return handoff


def denied(handoff: Handoff, doc: dict[str, Any], path: Path, why: str) -> None:
    assert claude_deny(handoff.hook("claude-code", doc)) == f"eidolons hook: {path}: {why}"


@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.parametrize("rel", ["new.md", "inbox/new.md", "report.txt"])
def test_writing_a_new_payload_file_is_allowed(
    inside: Handoff, agent: str | None, rel: str
) -> None:
    target = inside.payload.parent / rel
    r = inside.hook("claude-code", write(inside, target, agent))
    assert (r.code, r.out, r.err) == (0, "", "")


@pytest.mark.parametrize("agent", AGENTS)
def test_writing_over_an_existing_handoff_is_denied(inside: Handoff, agent: str | None) -> None:
    denied(inside, write(inside, inside.payload, agent), inside.payload, IN_PLACE)


@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.parametrize("name", ["Edit", "MultiEdit"])
def test_editing_in_a_handoff_directory_is_denied_even_a_new_file(
    inside: Handoff, agent: str | None, name: str
) -> None:
    for target in (inside.payload, inside.payload.parent / "new.md"):
        denied(inside, edit(inside, target, agent, name), target, IN_PLACE)


@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.parametrize(
    "rel",
    ["new.envelope.json", "handoff.receipt.json", "handoff.envelope.sig", "in/x.envelope.json"],
)
def test_writing_an_envelope_receipt_or_signature_is_denied(
    inside: Handoff, agent: str | None, rel: str
) -> None:
    target = inside.payload.parent / rel
    denied(inside, write(inside, target, agent), target, GATES_OWN)


@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.parametrize("name", ["handoff.md", "handoff.txt", "handoff"])
def test_writing_a_payload_beside_an_existing_envelope_is_denied(
    inside: Handoff, agent: str | None, name: str
) -> None:
    """The payload deleted, its envelope left: a new file the envelope names
    (``${PATH%.*}.envelope.json`` or ``PATH.envelope.json``) would be read as that
    hand-off."""
    inside.payload.unlink()
    target = inside.payload.parent / name
    denied(inside, write(inside, target, agent), target, NAMED)
    (inside.payload.parent / "other.md.envelope.json").write_text("{}")
    target = inside.payload.parent / "other.md"
    denied(inside, write(inside, target, agent), target, NAMED)


@pytest.mark.parametrize("agent", AGENTS)
def test_writing_through_a_link_to_a_handoff_is_denied(inside: Handoff, agent: str | None) -> None:
    """A link, in the hand-off directory or outside it, to a hand-off: the Write would
    rewrite that hand-off under a name of the agent's choosing."""
    for link in (inside.payload.parent / "new.md", inside.root / "notes.md"):
        link.symlink_to(inside.payload)
        denied(inside, write(inside, link, agent), link, IN_PLACE)


def test_a_configured_handoff_directory_is_sealed_alike(handoff: Handoff) -> None:
    (handoff.root / ".eidolons" / "config.toml").write_text('[handoffs]\ndirs = ["inbox"]\n')
    inbox = handoff.root / "inbox"
    inbox.mkdir()
    (inbox / "old.md").write_text("# old\n")
    r = handoff.hook("claude-code", write(handoff, inbox / "new.md", "vigil"))
    assert (r.code, r.out, r.err) == (0, "", "")
    denied(handoff, write(handoff, inbox / "old.md", "vigil"), inbox / "old.md", IN_PLACE)
    denied(handoff, edit(handoff, inbox / "new.md", "vigil"), inbox / "new.md", IN_PLACE)


def test_the_other_hosts_create_tools_may_create_and_never_change(inside: Handoff) -> None:
    new, old = inside.payload.parent / "new.md", inside.payload
    gemini: dict[str, Any] = {
        "session_id": "s-1",
        "cwd": str(inside.root),
        "hook_event_name": "BeforeTool",
    }
    create = {**gemini, "tool_name": "write_file", "tool_input": {"file_path": str(new)}}
    assert inside.hook("gemini", create).code == 0
    over = {**gemini, "tool_name": "write_file", "tool_input": {"file_path": str(old)}}
    replace = {**gemini, "tool_name": "replace", "tool_input": {"file_path": str(new)}}
    for doc, path in ((over, old), (replace, new)):
        r = inside.hook("gemini", doc)
        assert (r.code, r.out, r.err) == (2, "", f"eidolons hook: {path}: {IN_PLACE}\n")
    copilot: dict[str, Any] = {"timestamp": 1, "cwd": str(inside.root)}
    made = {**copilot, "toolName": "create", "toolArgs": json.dumps({"path": str(new)})}
    assert (lambda r: (r.code, r.out))(inside.hook("copilot", made)) == (0, "")
    changed = {**copilot, "toolName": "edit", "toolArgs": json.dumps({"path": str(new)})}
    out = json.loads(inside.hook("copilot", changed).out)
    assert out == {
        "permissionDecision": "deny",
        "permissionDecisionReason": f"eidolons hook: {new}: {IN_PLACE}",
    }
    patch = f"*** Begin Patch\n*** Add File: {new}\n+x\n*** End Patch\n"
    codex = {
        "session_id": "s",
        "cwd": str(inside.root),
        "hook_event_name": "PreToolUse",
        "tool_name": "apply_patch",
        "tool_input": {"command": patch},
    }
    r = inside.hook("codex", codex)
    assert (r.code, r.out, r.err) == (2, "", f"eidolons hook: {new}: {IN_PLACE}\n")


# --- the gate's verified copies ------------------------------------------------------------


@pytest.fixture
def copy(handoff: Handoff) -> Path:
    """The gate's copy of the hand-off's bytes, made by vigil's verified Read."""
    handoff.verify()
    doc = sample("hook_stdin_read_subagent_vigil", handoff.root)
    r = handoff.hook("claude-code", doc)
    verified_read(r, handoff.root, doc["tool_input"], PAYLOAD_TEXT.encode())
    return Path(json.loads(r.out)["hookSpecificOutput"]["updatedInput"]["file_path"])


KEPT = (
    "holds hand-off bytes the gate keeps (the memory store or its verified copies); read the "
    "hand-off itself, through the gate"
)


@pytest.mark.parametrize("agent", AGENTS)
def test_a_direct_read_of_the_gates_copy_is_denied(
    handoff: Handoff, copy: Path, agent: str | None
) -> None:
    link = handoff.root / "copy.md"
    link.symlink_to(copy)
    for path in (copy, link):
        doc = tool(handoff, "Read", {"file_path": str(path)}, agent)
        assert claude_deny(handoff.hook("claude-code", doc)) == f"eidolons hook: {path} {KEPT}"


@pytest.mark.parametrize("agent", AGENTS)
def test_no_tool_searches_lists_or_writes_the_gates_copies(
    handoff: Handoff, copy: Path, agent: str | None
) -> None:
    copies = copy.parent
    for name in ("Grep", "Glob"):
        doc = tool(handoff, name, {"pattern": "SECRET", "path": str(copies)}, agent)
        denied = claude_deny(handoff.hook("claude-code", doc))
        assert denied == f"eidolons hook: {copies} {KEPT}", name
    doc = tool(handoff, "mcp__filesystem__read_text_file", {"path": str(copy)}, agent)
    assert claude_deny(handoff.hook("claude-code", doc)).startswith(f"eidolons hook: {copy}")
    r = handoff.hook("claude-code", write(handoff, copy, agent))
    assert "the gate's state" in claude_deny(r)
    assert copy.read_bytes() == PAYLOAD_TEXT.encode()
