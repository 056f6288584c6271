"""One rule for what counts as an orchestrator verdict, on PostgreSQL as on JSONL: a row
whose bytes read as the orchestrator's ``verify_pass`` but that the store did not stamp
as one (a receiver host's login wrote it with plain SQL) is no pass for the gate, nor for
``trace show`` and ``trace verify``, and ``trace import`` never carries it into a JSONL
trace, where its bytes alone would be evidence."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eidolons.ecl.events import chained
from eidolons.trace.log import encode_event
from tests.conftest import Run, clean_env, emit_payload, trace_files
from tests.tracestore.pgserver import GATE_LOGIN, ORCH_LOGIN, PgServer

Cli = Callable[..., Run]


@pytest.fixture
def orch(pg: PgServer, shared_db: str) -> dict[str, str]:
    return clean_env(EIDOLONS_TRACE_DSN=pg.dsn(ORCH_LOGIN, shared_db))


@pytest.fixture
def gate(pg: PgServer, shared_db: str) -> dict[str, str]:
    return clean_env(EIDOLONS_TRACE_DSN=pg.dsn(GATE_LOGIN, shared_db))


def forge_after(pg: PgServer, db: str, thread: str, event: dict[str, Any]) -> None:
    """What an agent holding the receiver host's login can do: append, with plain SQL
    and an intact chain, a row whose bytes are ``event``; the store gives it no stamp."""
    import psycopg

    with psycopg.connect(pg.dsn(GATE_LOGIN, db), autocommit=True) as conn:
        row = conn.execute(
            "SELECT seq, line FROM eidolons.trace_events WHERE thread = %s "
            "ORDER BY seq DESC LIMIT 1",
            (thread,),
        ).fetchone()
        assert row is not None
        seq, prev = row[0] + 1, hashlib.sha256(bytes(row[1])).hexdigest()
        line = encode_event(chained(event, seq, prev))[:-1]
        conn.execute(
            "INSERT INTO eidolons.trace_events (thread, seq, prev, line) VALUES (%s, %s, %s, %s)",
            (thread, seq, prev, line),
        )


@pytest.fixture
def forged(
    cli: Cli, project: Path, pg: PgServer, shared_db: str, orch: dict[str, str], gate: Any
) -> tuple[Path, str]:
    """A hand-off the orchestrator failed (the payload changed after emit), then a copy
    of an orchestrator verify_pass for it, written by the receiver host's login."""
    payload, envelope, _ = emit_payload(cli, project, env=gate)
    payload.write_text("# Report\n\n## Decision target\nrewritten\n", encoding="utf-8")
    r = cli("verify-envelope", envelope, "--block", "--json", env=orch)
    assert r.code == 3, r.out
    thread = r.json()["thread_id"]
    shown = cli("trace", "show", thread, "--json", env=orch).json()
    (fail,) = [e for e in shown if e["event"] == "verify_fail"]
    copy = {k: v for k, v in fail.items() if k not in ("seq", "prev")}
    copy.update(event="verify_pass", verdict="pass", decision="accepted")
    copy.pop("verify_failure_code", None)
    forge_after(pg, shared_db, thread, copy)
    return payload, thread


def test_the_receiver_does_not_count_the_copied_pass(
    cli: Cli, forged: tuple[Path, str], gate: dict[str, str]
) -> None:
    payload, _ = forged
    r = cli("verify-incoming", payload, "--as", "vigil", "--json", env=gate)
    assert r.code == 3 and r.json()["failure_code"] != "PASS", r.out


def test_trace_show_marks_the_row_the_gate_would_not_count(
    cli: Cli, forged: tuple[Path, str], gate: dict[str, str]
) -> None:
    _, thread = forged
    r = cli("trace", "show", thread, env=gate)
    assert r.code == 0, r.err
    last = r.out.splitlines()[-1]
    assert "verify_pass" in last and "NOT COUNTED" in last, r.out
    assert not last.startswith("ok"), last
    events = cli("trace", "show", thread, "--json", env=gate).json()
    assert "not_counted" in events[-1] and "not_counted" not in events[-2]


def test_trace_verify_does_not_report_the_row_as_a_pass(
    cli: Cli, forged: tuple[Path, str], gate: dict[str, str]
) -> None:
    _, thread = forged
    r = cli("trace", "verify", thread, "--block", "--json", env=gate)
    assert r.code == 3, r.out
    doc = r.json()
    (hop,) = doc["results"]
    assert hop["verdict"] == "tamper" and not hop["ok"], hop  # the failure on record
    (chain,) = doc["chains"]
    assert [x.get("counted") for x in chain["receipts"]] == [True, False], chain["receipts"]
    r = cli("trace", "verify", thread, env=gate)
    assert "not counted" in r.out, r.out


def test_trace_import_refuses_to_carry_the_row_into_a_jsonl_trace(
    cli: Cli, forged: tuple[Path, str], tmp_path: Path, pg: PgServer, shared_db: str
) -> None:
    _, thread = forged
    other = tmp_path / "other"
    (other / ".eidolons").mkdir(parents=True)
    r = cli("trace", "import", thread, "--dsn", pg.dsn(ORCH_LOGIN, shared_db), "--root", other)
    assert r.code == 3, r.out + r.err
    (line,) = r.err.strip().splitlines()
    assert line.startswith(f"{thread}: refused") and "does not count" in line, line
    assert trace_files(other) == []


def test_a_receiver_host_recording_a_verdict_gets_one_line_with_the_reason(
    cli: Cli, project: Path, gate: dict[str, str]
) -> None:
    _, envelope, _ = emit_payload(cli, project, env=gate)
    r = cli("verify-envelope", envelope, "--block", env=gate)
    assert r.code == 3
    said = [ln for ln in (r.out + r.err).splitlines() if "trace not written" in ln]
    assert len(said) == 1, r.out + r.err
    assert f"login {GATE_LOGIN} may not record orchestrator verdicts" in said[0]
    assert "bound there as gate" in said[0]
    assert "PL/pgSQL" not in r.out + r.err and "CONTEXT" not in r.out + r.err


def test_the_mark_is_the_readers_never_the_bytes(
    cli: Cli, forged: tuple[Path, str], pg: PgServer, shared_db: str, gate: dict[str, str]
) -> None:
    """A writer cannot mark a line itself: ``not_counted`` in a row's bytes is dropped."""
    _, thread = forged
    forge_after(pg, shared_db, thread, {"event": "receive", "gate": "receiver", "not_counted": "x"})
    events = cli("trace", "show", thread, "--json", env=gate).json()
    assert "not_counted" not in events[-1] and "not_counted" in events[-2]
    assert "NOT COUNTED" not in cli("trace", "show", thread, env=gate).out.splitlines()[-1]


def test_a_jsonl_pass_spelling_its_id_another_way_is_marked_in_the_views(
    cli: Cli, project: Path
) -> None:
    """On JSONL the bytes are the record: a verify_pass whose message id is escaped
    (``\\u0030...``, not as eidolons writes it) is no pass for the gate, and ``trace show``
    says so instead of listing it as one; a line cannot mark itself."""
    payload, envelope, doc = emit_payload(cli, project)
    payload.write_text("# Report\n\n## Decision target\nrewritten\n", encoding="utf-8")
    r = cli("verify-envelope", envelope, "--block", "--json")
    assert r.code == 3, r.out
    thread, mid = r.json()["thread_id"], doc["message_id"]
    shown = cli("trace", "show", thread, "--json").json()
    (fail,) = [e for e in shown if e["event"] == "verify_fail"]
    copy = {k: v for k, v in fail.items() if k not in ("seq", "prev")}
    copy.update(event="verify_pass", verdict="pass", decision="accepted")
    copy.pop("verify_failure_code", None)
    (path,) = trace_files(project)
    lines = path.read_bytes().splitlines()
    line = encode_event(chained(copy, len(lines) + 1, hashlib.sha256(lines[-1]).hexdigest()))
    escaped = "".join(f"\\u{ord(c):04x}" for c in mid)
    line = line.replace(mid.encode(), escaped.encode())  # every spelling of it (thread id too)
    assert mid.encode() not in line, line
    with path.open("ab") as fh:
        fh.write(line)
    last = cli("trace", "show", thread).out.splitlines()[-1]
    assert "verify_pass" in last and "NOT COUNTED" in last, last
    events = cli("trace", "show", thread, "--json").json()
    assert "not_counted" in events[-1] and "not_counted" not in events[-2]
    assert cli("verify-incoming", payload, "--as", "vigil").code == 3
