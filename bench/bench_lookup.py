"""The record lookup (``JsonlStore.latest_verdict``, what every receiver gate and the
orchestrator-read hook call) on a 1,000,000-event trace against a 10-event one, and after
the 1,000th reception of a hand-off against the first (ADR 0022).

Usage::

    python bench/bench_lookup.py [--events N] [--rounds R] [--receptions K] [--no-scan]

Method
------
Two threads are built in a throw-away project and host config directory, one of 10
events and one of N (default 1,000,000). Each hand-off of a thread is four events, as a
pipeline writes them: the sender's ``emit``, the orchestrator's ``verify_pass``, the
receiver's ``verify_pass`` and ``receive``. The thread's first hand-off is its *root*
(``message_id`` = ``thread_id``, what ``emit`` makes by default), so every line of the
thread holds the root's id. All lines but the last are written directly, chained with the
library's own functions (``ecl.events.next_link``/``chained``, ``trace.encode_event``:
the bytes a gate writes); the last hand-off is appended through ``JsonlStore.append``,
as a gate does, which also builds the verdict index of the lines before it (timed, for
information: the one-off cost of indexing a trace that other tools wrote).

Looked up, interleaved, R rounds (default 300) per case, in-process:

- *recent*: the last hand-off; *old*: the first non-root hand-off; *absent*: a message
  never verified (UNVERIFIED); *root*: the thread's root hand-off;
- ratios large/small (target <= 1.5 each).

Receptions: a fresh thread with one verified hand-off, then K (default 1,000) receptions
appended through the store (the receiver's ``verify_pass`` and ``receive``, as the gate
appends them). The lookup and the append of one reception's two events are timed after
the 1st and after the K-th; ratio K-th/1st (target: 1.0 within noise).

Unless ``--no-scan``: the same lookups without the index (the full backward scan every
lookup did before ADR 0022, with the scan bound widened so that it reads the whole
file), a few rounds each, for the before/after comparison; and the 10-event lookup
without the index (the old baseline).
Reported: medians and minimums in microseconds, with the load average.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from eidolons.ecl.events import chained, next_link  # noqa: E402
from eidolons.trace import indexes  # noqa: E402
from eidolons.trace.log import JsonlStore, encode_event  # noqa: E402

TS = "2026-12-01T09:00:00.000Z"


def handoff(thread: str, mid: str) -> list[dict[str, Any]]:
    """The four events of one hand-off, as a pipeline writes them."""
    base = {
        "ts": TS,
        "message_id": mid,
        "thread_id": thread,
        "from": "atlas@1.4.2",
        "to": "vigil@1.9.0",
        "performative": "INFORM",
        "integrity_method": "sha256",
        "payload_path": f"out/{mid}.md",
    }
    digest = {"integrity_value": "0" * 64, "payload_sha256": "0" * 64}
    return [
        {**base, "event": "emit", "gate": "sender", **digest},
        {**base, "event": "verify_pass", "gate": "orchestrator", "verdict": "pass", **digest},
        {**base, "event": "verify_pass", "gate": "receiver", "receiver": "vigil"},
        {**base, "event": "receive", "gate": "receiver", "receiver": "vigil"},
    ]


def mids(thread: str, n: int) -> Iterator[str]:
    yield thread  # the root hand-off
    for i in range(1, n):
        yield f"{thread}-m{i:08d}"


def build(root: Path, thread: str, events: int) -> tuple[JsonlStore, dict[str, str], float]:
    """The thread of ``events`` events; returns the store, the ids looked up, and the
    seconds the gate's append took to index the directly written lines."""
    store = JsonlStore(root)
    path = store.path(thread)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = max(2, events // 4)
    ids = list(mids(thread, count))
    last, seq, batch = None, 0, []
    with path.open("wb") as fh:
        for mid in ids[:-1]:
            for event in handoff(thread, mid):
                seq, prev = next_link(last, seq)
                line = encode_event(chained(event, seq, prev))
                last = line[:-1]
                batch.append(line)
            if len(batch) >= 40_000:
                fh.write(b"".join(batch))
                batch.clear()
        fh.write(b"".join(batch))
    t0 = time.perf_counter()
    with wide_bound():  # the lines written directly are indexed once, whatever their size
        for event in handoff(thread, ids[-1]):
            store.append(thread, event)
    took = time.perf_counter() - t0
    cases = {"recent": ids[-1], "old": ids[1], "absent": f"{thread}-never", "root": thread}
    return store, cases, took


@contextlib.contextmanager
def wide_bound() -> Iterator[None]:
    """A scan bound of 4 GiB (``EIDOLONS_MAX_TRACE_SCAN_BYTES``): a 1,000,000-event trace
    is past the default 256 MiB. Used for the one-off indexing of the directly written
    lines (a trace grown by gates is indexed append by append, never in one go) and for
    timing the full scan; never for the indexed lookups."""
    saved = os.environ.get("EIDOLONS_MAX_TRACE_SCAN_BYTES")
    os.environ["EIDOLONS_MAX_TRACE_SCAN_BYTES"] = str(4 << 30)
    try:
        yield
    finally:
        if saved is None:
            del os.environ["EIDOLONS_MAX_TRACE_SCAN_BYTES"]
        else:
            os.environ["EIDOLONS_MAX_TRACE_SCAN_BYTES"] = saved


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def us(samples: list[float]) -> str:
    return f"median {statistics.median(samples) * 1e6:9.1f} us  min {min(samples) * 1e6:9.1f} us"


def lookup_rounds(
    stores: dict[str, tuple[JsonlStore, str, dict[str, str]]], rounds: int
) -> dict[tuple[str, str], list[float]]:
    samples: dict[tuple[str, str], list[float]] = {}
    keys = [(size, case) for size in stores for case in ("recent", "old", "absent", "root")]
    for size, case in keys:  # warm-up, and the answer each case must give
        store, thread, cases = stores[size]
        record = store.latest_verdict(thread, cases[case])
        assert (record is None) == (case == "absent"), (size, case, record)
        samples[(size, case)] = []
    for r in range(rounds):
        order = keys[r % len(keys) :] + keys[: r % len(keys)]
        for size, case in order:
            store, thread, cases = stores[size]
            samples[(size, case)].append(
                timed(lambda: store.latest_verdict(thread, cases[case]))  # noqa: B023
            )
    return samples


def receptions(root: Path, k: int, rounds: int) -> dict[str, list[float]]:
    """Lookup and append timings at reception 1 and reception ``k`` of one hand-off."""
    out: dict[str, list[float]] = {}
    for label, count in (("first", 1), ("kth", k)):
        thread = f"reception-{label}"
        store = JsonlStore(root)
        events = handoff(thread, "m-received")
        store.append(thread, events[0])
        store.append(thread, events[1])
        for _ in range(count - 1):
            store.append(thread, events[2])
            store.append(thread, events[3])
        out[f"lookup-{label}"] = []
        out[f"append-{label}"] = []
        for _ in range(rounds):
            out[f"lookup-{label}"].append(
                timed(lambda: store.latest_verdict(thread, "m-received"))  # noqa: B023
            )
        # one more reception's two appends, timed (the trace grows by `rounds` receptions:
        # negligible against `k`)
        for _ in range(rounds):
            out[f"append-{label}"].append(
                timed(lambda: (store.append(thread, events[2]), store.append(thread, events[3])))  # noqa: B023
            )
    return out


def without_index(fn: Callable[[], object]) -> float:
    """One lookup with the index out of the way (the scan every lookup did before)."""
    saved = indexes.lookup
    indexes.lookup = lambda *a, **k: None  # type: ignore[assignment]
    try:
        with wide_bound():
            return timed(fn)
    finally:
        indexes.lookup = saved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--receptions", type=int, default=1000)
    ap.add_argument("--no-scan", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-lookup-") as tmp:
        os.environ["XDG_CONFIG_HOME"] = str(Path(tmp) / "config")  # the index's host dir
        root = Path(tmp) / "project"
        print(f"load average at start: {os.getloadavg()[0]:.2f}")
        t0 = time.perf_counter()
        small, small_cases, _ = build(root, "thread-small", 10)
        large, large_cases, indexing = build(root, "thread-large", args.events)
        size = large.path("thread-large").stat().st_size
        print(
            f"built: 10 and {args.events:,} events ({size / 2**20:.0f} MiB) in "
            f"{time.perf_counter() - t0:.1f} s; indexing the directly written lines on the "
            f"first gate append: {indexing:.1f} s (once)"
        )
        stores = {
            "small": (small, "thread-small", small_cases),
            "large": (large, "thread-large", large_cases),
        }
        samples = lookup_rounds(stores, args.rounds)
        print(f"\nrecord lookup, {args.rounds} interleaved rounds (in-process)")
        worst = 0.0
        for case in ("recent", "old", "absent", "root"):
            s, g = samples[("small", case)], samples[("large", case)]
            ratio = statistics.median(g) / statistics.median(s)
            worst = max(worst, ratio)
            print(f"  {case:7s} 10 events: {us(s)}")
            print(f"  {case:7s} {args.events:,} events: {us(g)}  ratio {ratio:.2f}x")
        print(f"  worst ratio large/small: {worst:.2f}x (target <= 1.5x)")

        rec = receptions(root, args.receptions, args.rounds)
        print(f"\nreceptions of one hand-off: #1 against #{args.receptions:,}")
        for what in ("lookup", "append"):
            first, kth = rec[f"{what}-first"], rec[f"{what}-kth"]
            ratio = statistics.median(kth) / statistics.median(first)
            print(f"  {what} after #1: {us(first)}")
            print(f"  {what} after #{args.receptions:,}: {us(kth)}  ratio {ratio:.2f}x")

        if not args.no_scan:
            print(
                "\nbefore the index: the full backward scan (scan bound widened to 4 GiB, "
                "else old/absent/root refuse past 256 MiB)"
            )
            store, thread, cases = stores["small"]
            old_base: dict[str, list[float]] = {c: [] for c in cases}
            for _ in range(args.rounds):
                for case in cases:
                    old_base[case].append(
                        without_index(lambda: store.latest_verdict(thread, cases[case]))  # noqa: B023
                    )
            store, thread, cases = stores["large"]
            for case in ("recent", "old", "absent", "root"):
                got = [
                    without_index(lambda: store.latest_verdict(thread, cases[case]))  # noqa: B023
                    for _ in range(3)
                ]
                base = statistics.median(old_base[case])
                now = statistics.median(samples[("large", case)])
                print(f"  {case:7s} 10 events, scan ({args.rounds} rounds): {us(old_base[case])}")
                print(
                    f"  {case:7s} {args.events:,} events, scan (3 rounds): {us(got)}  "
                    f"ratio {statistics.median(got) / base:.1f}x"
                )
                print(
                    f"  {case:7s} {args.events:,} events, indexed, against the 10-event "
                    f"scan: ratio {now / base:.2f}x"
                )
        print(f"\nload average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
