"""The gates on the shared PostgreSQL store: the orchestrator on host A records, the
receiver on host B finds it; misconfiguration and an unreachable store refuse, never fall
back to a local file; only the orchestrator role can record orchestrator verdicts."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Run, clean_env, emit_cmd, emit_payload, trace_files
from tests.tracestore.pgserver import GATE_LOGIN, ORCH_LOGIN, PgServer

Cli = Callable[..., Run]


@pytest.fixture(scope="module")
def db(shared_db: str) -> str:
    return shared_db


@pytest.fixture
def orch(pg: PgServer, db: str) -> dict[str, str]:
    return clean_env(EIDOLONS_TRACE_DSN=pg.dsn(ORCH_LOGIN, db))


@pytest.fixture
def gate(pg: PgServer, db: str) -> dict[str, str]:
    return clean_env(EIDOLONS_TRACE_DSN=pg.dsn(GATE_LOGIN, db))


def handoff(cli: Cli, project: Path, env: dict[str, str]) -> tuple[Path, Path]:
    payload, envelope, _ = emit_payload(cli, project, env=env)
    return payload, envelope


def incoming(cli: Cli, payload: Path, env: dict[str, str]) -> Run:
    return cli("verify-incoming", payload, "--as", "vigil", "--json", env=env)


def test_pipeline_across_hosts_on_postgres(
    cli: Cli, project: Path, orch: dict[str, str], gate: dict[str, str]
) -> None:
    payload, envelope = handoff(cli, project, gate)
    r = cli("verify-envelope", envelope, "--block", "--json", env=orch)
    assert r.code == 0, r.err
    assert r.json()["trace"].startswith("postgresql://")
    r = incoming(cli, payload, gate)
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["status"] == "pass" and doc["record"]["gate"] == "orchestrator"
    assert trace_files(project) == []  # nothing went to a local file
    r = cli("trace", "show", doc["thread_id"], "--json", env=gate)
    assert r.code == 0, r.err
    events = r.json()
    assert [e["event"] for e in events] == ["emit", "verify_pass", "verify_pass", "receive"]
    assert [e["seq"] for e in events] == [1, 2, 3, 4]


def test_a_pass_in_a_local_file_is_not_evidence_on_postgres(
    cli: Cli, project: Path, gate: dict[str, str]
) -> None:
    payload, envelope = handoff(cli, project, gate)
    r = cli("verify-envelope", envelope, "--block")  # no DSN: the pass goes to a local file
    assert r.code == 0 and trace_files(project)
    r = incoming(cli, payload, gate)
    assert r.code == 3
    assert r.json()["failure_code"] == "UNVERIFIED"


def test_unreachable_store_refuses_unverified_never_a_file(
    cli: Cli, project: Path, tmp_path: Path
) -> None:
    payload, envelope = handoff(cli, project, clean_env())
    assert cli("verify-envelope", envelope, "--block").code == 0  # a valid local pass
    down = clean_env(EIDOLONS_TRACE_DSN=f"postgresql://nobody@/x?host={tmp_path}")
    r = incoming(cli, payload, down)
    assert r.code == 3, r.out
    doc = r.json()
    assert doc["failure_code"] == "UNVERIFIED"
    assert "cannot connect" in doc["failures"][0]["message"]
    r = cli("verify-incoming", payload, "--as", "vigil", env=down)
    assert r.code == 3 and "REFUSE: UNVERIFIED from atlas" in r.err + r.out
    r = cli("verify-envelope", envelope, "--block", env=down)  # the pass cannot be recorded
    assert r.code == 3


@pytest.mark.parametrize(
    "content",
    [
        b'{"store": "postgresql"}',  # required, and no DSN in the environment
        b'{"store": "jsonl"}',  # a project file cannot choose the file store
        b'{"store": "postgresql", "dsn": "postgresql://evil@/x"}',  # nor the server
        b"not json",
    ],
)
def test_project_file_only_narrows(cli: Cli, project: Path, content: bytes) -> None:
    payload, envelope = handoff(cli, project, clean_env())
    assert cli("verify-envelope", envelope, "--block").code == 0
    (project / ".eidolons" / "trace-store.json").write_bytes(content)
    r = incoming(cli, payload, clean_env())
    assert r.code == 3
    assert r.json()["failure_code"] == "UNVERIFIED"
    assert "trace-store.json" in r.json()["failures"][0]["message"]


def test_project_file_requiring_postgres_with_a_dsn_uses_it(
    cli: Cli, project: Path, orch: dict[str, str], gate: dict[str, str]
) -> None:
    (project / ".eidolons" / "trace-store.json").write_text('{"store": "postgresql"}')
    payload, envelope = handoff(cli, project, gate)
    assert cli("verify-envelope", envelope, "--block", env=orch).code == 0
    assert incoming(cli, payload, gate).code == 0


def test_a_gate_role_cannot_record_an_orchestrator_verdict(
    cli: Cli, project: Path, gate: dict[str, str]
) -> None:
    """An agent holding the receiver host's credentials cannot self-mint a pass."""
    payload, envelope = handoff(cli, project, gate)
    r = cli("verify-envelope", envelope, "--block", "--json", env=gate)
    assert r.code == 3
    assert "may not record orchestrator verdicts" in r.json()["trace_error"]
    r = incoming(cli, payload, gate)
    assert r.code == 3 and r.json()["failure_code"] == "UNVERIFIED"


def test_a_gate_role_recording_an_orchestrator_verdict_says_why_in_one_line(
    cli: Cli, project: Path, gate: dict[str, str]
) -> None:
    """The trigger's refusal reaches the receiver host's user as one line with its reason
    (no PL/pgSQL context, no traceback) and exit 3, from verify-envelope and from run."""
    _, envelope = handoff(cli, project, gate)
    why = f"eidolons: login {GATE_LOGIN} may not record orchestrator verdicts in database "
    for args in (("verify-envelope", envelope), ("run", "--verify", envelope, "--", "true")):
        r = cli(*args, env=gate)
        assert r.code == 3, r.err
        said = [line for line in r.err.splitlines() if why in line]
        assert len(said) == 1 and "it is bound there as gate" in said[0], r.err
        assert "CONTEXT" not in r.err and "PL/pgSQL" not in r.err and "Traceback" not in r.err
    r = cli("run", "--verify", envelope, "--json", env=gate)
    assert r.code == 3 and why in r.json()["reason"]


def test_uninitialised_database_refuses_and_says_how_to_fix(
    cli: Cli, project: Path, pg: PgServer
) -> None:
    env = clean_env(EIDOLONS_TRACE_DSN=pg.dsn(db=pg.new_database(initialised=False)))
    payload, envelope = handoff(cli, project, clean_env())
    assert cli("verify-envelope", envelope, "--block").code == 0
    r = incoming(cli, payload, env)
    assert r.code == 3
    assert "eidolons trace store init" in r.json()["failures"][0]["message"]


def test_store_init_is_idempotent(cli: Cli, pg: PgServer) -> None:
    dsn = pg.dsn(db=pg.new_database(initialised=False))
    r = cli("trace", "store", "init", "--dsn", dsn, "--grant-gate", GATE_LOGIN)
    assert r.code == 0, r.err
    assert "schema version 4 (migrations applied: 1, 2, 3, 4)" in r.out
    r = cli("trace", "store", "init", env=clean_env(EIDOLONS_TRACE_DSN=dsn))
    assert r.code == 0 and "already current" in r.out
    r = cli("trace", "store", "init")
    assert r.code == 2 and "--dsn" in r.err
    r = cli("trace", "store", "init", "--dsn", "mysql://x")
    assert r.code == 2


def test_bad_dsn_refuses(cli: Cli, project: Path) -> None:
    payload, envelope = handoff(cli, project, clean_env())
    assert cli("verify-envelope", envelope, "--block").code == 0
    r = incoming(cli, payload, clean_env(EIDOLONS_TRACE_DSN="host=elsewhere"))
    assert r.code == 3 and "postgresql://" in r.json()["failures"][0]["message"]


def test_psycopg_is_imported_only_when_a_dsn_is_set(project: Path) -> None:
    code = f"""
import sys, io, contextlib
from eidolons.cli.main import main
payload = {str(project / "p.md")!r}
open(payload, "w").write("# x\\n")
with contextlib.redirect_stdout(io.StringIO()):
    main(["emit", payload, "--from", "atlas", "--to", "vigil", "--performative", "INFORM",
          "--kind", "scout-report", "--objective", "o", "--root", {str(project)!r}])
    main(["verify-envelope", payload[:-3] + ".envelope.json", "--block"])
    main(["verify-incoming", payload, "--as", "vigil"])
    main(["trace", "show", "unknown"])
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "psycopg")))
""".replace("print(json", "import json; print(json")
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=project,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert json.loads(out.splitlines()[-1]) == []


def test_the_password_never_appears_in_a_refusal(cli: Cli, project: Path, tmp_path: Path) -> None:
    payload, envelope = handoff(cli, project, clean_env())
    dsn = f"postgresql://gate:s3cr3t-pw@/x?host={tmp_path}"
    r = incoming(cli, payload, clean_env(EIDOLONS_TRACE_DSN=dsn))
    assert r.code == 3 and "gate:***@" in r.out
    assert "s3cr3t-pw" not in r.out + r.err
    r = cli("verify-envelope", envelope, "--block", "--json", env=clean_env(EIDOLONS_TRACE_DSN=dsn))
    assert r.code == 3 and "s3cr3t-pw" not in r.out + r.err
    r = cli("trace", "export", "--to", "postgres", "--dsn", dsn + "&password=other-pw")
    assert r.code == 3 and "s3cr3t-pw" not in r.err and "other-pw" not in r.err


def test_a_hand_off_named_by_the_shared_trace_is_refused_without_its_envelope(
    cli: Cli, project: Path, orch: dict[str, str], gate: dict[str, str]
) -> None:
    """No silent skip (ADR 0007) across hosts: the emit event in PostgreSQL names it."""
    payload = project / "out" / "report.md"
    payload.parent.mkdir(parents=True)
    payload.write_text("# Report\n\n## Decision target\nx\n", encoding="utf-8")
    r = cli(*emit_cmd(payload, "--json", sender="atlas@1.4.2", to="vigil@1.9.0"), env=gate)
    assert r.code == 0, r.err
    Path(r.json()["envelope_path"]).unlink()
    r = cli("verify-incoming", payload, "--as", "vigil", env=gate)
    assert r.code == 3 and "REFUSE: UNVERIFIED" in r.err + r.out
    assert "the trace names it (emit of message" in r.err + r.out
    assert cli("verify-incoming", payload, "--as", "vigil", env=clean_env()).code == 0  # JSONL


def test_migrating_an_older_store_keeps_every_row_findable(
    pg: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store at schema 1 (no payload index) gets the column from its rows' bytes."""
    import psycopg

    from eidolons.ecl.events import next_link
    from eidolons.trace import pg_admin, pg_schema, postgres
    from eidolons.trace.log import encode_event

    dsn = pg.dsn(db=pg.new_database(initialised=False))
    monkeypatch.setattr(pg_schema, "MIGRATIONS", pg_schema.MIGRATIONS[:1])
    pg_admin.init_schema(dsn)
    with psycopg.connect(dsn) as conn:  # what a version-1 eidolons wrote
        last, seq = None, 0
        for kind in ("emit", "receive", "verify_pass"):
            seq, prev = next_link(last, seq)
            event = {"event": kind, "message_id": "m", "payload_path": "out/old.md", "n": seq}
            last = encode_event({**event, "seq": seq, "prev": prev})[:-1]
            conn.execute(
                "INSERT INTO eidolons.trace_events (thread, seq, prev, line) "
                "VALUES (%s, %s, %s, %s)",
                ("old", seq, prev, last),
            )
    monkeypatch.undo()
    done = pg_admin.init_schema(dsn, grant_orchestrator=[ORCH_LOGIN])  # the hosts to keep
    assert (done.version, done.applied) == (4, [2, 3, 4])
    with postgres.PostgresStore(dsn) as store:
        found = store.find_payload(["out/old.md"])
        assert found is not None and found["n"] == 1
        store.append("old", {"event": "emit", "payload_path": "out/new.md"})  # chain goes on
        assert store.find_payload(["out/new.md"]) is not None
    with psycopg.connect(dsn, autocommit=True) as conn:  # the append-only trigger is back
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DELETE FROM eidolons.trace_events")
        keys = conn.execute(
            "SELECT payload_key FROM eidolons.trace_events WHERE thread = 'old' ORDER BY seq"
        ).fetchall()
    assert [k[0] and bytes(k[0]) for k in keys] == [
        b"out/old.md",
        None,
        b"out/old.md",
        b"out/new.md",
    ]


def test_trace_verify_walks_the_chain_in_postgres(
    cli: Cli, project: Path, orch: dict[str, str], gate: dict[str, str], pg: PgServer, db: str
) -> None:
    """The chain the gates wrote across hosts verifies; a row the owner rewrote (the one
    writer the triggers cannot stop) is found."""
    import psycopg

    payload, envelope = handoff(cli, project, gate)
    assert cli("verify-envelope", envelope, "--block", env=orch).code == 0
    thread = incoming(cli, payload, gate).json()["thread_id"]
    r = cli("trace", "verify", thread, "--block", "--json", env=gate)
    assert r.code == 0, r.out + r.err
    (chain,) = r.json()["chains"]
    assert chain["state"] == "intact" and chain["lines"] == 4
    with psycopg.connect(pg.dsn(db=db), autocommit=True) as conn:
        conn.execute("ALTER TABLE eidolons.trace_events DISABLE TRIGGER trace_events_no_change")
        try:
            conn.execute(
                "UPDATE eidolons.trace_events SET line = replace(convert_from(line, 'UTF8'), "
                '\'"event":"emit"\', \'"event":"emit","x":1\')::bytea '
                "WHERE thread = %s AND seq = 1",
                (thread,),
            )
        finally:
            conn.execute("ALTER TABLE eidolons.trace_events ENABLE TRIGGER trace_events_no_change")
    r = cli("trace", "verify", thread, "--block", env=gate)
    assert r.code == 3 and "chain BROKEN at line 2" in r.out


def test_two_hosts_two_checkouts_one_trace(
    tmp_path: Path, orch: dict[str, str], gate: dict[str, str]
) -> None:
    """Host A (sender and orchestrator) and host B (receiver) have their own checkout of
    the project; only the hand-off's files travel. Real processes, as on two machines."""
    import shutil

    from tests.conftest import run_cli

    host_a, host_b = tmp_path / "host-a", tmp_path / "host-b"
    for host in (host_a, host_b):
        (host / ".eidolons").mkdir(parents=True)
    payload = host_a / "handoff" / "scout-report.md"
    payload.parent.mkdir()
    payload.write_text("# Report\n\n## Decision target\nx\n", encoding="utf-8")
    emit = emit_cmd(payload, "--json", sender="atlas@1.4.2", to="vigil@1.9.0")
    r = run_cli(*emit, cwd=host_a, env=gate, process=True)
    assert r.code == 0, r.err
    envelope = Path(r.json()["envelope_path"])
    r = run_cli("verify-envelope", envelope, "--block", cwd=host_a, env=orch, process=True)
    assert r.code == 0, r.err
    shutil.copytree(host_a / "handoff", host_b / "handoff")  # the bytes travel, nothing else
    arrived = host_b / "handoff" / "scout-report.md"
    alone = run_cli("verify-incoming", arrived, "--as", "vigil", cwd=host_b, env=clean_env())
    assert alone.code == 3 and "REFUSE: UNVERIFIED" in alone.err + alone.out  # JSONL: no record
    local = {p: p.read_bytes() for p in trace_files(host_b)}  # that refusal, recorded locally
    r = run_cli("verify-incoming", arrived, "--as", "vigil", cwd=host_b, env=gate, process=True)
    assert r.code == 0, r.err + r.out
    assert {p: p.read_bytes() for p in trace_files(host_b)} == local  # nothing written here
    arrived.write_text("# Report\n\n## Decision target\nrewritten in transit\n", encoding="utf-8")
    r = run_cli("verify-incoming", arrived, "--as", "vigil", cwd=host_b, env=gate, process=True)
    assert r.code == 3 and "REFUSE: INTEGRITY_MISMATCH" in r.err + r.out
    thread = json.loads(envelope.read_text())["thread_id"]
    lines = run_cli("trace", "show", thread, cwd=host_b, env=gate).out.splitlines()
    hosts = [(line[28:39].strip(), line.rsplit(" ", 1)[-1]) for line in lines]  # the views say
    assert hosts == [  # which host wrote each event
        ("emit", f"host={GATE_LOGIN}"),
        ("verify_pass", f"host={ORCH_LOGIN}"),
        ("verify_pass", f"host={GATE_LOGIN}"),
        ("receive", f"host={GATE_LOGIN}"),
        ("verify_fail", f"host={GATE_LOGIN}"),
    ], lines


def test_signed_receipts_on_postgres_and_no_fallback_to_the_sidecar(
    project: Path, tmp_path: Path, orch: dict[str, str], gate: dict[str, str]
) -> None:
    """With a trust store the receipt in the shared trace is the evidence; an unreachable
    store still refuses, even with a genuine receipt file beside the envelope (it could be
    an older verdict than the one the store holds)."""
    from tests.conftest import run_cli

    config = {"XDG_CONFIG_HOME": str(tmp_path / "orchestrator-config")}

    def cli(*args: str | Path, env: dict[str, str]) -> Run:
        return run_cli(*args, "--root", project, cwd=project, env=env)

    assert cli("keys", "init", env={**orch, **config}).code == 0
    payload = project / "handoff" / "scout-report.md"
    payload.parent.mkdir()
    payload.write_text("# Report\n\n## Decision target\nx\n", encoding="utf-8")
    r = cli(*emit_cmd(payload, "--json", performative="PROPOSE"), env=gate)
    assert r.code == 0, r.err
    envelope = Path(r.json()["envelope_path"])
    assert cli("verify-envelope", envelope, "--block", env={**orch, **config}).code == 0
    r = cli("verify-incoming", payload, "--as", "vigil", "--json", env=gate)
    assert r.code == 0, r.out + r.err
    assert r.json()["evidence"].startswith("signed-receipt")
    down = clean_env(EIDOLONS_TRACE_DSN=f"postgresql://gate@/x?host={tmp_path}")
    r = cli("verify-incoming", payload, "--as", "vigil", "--json", env=down)
    assert r.code == 3, r.out
    assert r.json()["failure_code"] == "UNVERIFIED"
    assert "the trace cannot be read" in r.json()["failures"][0]["message"]
