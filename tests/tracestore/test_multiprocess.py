"""Several processes standing in for agents on different hosts write and read one thread
of the PostgreSQL store at once: nothing is lost, the chain is intact, and every receiver
sees the orchestrator's verdict as soon as it is committed (one lookup, no retry)."""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import uuid
from typing import Any

import pytest

from eidolons.ecl.events import GENESIS
from tests.tracestore.pgserver import GATE_LOGIN, ORCH_LOGIN, PgServer

THREAD = f"thread-many-hosts-{uuid.uuid4()}"  # fixed before the processes fork
SENDERS, EVENTS_PER_SENDER = 3, 30
RECEIVERS, MESSAGES = 2, 15
TIMEOUT_S = 30


def sender(dsn: str, k: int) -> None:
    from eidolons.trace.postgres import PostgresStore

    with PostgresStore(dsn) as store:
        for i in range(EVENTS_PER_SENDER):
            store.append(THREAD, {"event": "emit", "gate": "sender", "host": f"s{k}", "i": i})


def orchestrator(dsn: str, queues: list[Any]) -> None:
    from eidolons.trace.postgres import PostgresStore

    with PostgresStore(dsn) as store:
        for i in range(MESSAGES):
            event = {"event": "verify_pass", "gate": "orchestrator", "message_id": f"m{i}", "n": i}
            store.append(THREAD, event)  # committed when append returns
            for q in queues:
                q.put(i)


def receiver(dsn: str, k: int, inbox: Any, results: Any) -> None:
    from eidolons.trace.postgres import PostgresStore

    seen = []
    with PostgresStore(dsn) as store:
        for _ in range(MESSAGES):
            i = inbox.get(timeout=TIMEOUT_S)
            record = store.latest_verdict(THREAD, f"m{i}")  # once: no polling
            seen.append(None if record is None else record["n"])
            store.append(
                THREAD, {"event": "receive", "gate": "receiver", "message_id": f"m{i}", "r": k}
            )
    results.put((k, seen))


def test_many_hosts_one_thread(pg: PgServer, shared_db: str) -> None:
    psycopg = pytest.importorskip("psycopg")
    db = shared_db
    ctx = mp.get_context("fork")  # hosts share no state: each opens its own connection
    inboxes = [ctx.Queue() for _ in range(RECEIVERS)]
    results = ctx.Queue()
    procs = [ctx.Process(target=sender, args=(pg.dsn(GATE_LOGIN, db), k)) for k in range(SENDERS)]
    procs += [
        ctx.Process(target=receiver, args=(pg.dsn(GATE_LOGIN, db), k, inboxes[k], results))
        for k in range(RECEIVERS)
    ]
    procs.append(ctx.Process(target=orchestrator, args=(pg.dsn(ORCH_LOGIN, db), inboxes)))
    for p in procs:
        p.start()
    seen = dict(results.get(timeout=TIMEOUT_S) for _ in range(RECEIVERS))
    for p in procs:
        p.join(timeout=TIMEOUT_S)
        assert p.exitcode == 0
    # every receiver saw every verdict on its first lookup after the commit
    assert seen == {k: list(range(MESSAGES)) for k in range(RECEIVERS)}

    with psycopg.connect(pg.dsn(db=db)) as conn:
        rows = conn.execute(
            "SELECT seq, prev, line FROM eidolons.trace_events WHERE thread = %s ORDER BY seq",
            (THREAD,),
        ).fetchall()
    events = [json.loads(bytes(line)) for _, _, line in rows]
    # nothing lost, nothing duplicated
    assert len(rows) == SENDERS * EVENTS_PER_SENDER + MESSAGES + RECEIVERS * MESSAGES
    emits = sorted((e["host"], e["i"]) for e in events if e["event"] == "emit")
    assert emits == sorted((f"s{k}", i) for k in range(SENDERS) for i in range(EVENTS_PER_SENDER))
    # the chain: contiguous seq, each prev the SHA-256 of the previous line's exact bytes,
    # and each line carries its own link
    prev = GENESIS
    for n, (seq, row_prev, line) in enumerate(rows, 1):
        assert seq == n and row_prev == prev
        event = json.loads(bytes(line))
        assert (event["seq"], event["prev"]) == (seq, prev)
        prev = hashlib.sha256(bytes(line)).hexdigest()
    # per writer, its own events stay in the order it wrote them
    for k in range(SENDERS):
        mine = [e["i"] for e in events if e.get("host") == f"s{k}"]
        assert mine == list(range(EVENTS_PER_SENDER))
