"""The chain views on a long thread, as ratios against reading the same trace.

Builds one thread of N hand-offs (N linked ``emit`` + orchestrator ``verify_pass`` +
receiver ``verify_pass``/``receive`` events: 4N lines, each hop's ``parent_id`` the
previous one) and times, in-process and interleaved:

- (a) baseline: ``read_events`` over the thread and ``json`` decoding every line (the
  least any view must do);
- (b) ``trace graph THREAD --json``; (c) ``trace report THREAD -o FILE``;
  (d) ``trace graph THREAD --format svg``; (e) ``trace list``.

Prints medians and each view's ratio to (a).

    python bench/bench_trace_views.py [--hops N] [--rounds R]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from eidolons.cli.main import main
from eidolons.trace.log import append_event, read_events, thread_trace_path

THREAD = "0190a0b0-0000-7000-8000-00000000b00c"


def build(root: Path, hops: int) -> Path:
    path = thread_trace_path(root, THREAD)
    parent = None
    for i in range(hops):
        mid = f"0190a0b0-0000-7000-8000-{i:012d}"
        sender, to = f"agent-{i % 7}", f"agent-{(i + 1) % 7}"
        base = {
            "message_id": mid,
            "thread_id": THREAD,
            "from": f"{sender}@1.0.0",
            "to": f"{to}@1.0.0",
            "performative": "PROPOSE",
            "integrity_method": "sha256",
            "parent_id": parent,
            "artifact_kind": "scout-report",
            "artifact_path": f"h/{i}.md",
            "context_tokens": 100 + i % 50,
        }
        ts = f"2026-12-01T10:{i // 6000 % 60:02d}:{i // 100 % 60:02d}.{i % 1000:03d}Z"
        append_event(path, {"ts": ts, "event": "emit", **base, "gate": "sender"})
        for gate in ("orchestrator", "receiver"):
            event = {"ts": ts, "event": "verify_pass", **base, "gate": gate, "verdict": "pass"}
            append_event(path, {**event, "duration_ms": 1})
        append_event(path, {"ts": ts, "event": "receive", **base, "gate": "receiver"})
        parent = mid
    return path


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def cli(*argv: str) -> Callable[[], object]:
    def run() -> object:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = main(list(argv))
        assert code == 0, argv
        return code

    return run


def main_bench() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hops", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / ".eidolons").mkdir()
        path = build(root, args.hops)
        out = root / "r.html"

        def baseline() -> object:
            return sum(1 for line in read_events(path) if line.event is not None)

        cases: dict[str, Callable[[], object]] = {
            "(a) read + decode the trace": baseline,
            "(b) trace graph --json": cli("trace", "graph", THREAD, "--json", "--root", tmp),
            "(c) trace report -o FILE": cli(
                "trace", "report", THREAD, "-o", str(out), "--root", tmp
            ),
            "(d) trace graph --format svg": cli(
                "trace", "graph", THREAD, "--format", "svg", "--root", tmp
            ),
            "(e) trace list": cli("trace", "list", "--root", tmp),
        }
        times: dict[str, list[float]] = {k: [] for k in cases}
        names = list(cases)
        for r in range(args.rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                times[name].append(timed(cases[name]))
        base = statistics.median(times[names[0]])
        lines = sum(1 for _ in read_events(path))
        print(f"thread of {args.hops} hops ({lines} lines), {args.rounds} rounds, medians:")
        for name in names:
            med = statistics.median(times[name])
            print(f"  {name:<32} {med * 1000:9.1f} ms   {med / base:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main_bench())
