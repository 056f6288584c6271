"""The refusal hand-back (ADR 0017): every refusal of the receiver
gate leaves a REFUSE envelope for the orchestrator, beside a short report."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import Run, emit_payload, read_trace, trace_files

Cli = Callable[..., Run]
SECRET = "PAYLOAD-ONLY-TEXT"


def refused(cli: Cli, project: Path) -> tuple[Run, Path, dict[str, object]]:
    payload, envelope, doc = emit_payload(
        cli, project, "handoff/r.md", f"# R\n\n## Decision target\n{SECRET}\n"
    )
    assert cli("verify-envelope", envelope, "--block").code == 0
    payload.write_text(f"# R\n\n## Decision target\n{SECRET} rewritten\n")
    r = cli("verify-incoming", payload, "--as", "vigil", "--json", "--no-memory")
    assert r.code == 3
    return r, payload, doc


def test_a_refusal_writes_a_refuse_envelope_for_the_orchestrator(cli: Cli, project: Path) -> None:
    r, _, doc = refused(cli, project)
    path = Path(r.json()["handback"])
    assert path.parent == project / ".eidolons" / "refusals"
    assert path.name == f"vigil-{doc['message_id']}-integrity-mismatch.envelope.json"
    back = json.loads(path.read_text())
    assert back["from"] == {"eidolon": "vigil", "version": "1.9.0"}
    assert back["to"]["eidolon"] == "orchestrator"
    assert back["performative"] == "REFUSE"
    assert back["assumptions"] == ["refused: INTEGRITY_MISMATCH"]
    assert back["expected_response"]["performative"] == "DECIDE"
    assert back["parent_id"] == doc["message_id"] and back["thread_id"] == back["message_id"]
    report = path.parent / back["artifact"]["path"]
    text = report.read_text()
    assert "[vigil-verify-incoming] REFUSE: INTEGRITY_MISMATCH from atlas" in text
    assert SECRET not in text


def test_the_handback_is_a_conformant_envelope_the_orchestrator_can_verify(
    cli: Cli, project: Path
) -> None:
    r, _, _ = refused(cli, project)
    path = Path(r.json()["handback"])
    check = cli("check", path, "--json")
    failed = [
        g["id"]
        for doc in (check.json() if isinstance(check.json(), list) else [check.json()])
        for g in doc.get("gates", doc.get("results", []))
        if g.get("status") == "fail" and g.get("level") == "MUST"
    ]
    # the only MUST failing: no shipped contract for the hand-back edge (ADR 0017)
    assert failed == ["C-1"], check.out
    assert cli("verify-envelope", path, "--block").code == 0


def test_the_receivers_verify_fail_names_the_handback_and_stays_last(
    cli: Cli, project: Path
) -> None:
    r, _, doc = refused(cli, project)
    (trace,) = [t for t in trace_files(project) if t.stem == doc["thread_id"]]
    events = read_trace(trace)
    assert events[-1]["event"] == "verify_fail" and events[-1]["gate"] == "receiver"
    assert events[-1]["handback"] == r.json()["handback"]
    assert [e["event"] for e in events] == ["emit", "verify_pass", "verify_fail"]
    (own,) = [
        t
        for t in trace_files(project)
        if t.stem == json.loads(Path(r.json()["handback"]).read_text())["thread_id"]
    ]
    (emitted,) = read_trace(own)
    assert emitted["event"] == "emit" and emitted["from"].startswith("vigil@")


def test_a_repeated_refusal_writes_no_second_handback(cli: Cli, project: Path) -> None:
    r, payload, _ = refused(cli, project)
    path = Path(r.json()["handback"])
    before = sorted(p.name for p in path.parent.iterdir()), path.stat().st_mtime_ns
    again = cli("verify-incoming", payload, "--as", "vigil", "--json", "--no-memory")
    assert again.json()["handback"] == str(path)
    assert (sorted(p.name for p in path.parent.iterdir()), path.stat().st_mtime_ns) == before


def test_the_text_refusal_is_still_exactly_the_seeds_line(cli: Cli, project: Path) -> None:
    payload, _, _ = emit_payload(cli, project, "handoff/t.md")
    r = cli("verify-incoming", payload, "--as", "vigil", "--no-memory")
    assert r.code == 3
    assert r.err.splitlines()[0] == "[vigil-verify-incoming] REFUSE: UNVERIFIED from atlas"
    assert list((project / ".eidolons" / "refusals").glob("*.envelope.json"))


def test_run_says_where_the_handback_was_written(cli: Cli, project: Path) -> None:
    _, envelope, _ = emit_payload(cli, project, "handoff/u.md")
    r = cli("run", "--verify", envelope, "--as", "gilgamesh")
    assert r.code == 3
    (line,) = [x for x in r.err.splitlines() if "hand-back for the orchestrator" in x]
    path = Path(line.rpartition(": ")[2])
    assert path.is_file() and json.loads(path.read_text())["performative"] == "REFUSE"
