"""The ATLAS -> SPECTRA -> APIVR -> VIGIL pipeline on the real Claude Code, its sandbox
on, with no agent running ``eidolons``: senders write a draft with Write and emit it
through the MCP server, which places it in the hand-offs (APIVR, on a high-trust edge,
through a server bound to it that tags with the host's HMAC key), the orchestrator gate
runs on each dispatch, receivers read through the gate's MCP reader (``read_verified``,
judged by the hook as the calling subagent and again by the server). A hand-off tampered
before its dispatch is refused at dispatch, its REFUSE line handed back to the main
loop."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.hosts.claude_host import (
    ATTACK,
    SECRET,
    Project,
    claude_or_skip,
    result,
    seq,
    tool,
    verified,
)
from tests.hosts.fake_anthropic import FakeAnthropic

# --- the pipeline -------------------------------------------------------------------------

SCOUT = (
    "# Scout report\n\n## Decision target\nThe install race.\n\n## Findings\n"
    "- install.sh writes twice [evidence: install.sh:12]\n\n## Gaps\nnone\n\n## Scope\nall\n"
)
SPEC = (
    "# Spec\n\n## Stories\nOne writer.\n\n## Validation gates\ntests\n\n## Agent hints\n"
    "lock\n\n## Given when then\nGiven two runs, when both write, then one waits.\n"
)
CHANGE = f"# Change summary\n\nThe writer now takes a lock. {SECRET}\n"


@pytest.fixture(scope="module")
def pipeline(fake: FakeAnthropic, disk_tmp: Callable[[str], Path]) -> dict[str, Any]:
    claude_or_skip()
    base = disk_tmp("claude-pipeline")
    p = Project(
        base,
        "pipeline",
        {
            "atlas": "Read, Write, mcp__eidolons__emit",
            "spectra": "Read, Write, Bash, mcp__eidolons__emit, mcp__eidolons__read_verified",
            "apivr": "Read, Write, Bash, mcp__eidolons-apivr__emit, mcp__eidolons__read_verified",
            "vigil": "Read, mcp__eidolons__read_verified",
            "forge": "Read",
        },
        fake,
    )
    key_file = p.home / ".config" / "eidolons" / "hmac.key"
    key_file.write_bytes(os.urandom(16).hex().encode())
    key_file.chmod(0o600)
    h = p.root / ".eidolons" / "handoffs"
    drafts = p.root / "drafts"  # a sender writes its draft; emit places it in the hand-offs

    def emit(server: str, payload: str, sender: str, to: str, kind: str, **extra: Any) -> str:
        return tool(
            f"mcp__{server}__emit",
            payload=str(drafts / payload),
            sender=f"{sender}@1.0.0",
            to=f"{to}@1.0.0",
            performative="PROPOSE",
            kind=kind,
            objective=f"{sender} hands over its {kind}",
            **extra,
        )

    steps = [
        "agent atlas "
        + seq(
            tool("Write", file_path=str(drafts / "scout.md"), content=SCOUT),
            emit(
                "eidolons",
                "scout.md",
                "atlas",
                "spectra",
                "scout-report",
                input_handles=["mission.md"],
            ),
        ),
        "agent spectra "
        + seq(
            verified(h / "scout.md"),
            tool("Write", file_path=str(drafts / "spec.md"), content=SPEC),
            emit("eidolons", "spec.md", "spectra", "apivr", "spec"),
        ),
        "agent apivr "
        + seq(
            verified(h / "spec.md"),
            tool("Write", file_path=str(drafts / "change.md"), content=CHANGE),
            emit(
                "eidolons-apivr",
                "change.md",
                "apivr",
                "vigil",
                "change-summary",
                hmac=True,
                ise={"assertion_grade": "self-attested"},
            ),
        ),
        f"agent vigil {verified(h / 'change.md')}",
    ]
    # a hand-off to forge, emitted by the user, tampered before its dispatch
    request = (
        f"# Request\n\n## Question\nIs the lock enough? {SECRET}\n\n## Context\nrace\n\n"
        "## Constraints\nnone\n\n## Candidate answers\nyes\n"
    )
    tampered = p.handoff(
        "late.md",
        request,
        False,
        to="forge@1.0.0",
        kind="reasoning-request",
        performative="REQUEST",
    )
    tampered.write_text(request.replace("enough?", f"enough? {ATTACK}"))
    steps.append(f"agent forge read {tampered}")
    runs = {"main": p.session(seq(*steps), 300)}
    trace = "".join(
        f.read_text() for f in sorted((p.root / ".eidolons" / ".trace").glob("*.jsonl"))
    )
    return {
        "project": p,
        "runs": runs,
        "results": dict(fake.results),
        "steps": steps,
        "trace": trace,
    }


def test_the_pipeline_runs_with_no_agent_running_eidolons(pipeline: dict[str, Any]) -> None:
    h = pipeline["project"].root / ".eidolons" / "handoffs"
    for name in ("scout", "spec", "change"):
        assert (h / f"{name}.envelope.json").is_file(), name
    events = [json.loads(line) for line in pipeline["trace"].splitlines()]
    passes = {
        (e.get("gate"), e.get("to") or e.get("receiver"), e["event"])
        for e in events
        if e.get("event") == "verify_pass"
    }
    # the orchestrator gate ran at each dispatch, and each receiver's gate passed
    assert (
        sum(
            1 for e in events if e.get("event") == "verify_pass" and e.get("gate") == "orchestrator"
        )
        >= 3
    ), passes
    assert (
        sum(1 for e in events if e.get("event") == "verify_pass" and e.get("gate") == "receiver")
        >= 3
    ), passes
    vigil = result(pipeline, verified(h / "change.md"), "main")
    assert not vigil["is_error"] and SECRET in vigil["text"], vigil


def test_a_handoff_tampered_before_dispatch_is_refused_at_dispatch(
    pipeline: dict[str, Any],
) -> None:
    root = pipeline["project"].root
    step = f"agent forge read {root / '.eidolons' / 'handoffs' / 'late.md'}"
    seen = result(pipeline, step, "main")
    assert seen["is_error"], seen
    assert "[orchestrator-verify-incoming] REFUSE: INTEGRITY_MISMATCH from atlas" in seen["text"]
    assert ATTACK not in seen["text"]
    assert "verify_fail" in pipeline["trace"]
