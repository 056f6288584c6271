"""Hashing benchmark: our payload digest against ``openssl dgst -sha256`` and ``sha256sum``
on the same file.

Usage::

    python bench/bench_hash.py [--quick] [--size-mib N] [--rounds N]

Method
------
A payload of 256 MiB (``--quick``: 64 MiB) of random bytes is written to a temporary
project and its envelope is emitted through the library (which reads it once, so the file
is in the page cache for every row: this measures hashing, not the disk). Each row below
is then run ``--rounds`` times (default 3), interleaved with the order rotated every round;
best-of and median-of the rounds are reported as MiB/s (MiB = 2**20 bytes).

- ours, in-process: :func:`eidolons.ecl.integrity.digest_stream` over an unbuffered file, as
  the gate reads a payload (open + read + hash, timed with ``perf_counter``);
- ``hashlib.file_digest`` (informational): the standard library's own loop, a reference
  for what the Python side can reach;
- ``openssl dgst -sha256 FILE`` and ``sha256sum FILE``: subprocess wall time, nothing
  subtracted (so their process start is included, as ours is in the end-to-end row);
- ours, end-to-end: the installed ``eidolons verify-envelope ENV --block --json`` on the
  envelope of that payload (subprocess wall time, interpreter start-up included);
- hmac-sha256 (informational): ours in-process (it computes the HMAC *and* the plain
  SHA-256 in the same pass, the envelope needs both), the HMAC alone with
  :mod:`hmac` (one hash per byte), and ``openssl dgst -sha256 -hmac KEY FILE``.

The target ("whole-process hashing") is ours end-to-end -- the whole
``eidolons verify-envelope`` process, interpreter start-up included -- >= 90% of
``openssl dgst -sha256``'s throughput (its process start included too), on best-of and on
median-of; ours in-process is reported beside it. A missing ``openssl`` or
``sha256sum`` is reported and its row skipped.

``--switch`` measures instead where the builtin SHA-256 (``_sha256``, no OpenSSL import)
stops paying for itself against ``_hashlib`` (OpenSSL, whose import costs about 1.8 ms):
for payload sizes from 16 KiB to 4 MiB, a fresh ``python -c`` that imports one of the
two and hashes the file, interleaved, medians; the crossover is where
``eidolons.ecl.integrity.LIGHT_MAX_BYTES`` belongs (ADR 0022).
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from _benchlib import (
    MiB,
    Stats,
    child_env,
    console_script,
    interleave,
    load_note,
    make_project,
    run_timed,
)
from eidolons.ecl.grammar import Limits
from eidolons.ecl.integrity import LIGHT_MAX_BYTES, digest_stream

TARGET_FRACTION = 0.90
HMAC_KEY = b"eidolons-bench-key"


def time_ours(path: Path, method: str, key: bytes | None, expect: str | None) -> float:
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as fh:
        digest = digest_stream(fh, method, key, max_bytes=Limits().max_payload_bytes)
    elapsed = time.perf_counter() - t0
    if expect is not None and digest.value != expect:
        raise SystemExit(f"bench: {method} digest mismatch")
    return elapsed


def time_file_digest(path: Path) -> float:
    t0 = time.perf_counter()
    with open(path, "rb") as fh:
        hashlib.file_digest(fh, "sha256").hexdigest()
    return time.perf_counter() - t0


def time_hmac_alone(path: Path) -> float:
    t0 = time.perf_counter()
    mac = hmac.new(HMAC_KEY, digestmod=hashlib.sha256)
    buf = bytearray(MiB)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as fh:
        while n := fh.readinto(view):
            mac.update(view[:n])
    mac.hexdigest()
    return time.perf_counter() - t0


def run_hash(*, quick: bool, size_mib: int | None = None, rounds: int = 3) -> None:
    size_mib = size_mib or (64 if quick else 256)
    size = size_mib * MiB
    openssl = shutil.which("openssl")
    sha256sum = shutil.which("sha256sum")
    script, where = console_script()
    print(f"== hashing: {size_mib} MiB payload, {rounds} interleaved rounds ==")
    with tempfile.TemporaryDirectory(prefix="eidolons-bench-hash-") as tmp:
        t0 = time.perf_counter()
        envelope = make_project(Path(tmp), size=size)
        print(f"payload written and emitted in {time.perf_counter() - t0:.1f} s")
        payload = envelope.parent / "payload.bin"
        expected = json.loads(envelope.read_text())["integrity"]["value"]
        env = child_env()
        cwd = envelope.parent
        rows: dict[str, tuple[str, Callable[[], float]]] = {
            "ours": (
                "ours: digest_stream sha256 (in-process)",
                partial(time_ours, payload, "sha256", None, expected),
            ),
            "file_digest": (
                "hashlib.file_digest sha256 (info)",
                partial(time_file_digest, payload),
            ),
        }
        if openssl:
            rows["openssl"] = (
                "openssl dgst -sha256 FILE",
                partial(run_timed, (openssl, "dgst", "-sha256", str(payload)), cwd=cwd, env=env),
            )
        else:
            print("openssl: not found, baseline skipped")
        if sha256sum:
            rows["sha256sum"] = (
                "sha256sum FILE",
                partial(run_timed, (sha256sum, str(payload)), cwd=cwd, env=env),
            )
        else:
            print("sha256sum: not found, baseline skipped")
        verify = (*script, "verify-envelope", str(envelope), "--block", "--json")
        rows["e2e"] = (
            "ours end-to-end: eidolons verify-envelope",
            partial(run_timed, verify, cwd=cwd, env=env),
        )
        rows["hmac_ours"] = (
            "ours: digest_stream hmac-sha256 (info)",
            partial(time_ours, payload, "hmac-sha256", HMAC_KEY, None),
        )
        rows["hmac_alone"] = ("hmac.new alone, one pass (info)", partial(time_hmac_alone, payload))
        if openssl:
            key = HMAC_KEY.decode()
            rows["hmac_openssl"] = (
                "openssl dgst -sha256 -hmac KEY (info)",
                partial(
                    run_timed,
                    (openssl, "dgst", "-sha256", "-hmac", key, str(payload)),
                    cwd=cwd,
                    env=env,
                ),
            )
        print(f"console script: {where}")
        print(f"before: {load_note()}")
        stats = interleave({k: fn for k, (_, fn) in rows.items()}, rounds, warmup=0)
        print(f"after:  {load_note()}\n")
    print_throughput(rows, stats, size_mib)


def mib_s(size_mib: int, seconds: float) -> float:
    return size_mib / seconds


def print_throughput(
    rows: dict[str, tuple[str, Callable[[], float]]], stats: dict[str, Stats], size_mib: int
) -> None:
    ref = stats.get("openssl")
    print(
        f"{'method':44}{'best s':>8}{'med s':>8}{'best MiB/s':>12}{'med MiB/s':>11}{'/openssl':>10}"
    )
    for key, (label, _) in rows.items():
        s = stats[key]
        frac = f"{ref.best / s.best:>9.0%}" if ref else f"{'-':>9}"
        print(
            f"{label:44}{s.best:>8.3f}{s.median:>8.3f}{mib_s(size_mib, s.best):>12.0f}"
            f"{mib_s(size_mib, s.median):>11.0f} {frac}"
        )
    print("(/openssl = throughput relative to openssl dgst -sha256, best-of)")
    if ref is None:
        print("\nno openssl: the 90% target cannot be judged")
        return
    ours = stats["ours"]
    e2e = stats["e2e"]
    best = ref.best / e2e.best
    med = ref.median / e2e.median
    met = "MET" if min(best, med) >= TARGET_FRACTION else "MISSED"
    print(
        f"\nwhole process: verify-envelope/openssl = {best:.0%} (best-of), {med:.0%} "
        f"(median-of), interpreter start-up included   target: at least "
        f"{TARGET_FRACTION:.0%} of openssl's throughput -> {met}"
    )
    print(
        f"in-process digest_stream/openssl = {ref.best / ours.best:.0%} (best-of), "
        f"{ref.median / ours.median:.0%} (median-of)"
    )
    if "hmac_openssl" in stats:
        h = stats["hmac_openssl"]
        print(
            f"hmac-sha256 ours/openssl = {h.best / stats['hmac_ours'].best:.0%} (best-of); "
            f"hmac alone/openssl = {h.best / stats['hmac_alone'].best:.0%}"
        )


_SWITCH_CODE = {
    "builtin _sha256": "import sys, _sha256 as m; h = m.sha256",
    "OpenSSL _hashlib": "import sys, _hashlib as m; h = m.openssl_sha256",
}
_SWITCH_TAIL = "; f = open(sys.argv[1], 'rb', buffering=0); print(h(f.read()).hexdigest())"


def run_switch(rounds: int) -> None:
    """Fresh processes hashing one file with either implementation, size by size."""
    sizes = [16 << 10, 64 << 10, 256 << 10, 512 << 10, 1 << 20, 4 << 20]
    env = child_env()
    print(f"== switch-over: builtin SHA-256 vs OpenSSL, fresh process, {rounds} rounds ==")
    print(f"before: {load_note()}")
    with tempfile.TemporaryDirectory(prefix="eidolons-bench-switch-") as tmp:
        jobs: dict[str, Callable[[], float]] = {}
        for size in sizes:
            path = Path(tmp, f"{size}.bin")
            path.write_bytes(os.urandom(size))
            for label, head in _SWITCH_CODE.items():
                argv = (sys.executable, "-c", head + _SWITCH_TAIL, str(path))
                jobs[f"{size}|{label}"] = partial(run_timed, argv, cwd=Path(tmp), env=env)
        stats = interleave(jobs, rounds)
    print(f"after:  {load_note()}\n")
    print(f"{'payload':>10}{'builtin ms':>12}{'OpenSSL ms':>12}  faster")
    for size in sizes:
        light = stats[f"{size}|builtin _sha256"].median
        heavy = stats[f"{size}|OpenSSL _hashlib"].median
        faster = "builtin" if light < heavy else "OpenSSL"
        print(f"{size >> 10:>7} KiB{light * 1000:>12.2f}{heavy * 1000:>12.2f}  {faster}")
    print(f"(eidolons.ecl.integrity.LIGHT_MAX_BYTES = {LIGHT_MAX_BYTES >> 10} KiB)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="64 MiB instead of 256 MiB")
    parser.add_argument("--size-mib", type=int, help="payload size in MiB (overrides --quick)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per row (default 3)")
    parser.add_argument("--switch", action="store_true", help="measure the SHA-256 switch-over")
    args = parser.parse_args(argv)
    if args.switch:
        run_switch(max(args.rounds, 9))
        return 0
    if args.size_mib is not None and not 1 <= args.size_mib <= 1024:
        parser.error("--size-mib must be 1..1024 (the default payload cap is 1 GiB)")
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    run_hash(quick=args.quick, size_mib=args.size_mib, rounds=args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
