"""Every event the tool writes describes its hop (``parent_id``, artifact kind and path,
``context_tokens``; ``duration_ms`` on gate events), and lines written before that still
read and validate."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from eidolons.trace.log import append_event
from tests._schemas import validation_errors
from tests.conftest import Run, emit_cmd, read_trace

Cli = Callable[..., Run]
PARENT = "0190a0b0-0000-7000-8000-0000000000aa"
GATE_EVENTS = {"verify_pass", "verify_fail", "receive"}


def test_every_event_carries_the_hop_fields(cli: Cli, project: Path) -> None:
    payload = project / "handoff" / "scout-report.md"
    payload.parent.mkdir()
    payload.write_text("# r\n\n## Decision target\nx\n")
    extra = ("--json", "--parent", PARENT, "--tokens-used", "321")
    r = cli(*emit_cmd(payload, *extra, sender="atlas@1.4.2", to="vigil@1.9.0"))
    assert r.code == 0, r.err
    envelope = Path(r.json()["envelope_path"])
    thread = r.json()["envelope"]["thread_id"]
    assert cli("verify-envelope", envelope, "--block").code == 0
    assert cli("verify-incoming", payload, "--as", "vigil").code == 0
    payload.write_text("rewritten\n")
    assert cli("verify-envelope", envelope, "--mode", "warn").code == 0
    assert cli("verify-envelope", envelope, "--block").code == 3
    assert cli("verify-incoming", payload, "--as", "vigil").code == 3
    events = read_trace(project / ".eidolons" / ".trace" / f"{thread}.jsonl")
    assert [e["event"] for e in events] == [
        "emit", "verify_pass", "verify_pass", "receive", "verify_fail", "verify_fail",
        "verify_fail",
    ]  # fmt: skip
    for e in events:
        assert e["parent_id"] == PARENT, e
        assert e["artifact_kind"] == "scout-report" and e["artifact_path"] == "scout-report.md"
        assert e["context_tokens"] == 321
        if e["event"] in GATE_EVENTS:
            assert isinstance(e["duration_ms"], int) and 0 <= e["duration_ms"] < 60_000
        else:
            assert "duration_ms" not in e
        assert validation_errors(e, "handoff-event.v1.json") == [], json.dumps(e)


def test_first_hop_records_a_null_parent(cli: Cli, project: Path) -> None:
    (project / "a.md").write_text("# a\n")
    r = cli(*emit_cmd("a.md", "--json"))
    events = read_trace(Path(r.json()["trace"]))
    assert "parent_id" in events[0] and events[0]["parent_id"] is None


def test_an_unparsable_envelope_invents_no_hop_fields(cli: Cli, project: Path) -> None:
    (project / "bad.envelope.json").write_text("{not json")
    assert cli("verify-envelope", project / "bad.envelope.json", "--block").code == 2
    (event,) = read_trace(project / ".eidolons" / ".trace" / "unknown.jsonl")
    assert not {"parent_id", "artifact_kind", "artifact_path", "context_tokens"} & set(event)
    assert isinstance(event["duration_ms"], int)


OLD = {  # a line as the tool wrote it before the hop fields existed
    "ts": "2026-11-30T07:23:17.931Z",
    "event": "emit",
    "thread_id": "0190a0b0-0000-7000-8000-0000000000f0",
    "from": "atlas@1.4.2",
    "to": "vigil@1.9.0",
    "performative": "PROPOSE",
    "integrity_method": "sha256",
    "context_tokens": 10,
    "gate": "sender",
}


def test_older_lines_still_read_and_validate(cli: Cli, project: Path) -> None:
    thread = OLD["thread_id"]
    trace = project / ".eidolons" / ".trace" / f"{thread}.jsonl"
    new = {**OLD, "ts": "2026-11-30T07:23:17.930Z", "message_id": "m-new"}
    new |= {"parent_id": "m-old", "artifact_kind": "spec", "artifact_path": "spec.md"}
    append_event(trace, new)  # stamped *before* its parent: order follows parent_id
    append_event(trace, {**OLD, "message_id": "m-old"})
    for event in read_trace(trace):
        assert validation_errors(event, "handoff-event.v1.json") == []
    spans = cli("trace", "otel", thread).json()["spans"]
    assert [s["span_id"] for s in spans] == ["m-old", "m-new"]
    assert spans[0]["attributes"]["eidolons.artifact.kind"] is None  # unknown, not invented
    assert spans[1]["attributes"]["eidolons.artifact.kind"] == "spec"
    assert spans[1]["parent_span_id"] == "m-old"
    assert cli("trace", "show", thread).code == 0
