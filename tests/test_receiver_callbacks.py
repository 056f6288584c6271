"""The library's receiver gate and its caller's ``on_pass`` callback (ADR 0022 part 2, after
ADR 0003): the callback runs after the pass is on record; when it raises, the record
stands (``verify_pass`` and ``receive`` stay in the trace, nothing is appended or
undone) and the caller gets a typed error that carries the recorded result, never a
silent pass and never a lost record."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eidolons.errors import EidolonsError
from eidolons.gates.receiver import OnPassError, verify_incoming
from eidolons.io.contracts import ContractSet
from tests.conftest import Run, emit_payload, read_trace

Cli = Callable[..., Run]


def _verified(cli: Cli, project: Path) -> tuple[Path, Path]:
    payload, envelope, _ = emit_payload(cli, project)
    assert cli("verify-envelope", envelope).code == 0
    return payload, envelope


def _events(project: Path, envelope: Path) -> list[tuple[str, str]]:
    env = json.loads(envelope.read_text())
    trace = project / ".eidolons/.trace" / f"{env['thread_id']}.jsonl"
    return [(e["event"], e.get("gate", "")) for e in read_trace(trace)]


def _gate(project: Path, payload: Path, on_pass: Any) -> Any:
    return verify_incoming(
        payload,
        "vigil",
        root=project,
        contracts=ContractSet.builtin(),
        on_pass=on_pass,
        handback=False,
    )


def test_an_on_pass_that_raises_keeps_the_record_and_says_so(cli: Cli, project: Path) -> None:
    payload, envelope = _verified(cli, project)
    seen: list[bytes | bytearray | None] = []

    def broken(env: Any, data: bytes | bytearray | None) -> dict[str, Any]:
        seen.append(data)
        raise RuntimeError("the caller's store is down")

    with pytest.raises(OnPassError) as caught:
        _gate(project, payload, broken)
    err = caught.value
    assert isinstance(err, EidolonsError) and err.code == "ON_PASS_FAILED"
    assert err.exit_code == 70  # never 0 if it reaches the CLI
    assert isinstance(err.__cause__, RuntimeError)
    assert "RuntimeError: the caller's store is down" in err.diagnostics()
    # the verdict on record is the gate's, and the error carries it whole
    assert err.result and err.result.status == "pass"
    assert err.result.trace_path is not None
    assert err.result.extra["on_pass_error"] == "RuntimeError: the caller's store is down"
    assert seen == [payload.read_bytes()]  # it was called with the verified bytes
    events = _events(project, envelope)
    assert events[-2:] == [("verify_pass", "receiver"), ("receive", "receiver")]


def test_an_on_pass_that_works_adds_its_fields(cli: Cli, project: Path) -> None:
    payload, _ = _verified(cli, project)
    result = _gate(project, payload, lambda env, data: {"ingest": "ok"})
    assert result and result.extra["ingest"] == "ok" and "on_pass_error" not in result.extra


def test_a_refusal_never_reaches_on_pass(cli: Cli, project: Path) -> None:
    payload, _ = _verified(cli, project)
    payload.write_text("# tampered\n")
    called: list[object] = []

    def record(env: Any, data: bytes | bytearray | None) -> dict[str, Any]:
        called.append(env)
        return {}

    result = _gate(project, payload, record)
    assert not result and result.failure_code == "INTEGRITY_MISMATCH" and called == []


def test_an_interrupt_in_on_pass_is_not_wrapped(cli: Cli, project: Path) -> None:
    payload, envelope = _verified(cli, project)

    def interrupted(env: Any, data: bytes | bytearray | None) -> dict[str, Any]:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _gate(project, payload, interrupted)
    assert _events(project, envelope)[-1] == ("receive", "receiver")
