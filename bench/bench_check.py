"""Throughput of ``eidolons check`` on a directory of many envelopes.

Usage::

    python bench/bench_check.py [--envelopes N] [--rounds R] [--keep DIR]

Method
------
N envelopes (default 10,000) with their payloads are written to a temporary project,
100 per sub-directory: valid atlas -> spectra PROPOSE scout-report hand-offs (v2.1,
sha256, a ~1 KiB Markdown payload holding the contract's required sections), so every
gate runs its full path and the run exits 0. Then, interleaved R times (default 3, after
one warm-up round):

(a) ``python -m eidolons check DIR --json`` as a subprocess, stdout read and parsed
    (exit code and envelope count checked);
(b) baseline: one ``python -c`` process that, for the same envelopes in the same order,
    reads and ``json.loads`` each envelope and SHA-256s its payload: the least work any
    checker must do.

Both include interpreter start-up. Reported: the median wall time of each, envelopes per
second, and the ratio (a)/(b), which is what the checker's rules, payload resolution,
strict parsing and output cost on top of parse+hash. Only the ratio is comparable across
machines.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _benchlib import child_env

PAYLOAD_TEMPLATE = """---
eidolon: atlas
version: 1.5.1
kind: scout-report
status: ready
created_at: "2026-07-02T10:00:00Z"
---

# Scout report {n}

## Decision target
Which writes in install.sh race with the cache reader ({n})?

## Findings
- FINDING-001 — `cli/install.sh:42` writes the cache without a lock.
- FINDING-002 — `cli/install.sh:118` chmods after the write.
- FINDING-003 — `cli/lib.sh:55` reads before the chmod completes.

## Gaps
- GAP-001 — NFS-mounted $HOME unverified.

## Scope
Bounded to `cli/install.sh` and `cli/lib.sh`. {pad}
"""

BASELINE = """
import hashlib, json, os, sys
n = 0
for line in open(sys.argv[1], encoding="utf-8"):
    env_path = line.rstrip("\\n")
    with open(env_path, "rb") as fh:
        env = json.loads(fh.read())
    payload = os.path.join(os.path.dirname(env_path), env["artifact"]["path"])
    with open(payload, "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()
    n += digest == env["integrity"]["value"]
print(n)
"""


def envelope_for(n: int, payload: bytes, name: str) -> dict[str, object]:
    digest = hashlib.sha256(payload).hexdigest()
    mid = f"01942d10-{n // 65536:04x}-7e04-9c5d-{n:012x}"
    return {
        "envelope_version": "2.1",
        "message_id": mid,
        "thread_id": mid,
        "parent_id": None,
        "from": {"eidolon": "atlas", "version": "1.5.1"},
        "to": {"eidolon": "spectra", "version": "4.3.1"},
        "performative": "PROPOSE",
        "edge_origin": "roster",
        "objective": f"Hand off scout report {n} for spec authoring.",
        "artifact": {
            "kind": "scout-report",
            "schema_version": "2.0",
            "path": name,
            "sha256": digest,
            "size_bytes": len(payload),
        },
        "context_delta": {
            "token_budget": 4000,
            "tokens_used": 120,
            "input_handles": ["mission.md"],
            "summary": "Three race sites found; scope bounded to the install path.",
        },
        "constraints": {"trust_level": "standard"},
        "ise": {
            "assertion_grade": "validated",
            "receiver_authorization": {
                "auto_route": True,
                "auto_merge": False,
                "auto_deploy": False,
            },
            "verification": {
                "fresh_context": True,
                "checker": "vigil",
                "transcript_access": "artifact-only",
            },
        },
        "confidence": 0.9,
        "integrity": {"method": "sha256", "value": digest},
        "trace": {
            "ts": "2026-07-02T10:00:00Z",
            "host": "raw",
            "model": "bench",
            "tier": "standard",
        },
    }


def generate(root: Path, count: int) -> list[Path]:
    """Write ``count`` envelope + payload pairs under ``root/handoffs``; return the
    envelope paths in the checker's order (sorted by path bytes)."""
    out: list[Path] = []
    for n in range(count):
        folder = root / "handoffs" / f"batch-{n // 100:04d}"
        if n % 100 == 0:
            folder.mkdir(parents=True)
        name = f"report-{n:05d}.md"
        payload = PAYLOAD_TEMPLATE.format(n=n, pad="x" * 300).encode()
        (folder / name).write_bytes(payload)
        envelope = folder / f"report-{n:05d}.envelope.json"
        envelope.write_text(json.dumps(envelope_for(n, payload, name), indent=2) + "\n")
        out.append(envelope)
    return sorted(out, key=lambda p: os.fsencode(str(p)))


def time_check(root: Path, count: int) -> float:
    argv = [sys.executable, "-m", "eidolons", "check", str(root / "handoffs"), "--json"]
    argv += ["--root", str(root)]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=root, env=child_env(), capture_output=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"bench: check exited {proc.returncode}: {proc.stderr[-2000:]!r}")
    doc = json.loads(proc.stdout)
    if doc["envelopes"] != count or doc["exit_code"] != 0:
        raise SystemExit(f"bench: unexpected check output: envelopes={doc['envelopes']}")
    return elapsed


def time_baseline(root: Path, listing: Path, count: int) -> float:
    argv = [sys.executable, "-c", BASELINE, str(listing)]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=root, env=child_env(), capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0 or int(proc.stdout) != count:
        raise SystemExit(f"bench: baseline failed: {proc.stdout!r} {proc.stderr[-2000:]!r}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envelopes", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", metavar="DIR", help="generate into DIR and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="eidolons-bench-check-") as tmp:
        root = Path(args.keep) if args.keep else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        (root / ".eidolons").mkdir(exist_ok=True)
        t0 = time.perf_counter()
        envelopes = generate(root, args.envelopes)
        listing = root / "envelopes.txt"
        listing.write_text("".join(f"{p}\n" for p in envelopes))
        print(
            f"generated {len(envelopes)} envelopes + payloads in {time.perf_counter() - t0:.1f} s"
        )

        samples: dict[str, list[float]] = {"check": [], "baseline": []}
        jobs = {
            "check": lambda: time_check(root, args.envelopes),
            "baseline": lambda: time_baseline(root, listing, args.envelopes),
        }
        keys = list(jobs)
        for r in range(args.rounds + 1):  # round 0 warms the page cache
            for key in keys[r % 2 :] + keys[: r % 2]:
                elapsed = jobs[key]()
                if r:
                    samples[key].append(elapsed)

        n = args.envelopes
        check = statistics.median(samples["check"])
        base = statistics.median(samples["baseline"])
        print(f"rounds: {args.rounds} (medians; one warm-up round discarded)")
        print(f"(a) eidolons check DIR --json : {check:7.2f} s  {n / check:9.0f} envelopes/s")
        print(f"(b) baseline parse+sha256     : {base:7.2f} s  {n / base:9.0f} envelopes/s")
        print(f"ratio (a)/(b): {check / base:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
