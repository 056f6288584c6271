"""The route gate reads the envelope once: both gates judge the same
envelope bytes and the same payload read, COMMAND gets a snapshot of both, and the route
refuses unless both gates judged the same message."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import eidolons.gates.orchestrator as orchestrator
from eidolons.gates.route import RouteDecision
from eidolons.gates.verify import verify_envelope_file
from tests.conftest import Run, read_trace
from tests.test_receiver import handoff

Cli = Callable[..., Run]


def test_an_envelope_renamed_over_env_between_the_gates_is_not_judged(
    cli: Cli, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reported race: ENV passes the orchestrator gate, then another verified
    envelope is renamed over ENV before the receiver gate reads it. The receiver must
    judge ENV's bytes (the route's one read), never the one renamed over it."""
    a = handoff(cli, project, "atlas", "vigil", "PROPOSE", "scout-report", name="h/a.md")
    b = handoff(cli, project, "atlas", "vigil", "PROPOSE", "scout-report", name="h/b.md")
    env_a, env_b = a.with_suffix(".envelope.json"), b.with_suffix(".envelope.json")
    id_a = json.loads(env_a.read_bytes())["message_id"]
    thread_b = json.loads(env_b.read_bytes())["thread_id"]
    real = verify_envelope_file  # what the orchestrator gate imports and calls

    def verify_then_swap(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        os.replace(env_b, env_a)  # the race, made deterministic
        return result

    monkeypatch.setattr(orchestrator, "verify_envelope_file", verify_then_swap)
    r = cli("run", "--verify", env_a, "--as", "vigil", "--mode", "block", "--json")
    doc = r.json()
    assert doc["incoming_verify"]["message_id"] == id_a
    assert doc["receiver_verify"]["message_id"] == id_a, "the receiver judged another envelope"
    events = read_trace(project / ".eidolons/.trace" / f"{thread_b}.jsonl")
    assert [e["event"] for e in events].count("receive") == 0


def test_command_gets_snapshots_of_the_envelope_and_payload_judged(cli: Cli, project: Path) -> None:
    a = handoff(cli, project, "atlas", "vigil", "PROPOSE", "scout-report", name="h/a.md")
    env_a = a.with_suffix(".envelope.json")
    code = (
        "import os, sys; "
        "sys.stdout.buffer.write(open(os.environ['ECL_ENVELOPE'], 'rb').read()); "
        "print(); print(os.environ['ECL_ENVELOPE_SOURCE'])"
    )
    import sys

    r = cli("run", "--verify", env_a, "--as", "vigil", "--mode", "block", "--",
            sys.executable, "-c", code)  # fmt: skip
    assert r.code == 0, r.err
    body, _, source = r.out.rstrip("\n").rpartition("\n")
    assert json.loads(body)["message_id"] == json.loads(env_a.read_bytes())["message_id"]
    assert source.strip() == str(env_a.resolve())


def test_the_route_refuses_unless_both_gates_judged_the_same_bytes(cli: Cli, project: Path) -> None:
    """Defense in depth: a receiver result about other envelope bytes, or another
    message, blocks the route even though both gates passed."""
    from eidolons.gates.receiver import verify_incoming
    from eidolons.io.config import find_root
    from eidolons.io.contracts import ContractSet

    a = handoff(cli, project, "atlas", "vigil", "PROPOSE", "scout-report", name="h/a.md")
    b = handoff(cli, project, "atlas", "vigil", "PROPOSE", "scout-report", name="h/b.md")
    root = find_root(project)
    outcome = orchestrator.run_gate(
        a.with_suffix(".envelope.json"), root=root, mode="block", write_trace=False
    )
    contracts = ContractSet.load(root)
    same = verify_incoming(a, "vigil", root=root, contracts=contracts, write_trace=False)
    other = verify_incoming(b, "vigil", root=root, contracts=contracts, write_trace=False)
    assert same and other
    assert RouteDecision(outcome, same).allowed
    blocked = RouteDecision(outcome, other)
    assert not blocked.allowed and "different messages" in blocked.reason()
    same.envelope_sha256 = "0" * 64
    assert not RouteDecision(outcome, same).allowed
