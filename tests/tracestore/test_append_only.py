"""The PostgreSQL trace is append-only and its chain is enforced by the server: the attacks
an agent holding a gate host's credentials could try with plain SQL."""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from eidolons.ecl.events import GENESIS
from eidolons.trace.postgres import PostgresStore
from tests.tracestore.pgserver import GATE_LOGIN, ORCH_LOGIN, PgServer

if TYPE_CHECKING:  # the runtime name psycopg is the module importorskip gave, below
    from psycopg import Connection
    from psycopg.rows import TupleRow

# Outside CI a missing psycopg skips; under CI=true it must fail (a module-level skip would
# hide the whole file before the `pg` fixture's own CI check could run).
psycopg = (
    pytest.importorskip("psycopg") if os.environ.get("CI") != "true" else __import__("psycopg")
)
THREAD = f"thread-append-only-{uuid.uuid4()}"
MID = "m-append-only"


@pytest.fixture(scope="module")
def db(pg: PgServer, shared_db: str) -> str:
    name = shared_db
    with PostgresStore(pg.dsn(ORCH_LOGIN, name)) as store:
        for kind in ("verify_fail", "verify_pass"):
            store.append(THREAD, {"event": kind, "message_id": MID, "gate": "orchestrator", "n": 1})
    return name


@pytest.fixture(params=[GATE_LOGIN, ORCH_LOGIN, "postgres"])
def conn(request: pytest.FixtureRequest, pg: PgServer, db: str) -> Iterator[Connection[TupleRow]]:
    with psycopg.connect(pg.dsn(request.param, db), autocommit=True) as c:
        yield c


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE eidolons.trace_events SET line = 'x'::bytea",
        "UPDATE eidolons.trace_events SET verdict_for = NULL WHERE seq = 2",
        "DELETE FROM eidolons.trace_events WHERE seq = 2",
        "TRUNCATE eidolons.trace_events",
        "DELETE FROM eidolons.schema_version",
        "TRUNCATE eidolons.schema_version",
    ],
)
def test_rows_cannot_be_changed_or_removed(conn: Connection[TupleRow], sql: str) -> None:
    """Revoked for the gate roles, refused by triggers even for the owner/superuser."""
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(sql)
    rows = conn.execute(
        "SELECT count(*) FROM eidolons.trace_events WHERE thread = %s", (THREAD,)
    ).fetchone()
    assert rows == (2,)


def _last(conn: Connection[TupleRow]) -> tuple[int, bytes]:
    row = conn.execute(
        "SELECT seq, line FROM eidolons.trace_events WHERE thread = %s ORDER BY seq DESC LIMIT 1",
        (THREAD,),
    ).fetchone()
    assert row is not None
    return row[0], bytes(row[1])


def test_a_gate_role_cannot_insert_an_orchestrator_verdict(pg: PgServer, db: str) -> None:
    with psycopg.connect(pg.dsn(GATE_LOGIN, db), autocommit=True) as conn:
        seq, line = _last(conn)
        forged = json.dumps({"event": "verify_pass", "message_id": MID, "gate": "orchestrator"})
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(
                "INSERT INTO eidolons.trace_events (thread, seq, prev, line, verdict_for) "
                "VALUES (%s, %s, %s, %s, %s)",
                (THREAD, seq + 1, hashlib.sha256(line).hexdigest(), forged.encode(), MID.encode()),
            )


@pytest.mark.parametrize(
    "tamper",
    ["seq-gap", "seq-replay", "wrong-prev", "genesis-again"],
)
def test_inserts_that_break_the_chain_are_refused(pg: PgServer, db: str, tamper: str) -> None:
    with psycopg.connect(pg.dsn(ORCH_LOGIN, db), autocommit=True) as conn:
        seq, line = _last(conn)
        good_prev = hashlib.sha256(line).hexdigest()
        seq_, prev = {
            "seq-gap": (seq + 2, good_prev),
            "seq-replay": (seq, good_prev),
            "wrong-prev": (seq + 1, "f" * 64),
            "genesis-again": (1, GENESIS),
        }[tamper]
        with pytest.raises(psycopg.errors.IntegrityError):
            conn.execute(
                "INSERT INTO eidolons.trace_events (thread, seq, prev, line) "
                "VALUES (%s, %s, %s, %s)",
                (THREAD, seq_, prev, b'{"event":"note"}'),
            )
        assert _last(conn) == (seq, line)


def test_the_writer_is_recorded_by_the_server(pg: PgServer, db: str) -> None:
    with psycopg.connect(pg.dsn(GATE_LOGIN, db), autocommit=True) as conn:
        conn.execute(
            "INSERT INTO eidolons.trace_events (thread, seq, prev, line, written_by) "
            "VALUES (%s, %s, %s, %s, %s)",
            (THREAD + "-w", 1, GENESIS, b'{"event":"note"}', ORCH_LOGIN),
        )
        row = conn.execute(
            "SELECT written_by FROM eidolons.trace_events WHERE thread = %s", (THREAD + "-w",)
        ).fetchone()
    assert row == (GATE_LOGIN,)


def test_the_lookup_uses_the_index(pg: PgServer, db: str) -> None:
    from eidolons.trace.postgres import VERDICTS

    with psycopg.connect(pg.dsn(ORCH_LOGIN, db), autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")  # a tiny table: make the planner show intent
        plan = "\n".join(
            r[0] for r in conn.execute("EXPLAIN " + VERDICTS, (THREAD, MID.encode())).fetchall()
        )
    assert "trace_events_verdict" in plan, plan
    assert "Sort" not in plan, plan


def test_the_latest_verdict_wins_on_postgres_as_on_jsonl(pg: PgServer, db: str) -> None:
    with PostgresStore(pg.dsn(GATE_LOGIN, db)) as store:
        record = store.latest_verdict(THREAD, MID)
    assert record is not None and record["event"] == "verify_pass"


def test_a_stuck_store_times_out_instead_of_hanging(
    pg: PgServer, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gate whose hook would be killed by the host's timeout (and fail open) must fail
    by itself first: lock waits and statements are bounded."""
    from eidolons.errors import TraceWriteError

    monkeypatch.setenv("EIDOLONS_TRACE_TIMEOUT_S", "0.3")
    with psycopg.connect(pg.dsn(db=db)) as holder:  # another writer, stuck mid-append
        holder.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (THREAD,))
        with PostgresStore(pg.dsn(ORCH_LOGIN, db)) as store:
            with pytest.raises(TraceWriteError, match="timeout"):
                store.append(THREAD, {"event": "emit"})
        holder.rollback()


@pytest.mark.parametrize("value", ["0", "-1", "soon", "1e9"])
def test_a_bad_timeout_refuses(
    pg: PgServer, db: str, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    from eidolons.trace.store import TraceReadError

    monkeypatch.setenv("EIDOLONS_TRACE_TIMEOUT_S", value)
    with PostgresStore(pg.dsn(GATE_LOGIN, db)) as store:
        with pytest.raises(TraceReadError, match="EIDOLONS_TRACE_TIMEOUT_S"):
            store.latest_verdict(THREAD, MID)


@pytest.mark.parametrize("size", [0, 1024 * 1024 + 1])
def test_empty_or_overlong_lines_are_refused_at_the_door(pg: PgServer, db: str, size: int) -> None:
    from eidolons.errors import TraceWriteError

    with PostgresStore(pg.dsn(GATE_LOGIN, db)) as store:
        with pytest.raises(TraceWriteError, match="line_size"):
            store.append_lines(f"{THREAD}-size-{size}", [b"x" * size])
