"""In-process throughput of the orchestrator's check: ``verify_envelope_file`` per second
per core on 4 KiB payloads (target: at least 10,000/s), against a bare loop
measured in the same run.

Usage::

    python bench/bench_inprocess.py [--quick] [--seconds S] [--rounds N] [--size BYTES]

Method
------
A temporary project holds N distinct hand-offs (default 64) of ``--size`` random bytes
(default 4 KiB), each emitted through the library. Two loops then run over them,
*interleaved* for ``--rounds`` rounds (default 5) of about ``--seconds`` each:

(a) the baseline: a bare parse-and-hash loop, what any verifier must at least do: read
    the envelope file, ``json.loads`` it, read the payload, SHA-256 it
    (``hashlib.file_digest``), compare the hex digest;
(b) ours: :func:`eidolons.gates.verify.verify_envelope_file` (every check of the gate: strict
    JSON, the envelope rules, the payload resolution opened beneath the root by
    descriptor, the digest, the constant-time comparison).

CPU time (``time.process_time``) is what is divided, so the figure is per core whatever
else the machine runs; wall-clock rates are printed too. Reported: each loop's rate
(median and best round) and the ratio (b)/(a). The target is (b) >= 10,000/s per core.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _benchlib import emit_handoff, load_note

TARGET = 10_000


def bare_check(envelope: Path, root: Path) -> bool:
    with open(envelope, "rb") as fh:
        doc = json.loads(fh.read())
    payload = envelope.parent / doc["artifact"]["path"]
    with open(payload, "rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    return bool(digest == doc["integrity"]["value"])


def ours_check(envelope: Path, root: Path) -> bool:
    from eidolons.gates.verify import verify_envelope_file

    return bool(verify_envelope_file(envelope, root=root))


def run_round(
    check: Callable[[Path, Path], bool], envs: list[Path], root: Path, seconds: float
) -> tuple[float, float]:
    """(calls per CPU second, calls per wall second) over about ``seconds``."""
    n = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    deadline = wall0 + seconds
    while time.perf_counter() < deadline:
        for env in envs:
            if not check(env, root):
                raise SystemExit(f"bench: {env} did not verify")
        n += len(envs)
    cpu = time.process_time() - cpu0
    wall = time.perf_counter() - wall0
    return n / cpu, n / wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds of 0.5 s")
    parser.add_argument("--seconds", type=float, default=1.0, help="per round (default 1)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--size", type=int, default=4096, help="payload bytes (default 4096)")
    parser.add_argument("--handoffs", type=int, default=64, help="distinct hand-offs (64)")
    args = parser.parse_args(argv)
    seconds, rounds = (0.5, 3) if args.quick else (args.seconds, args.rounds)
    with tempfile.TemporaryDirectory(prefix="eidolons-bench-ip-") as tmp:
        root = Path(tmp) / "project"
        (root / ".eidolons").mkdir(parents=True)
        envs = [
            Path(emit_handoff(root, f"h{i}.md", os.urandom(args.size)).envelope_path)
            for i in range(args.handoffs)
        ]
        for check in (bare_check, ours_check):  # warm: imports, page cache, OpenSSL loaded
            run_round(check, envs, root, 0.2)
        print(f"== in-process: verify_envelope_file on {args.size}-byte payloads ==")
        print(f"python {sys.version.split()[0]}; {args.handoffs} hand-offs; {rounds} rounds")
        print(f"before: {load_note()}")
        rows: dict[str, list[tuple[float, float]]] = {"bare": [], "ours": []}
        for r in range(rounds):
            order = ["bare", "ours"] if r % 2 == 0 else ["ours", "bare"]
            for key in order:
                check = bare_check if key == "bare" else ours_check
                rows[key].append(run_round(check, envs, root, seconds))
        print(f"after:  {load_note()}\n")
        print(f"{'loop':48}{'med /s cpu':>12}{'best /s cpu':>12}{'med /s wall':>12}")
        labels = {
            "bare": "(a) bare loop: json.loads + file_digest",
            "ours": "(b) eidolons.gates.verify.verify_envelope_file",
        }
        med: dict[str, float] = {}
        for key, label in labels.items():
            cpu = [c for c, _ in rows[key]]
            wall = [w for _, w in rows[key]]
            med[key] = statistics.median(cpu)
            print(
                f"{label:48}{med[key]:>12,.0f}{max(cpu):>12,.0f}{statistics.median(wall):>12,.0f}"
            )
        met = "MET" if med["ours"] >= TARGET else "MISSED"
        print(
            f"\n(b)/(a) = {med['ours'] / med['bare']:.2f} (medians)   target: (b) >= "
            f"{TARGET:,}/s per core -> {met}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
