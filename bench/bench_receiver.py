"""The receiver gate on a short thread and on a 1,000,000-event thread.

Usage::

    python bench/bench_receiver.py [--events N] [--rounds R]

Method
------
One throw-away project, two threads. Each gets one atlas -> vigil hand-off emitted and
passed by the orchestrator gate (the library calls a sender and an orchestrator make).
Before the orchestrator's pass, the *short* thread's trace is filled to 10 events and the
*long* one to N (default 1,000,000) events of other messages, so in both the message was
verified last. Then, interleaved R times (default 20, after one warm-up round):

(a) ``eidolons verify-incoming SHORT --as vigil --no-memory`` (subprocess),
(b) the same on the long thread,

and, in-process, the record lookup alone (the JSONL store's ``latest_verdict``)
on each trace. Reported: medians and the ratio (b)/(a), target <= 1.5: the gate reads the
trace backwards and stops at the first record for the message, so its cost must not grow
with the thread. For information, the lookup of a message that is *not* on record in the
long trace (the worst case: the whole file is scanned, pre-filtered on the id), and the
gate on an artefact with no envelope (skipped before anything is loaded) against
``python -c pass``, interleaved with the rows above.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import (
    child_env,
    console_script,
    emit_handoff,
    filler_event,
    fmt_ms,
    interleave,
    load_note,
    record_pass,
    run_timed,
)
from eidolons.trace import thread_trace_path
from eidolons.tracestore.jsonl import JsonlStore


def make_thread(root: Path, name: str, events: int) -> Path:
    payload = root / f"{name}.md"
    result = emit_handoff(
        root,
        payload.name,
        objective=f"Scout report on the {name} thread.",
        thread_id=f"thread-{name}",
    )
    trace = thread_trace_path(root, result.envelope["thread_id"])
    filler = filler_event(f"thread-{name}", "2026-11-30T00:00:00.000Z")
    have = 1  # the emit event
    with trace.open("ab") as fh:
        batch: list[bytes] = []
        for i in range(events - have - 1):
            filler["message_id"] = f"filler-{i:08d}"
            batch.append((json.dumps(filler, separators=(",", ":")) + "\n").encode())
            if len(batch) >= 50_000:
                fh.write(b"".join(batch))
                batch.clear()
        fh.write(b"".join(batch))
    record_pass(result.envelope_path, root)
    return payload


def find_record(trace: Path, message_id: str) -> dict[str, object] | None:
    return JsonlStore(trace.parent, file=trace).latest_verdict(None, message_id)


def time_lookup(trace: Path, message_id: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        find_record(trace, message_id)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="eidolons-bench-receiver-") as tmp:
        root = Path(tmp)
        (root / ".eidolons").mkdir()
        t0 = time.perf_counter()
        short = make_thread(root, "short", 10)
        long = make_thread(root, "long", args.events)
        trace_long = thread_trace_path(root, "thread-long")
        size = trace_long.stat().st_size
        print(
            f"built traces in {time.perf_counter() - t0:.1f} s; long trace {size / 2**20:.0f} MiB"
        )
        lines = sum(1 for _ in trace_long.open("rb"))
        print(
            f"events: short={sum(1 for _ in thread_trace_path(root, 'thread-short').open('rb'))}, "
            f"long={lines:,}"
        )
        script, where = console_script()
        env = child_env()
        jobs = {
            key: (
                lambda p=payload: run_timed(
                    [*script, "verify-incoming", str(p), "--as", "vigil", "--no-memory"],
                    cwd=root,
                    env=env,
                )
            )
            for key, payload in (("short", short), ("long", long))
        }
        plain = root / "notes.md"  # an artefact with no envelope: the gate's commonest case
        plain.write_text("not a hand-off\n")
        jobs["skip"] = lambda: run_timed(
            [*script, "verify-incoming", str(plain), "--as", "vigil"], cwd=root, env=env
        )
        jobs["bare"] = lambda: run_timed([sys.executable, "-c", "pass"], cwd=root, env=env)
        stats = interleave(jobs, args.rounds)
        mid_short = json.loads(short.with_suffix(".envelope.json").read_text())["message_id"]
        mid_long = json.loads(long.with_suffix(".envelope.json").read_text())["message_id"]
        look_short = time_lookup(thread_trace_path(root, "thread-short"), mid_short, 50)
        look_long = time_lookup(trace_long, mid_long, 50)
        t0 = time.perf_counter()
        assert find_record(trace_long, "never-verified-message") is None
        full_scan = time.perf_counter() - t0

    print(f"\nreceiver gate ({where}), {args.rounds} interleaved rounds; {load_note()}")
    print(f"{'':36}{'median':>10}{'p90':>10}")
    for key, label in (
        ("short", "(a) 10-event thread"),
        ("long", f"(b) {args.events:,}-event thread"),
    ):
        s = stats[key]
        print(f"{label:36}{fmt_ms(s.median):>10}{fmt_ms(s.p90):>10}")
    ratio = stats["long"].median / stats["short"].median
    verdict = "met" if ratio <= 1.5 else "MISSED"
    print(f"\nratio (b)/(a), whole gate: {ratio:.2f}x   target <= 1.5x: {verdict}")
    print(
        f"record lookup alone (best of 50): short {look_short * 1e6:.0f} us, "
        f"long {look_long * 1e6:.0f} us, ratio {look_long / look_short:.2f}x"
    )
    print(
        f"info: lookup of a message never verified, full scan of the long trace: {full_scan:.2f} s"
    )
    skip, bare = stats["skip"].median, stats["bare"].median
    print(
        f"info: non-ECL artefact (no envelope, exit 0): {fmt_ms(skip)} ms median, "
        f"{skip / bare:.2f}x `python -c pass` ({fmt_ms(bare)} ms)"
    )
    return 0 if ratio <= 1.5 else 1


if __name__ == "__main__":
    sys.exit(main())
