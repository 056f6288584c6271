"""The trace stores: the receiver's record lookup on a 1,000,000-row store against a
10-row store, and appends per second from 4 concurrent writers, JSONL and PostgreSQL.

Usage::

    python bench/bench_tracestore.py [--rows N] [--lookups L] [--appends A]

Method
------
For each store, two stores are built: a *small* one whose thread holds 10 events and a
*large* one whose thread holds N (default 1,000,000) events of other messages; in both the
measured message's orchestrator ``verify_pass`` is appended last through the store's own
``append`` (so it is chained and indexed like any gate's record). JSONL: one trace file
per store. PostgreSQL: a real server started for the run (the Debian package, a Unix
socket, PostgreSQL's default durability: ``fsync`` and ``synchronous_commit`` on), one
database per store, the filler loaded with COPY with the triggers off (a load shortcut:
the rows still form a valid chain). Then, interleaved, L lookups (default 300) of
``latest_verdict`` on each store over an open connection; reported: medians and the
ratio large/small (target <= 1.5: the lookup must not grow with the store). For
information, the lookup of a message verified *first* in the large store (JSONL: through
the verdict index, ADR 0022, built once by the store's first append over the lines
written directly, with the scan bound widened for that one-off; PostgreSQL reads the same
index entry), and what a one-shot gate process pays on PostgreSQL (connect + schema check
+ lookup). ``bench/bench_lookup.py`` measures the JSONL lookup's cases in detail.

Appends: 4 processes (forked) append A events each (default 500) to one thread of a fresh
store at once; appends/s = 4A / wall time from a shared start to the last writer done.
Then the thread is checked: 4A lines, none lost. JSONL's default does not fsync
(``EIDOLONS_TRACE_FSYNC=1`` does: reported for information).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _benchlib import filler_event  # noqa: E402
from eidolons.ecl.events import next_link  # noqa: E402
from eidolons.trace.log import JsonlStore, encode_event  # noqa: E402
from eidolons.trace.store import TraceStore  # noqa: E402

THREAD = "thread-bench"
MID = "message-under-test"
FIRST = "filler-00000000"
FILLER = filler_event(THREAD, "2026-12-01T00:00:00.000Z")


def filler_events(n: int) -> Any:
    event = dict(FILLER)
    for i in range(n):
        event["message_id"] = f"filler-{i:08d}"
        yield event


def build_jsonl(root: Path, rows: int) -> JsonlStore:
    store = JsonlStore(root)
    path = store.path(THREAD)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        batch = []
        for event in filler_events(rows - 1):
            batch.append(encode_event(event))
            if len(batch) >= 50_000:
                fh.write(b"".join(batch))
                batch.clear()
        fh.write(b"".join(batch))
    # the store's first append indexes the lines written directly (ADR 0022), once; the
    # scan bound is widened for it: a 1,000,000-row file is past the default 256 MiB (a
    # trace grown by gates is indexed append by append, never in one go)
    saved = os.environ.get("EIDOLONS_MAX_TRACE_SCAN_BYTES")
    os.environ["EIDOLONS_MAX_TRACE_SCAN_BYTES"] = str(4 << 30)
    try:
        store.append(THREAD, dict(FILLER, message_id=MID))
    finally:
        if saved is None:
            del os.environ["EIDOLONS_MAX_TRACE_SCAN_BYTES"]
        else:
            os.environ["EIDOLONS_MAX_TRACE_SCAN_BYTES"] = saved
    return store


def build_postgres(pg: Any, db: str, rows: int, dsn: str) -> TraceStore:
    import psycopg

    from eidolons.trace.postgres import PostgresStore, verdict_key

    with psycopg.connect(pg.dsn(db=db)) as conn:
        conn.execute("SET session_replication_role = replica")  # load shortcut: no triggers
        last, seq = None, 0
        with conn.cursor().copy(
            "COPY eidolons.trace_events (thread, seq, prev, line, verdict_for) FROM STDIN"
        ) as copy:
            for event in filler_events(rows - 1):
                seq, prev = next_link(last, seq)
                line = encode_event(dict(event, seq=seq, prev=prev))[:-1]
                copy.write_row((THREAD, seq, prev, line, verdict_key(event)))
                last = line
        conn.commit()
        conn.execute("ANALYZE eidolons.trace_events")
        conn.commit()
    store = PostgresStore(dsn)
    store.append(THREAD, dict(FILLER, message_id=MID))
    return store


def time_lookups(stores: dict[str, TraceStore], mids: dict[str, str], n: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {k: [] for k in stores}
    for k, s in stores.items():  # warm-up (connection, caches)
        assert s.latest_verdict(THREAD, mids[k]) is not None
    for _ in range(n):
        for k, s in stores.items():
            t0 = time.perf_counter()
            record = s.latest_verdict(THREAD, mids[k])
            samples[k].append(time.perf_counter() - t0)
            assert record is not None and record["message_id"] == mids[k]
    return {k: statistics.median(v) for k, v in samples.items()}


def _writer(make: Any, k: int, count: int, start: Any, spread: bool) -> None:
    store = make()
    thread = f"{THREAD}-{k}" if spread else THREAD
    start.wait()
    for i in range(count):
        store.append(thread, {"event": "emit", "gate": "sender", "w": k, "i": i})
    store.close()


def appends_per_s(make: Any, writers: int, count: int, spread: bool = False) -> float:
    """``spread``: each writer on its own thread (else all on one)."""
    ctx = mp.get_context("fork")
    start = ctx.Barrier(writers + 1)
    procs = [
        ctx.Process(target=_writer, args=(make, k, count, start, spread)) for k in range(writers)
    ]
    for p in procs:
        p.start()
    start.wait()
    t0 = time.perf_counter()
    for p in procs:
        p.join()
        assert p.exitcode == 0
    elapsed = time.perf_counter() - t0
    store = make()
    threads = [f"{THREAD}-{k}" for k in range(writers)] if spread else [THREAD]
    lines = [ln.event for t in threads for ln in store.iter_thread(t)]
    store.close()
    assert len(lines) == writers * count and all(e is not None for e in lines), "lost lines"
    return writers * count / elapsed


def us(seconds: float) -> str:
    return f"{seconds * 1e6:8.0f} us"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--lookups", type=int, default=300)
    parser.add_argument("--appends", type=int, default=500)
    args = parser.parse_args()
    from tests.tracestore.pgserver import ORCH_LOGIN, PgServer, find_bindir

    bindir = find_bindir()
    if bindir is None:
        print("PostgreSQL server binaries not found (apt-get install postgresql)")
        return 2
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="eidolons-bench-tracestore-") as tmp:
        base = Path(tmp)
        pg = PgServer(bindir, durable=True)
        pg.start()
        try:
            pg.prepare_template()
            t0 = time.perf_counter()
            small_db, large_db = pg.new_database(), pg.new_database()
            stores: dict[str, TraceStore] = {
                "jsonl small": build_jsonl(base / "small", 10),
                "jsonl large": build_jsonl(base / "large", args.rows),
                "pg small": build_postgres(pg, small_db, 10, pg.dsn(ORCH_LOGIN, small_db)),
                "pg large": build_postgres(pg, large_db, args.rows, pg.dsn(ORCH_LOGIN, large_db)),
            }
            size = (base / "large" / ".eidolons" / ".trace" / f"{THREAD}.jsonl").stat().st_size
            print(
                f"built stores in {time.perf_counter() - t0:.1f} s: {args.rows:,} rows "
                f"(JSONL {size / 2**20:.0f} MiB) against 10"
            )
            med = time_lookups(stores, dict.fromkeys(stores, MID), args.lookups)
            from eidolons.trace.store import TraceReadError

            try:  # further back than the scan bound (ADR 0007), JSONL refuses
                first = time_lookups({"jsonl": stores["jsonl large"]}, {"jsonl": FIRST}, 3)
            except TraceReadError:
                first = {"jsonl": float("nan")}
            first |= time_lookups({"pg": stores["pg large"]}, {"pg": FIRST}, args.lookups)
            from eidolons.trace.postgres import PostgresStore

            cold = []
            for _ in range(20):
                t1 = time.perf_counter()
                with PostgresStore(pg.dsn(ORCH_LOGIN, large_db)) as one_shot:
                    one_shot.latest_verdict(THREAD, MID)
                cold.append(time.perf_counter() - t1)
            for s in stores.values():
                s.close()

            def jsonl_store(root: Path) -> Any:
                root.mkdir()  # a project root exists; the store makes .eidolons/.trace/
                return lambda: JsonlStore(root)

            rate: dict[str, float] = {}
            rate["jsonl"] = appends_per_s(jsonl_store(base / "w1"), 4, args.appends)
            os.environ["EIDOLONS_TRACE_FSYNC"] = "1"
            rate["jsonl fsync"] = appends_per_s(jsonl_store(base / "w2"), 4, args.appends)
            del os.environ["EIDOLONS_TRACE_FSYNC"]
            wdb = pg.new_database()
            rate["pg"] = appends_per_s(
                lambda: PostgresStore(pg.dsn(ORCH_LOGIN, wdb)), 4, args.appends
            )
            odb = pg.new_database()
            rate["pg 1 writer"] = appends_per_s(
                lambda: PostgresStore(pg.dsn(ORCH_LOGIN, odb)), 1, args.appends
            )
            sdb = pg.new_database()
            rate["pg 4 threads"] = appends_per_s(
                lambda: PostgresStore(pg.dsn(ORCH_LOGIN, sdb)), 4, args.appends, spread=True
            )
            adb = pg.new_database()
            async_dsn = pg.dsn(ORCH_LOGIN, adb) + "&options=-c%20synchronous_commit%3Doff"
            rate["pg async"] = appends_per_s(lambda: PostgresStore(async_dsn), 4, args.appends)
        finally:
            pg.stop()
    results["lookup"] = med
    print(f"\nreceiver record lookup (median of {args.lookups}, interleaved, open store)")
    for kind in ("jsonl", "pg"):
        small, large = med[f"{kind} small"], med[f"{kind} large"]
        ratio = large / small
        verdict = "met" if ratio <= 1.5 else "NOT met"
        print(
            f"  {kind:<6} 10 rows {us(small)}   {args.rows:,} rows {us(large)}   "
            f"ratio {ratio:.2f}x   target <= 1.5x: {verdict}"
        )
    far = (
        "refused: past the scan bound (EIDOLONS_MAX_TRACE_SCAN_BYTES)"
        if first["jsonl"] != first["jsonl"]  # NaN
        else f"{us(first['jsonl'])} (the verdict index, ADR 0022; median of 3)"
    )
    print(f"info: message verified first of {args.rows:,}: jsonl {far}")
    print(f"info: the same on pg: {us(first['pg'])} (one index entry)")
    print(
        f"info: one-shot gate on pg (connect + schema check + lookup): "
        f"{statistics.median(cold) * 1e3:.1f} ms median of 20"
    )
    print(f"\nappends/s, 4 concurrent writers on one thread, {args.appends} each")
    print(f"  jsonl (flock, no fsync)      {rate['jsonl']:9,.0f}")
    print(f"  jsonl (EIDOLONS_TRACE_FSYNC) {rate['jsonl fsync']:9,.0f}")
    print(
        f"  pg (one transaction each)    {rate['pg']:9,.0f}   "
        f"({rate['pg'] / rate['jsonl']:.2f}x jsonl)"
    )
    print(f"info: pg, 1 writer               {rate['pg 1 writer']:9,.0f}")
    print(f"info: pg, 4 writers on 4 threads {rate['pg 4 threads']:9,.0f}")
    print(f"info: pg, synchronous_commit=off {rate['pg async']:9,.0f}")
    print("\n" + json.dumps({"lookup_s": med, "first_s": first, "appends_per_s": rate}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
