"""The receiver gate's start-up against ``python -c pass``.

Usage::

    python bench/bench_receiver.py [--rounds R] [--records N] [--launcher script|c|both]
                                   [--events N] [--compare SRC] [--rows ROW,...]

Method
------
Two throw-away projects, built through the library and the CLI as a user would:

- *unsigned*: no trust store. One atlas -> vigil hand-off in ``.eidolons/handoffs/``
  emitted and passed by the orchestrator gate; a local memory store filled with N
  (default 10,000) hand-offs of ``bench_memory``'s corpus (ingested through
  ``LocalMemory.ingest``, as the gate's callback does); a file with no envelope
  (``notes.txt``) at the project root.
- *signed*: ``eidolons init`` run in it (signing key and trust store in a private
  ``XDG_CONFIG_HOME``/``HOME``), then the same hand-off emitted and passed, so the
  receiver decides on a signed receipt (``cryptography``'s Ed25519 is imported).

Then, interleaved R times (default 20, after one warm-up round), each a subprocess:

==========  ===============================================================================
bare        ``python -c pass`` (the same venv's interpreter: the baseline of every ratio)
off         ``verify-incoming HANDOFF --as vigil --no-memory``           target <= 3x
on          ``verify-incoming HANDOFF --as vigil`` (local memory, N records)   <= 3.5x
on+recall   the same with ``--show-recall`` (the recall is made only when shown,   <= 3.5x
            ADR 0021)
skip        ``verify-incoming notes.txt --as vigil`` (no envelope: SKIP)       <= 1.5x
skip-json   the same with ``--json``                                           <= 1.5x
signed      ``verify-incoming HANDOFF --as vigil --no-memory`` in the signed project
            (informational: importing the Ed25519 binding alone is ~2.5x)
==========  ===============================================================================

each through the launcher(s) chosen: ``script`` is the installed console script next to
``sys.executable``; ``c`` is ``python -c "import sys; from eidolons.cli.main import main;
sys.exit(main(sys.argv[1:]))"`` (no shim; what the hooks run). Reported per row: median,
minimum, the ratio of medians, the *paired* ratio (median over rounds of row / bare of the
same round) and the ratio of minimums. ``PYTHONDONTWRITEBYTECODE`` is dropped from the
children's environment (``.pyc`` cached: the compiler is not measured) and each child's
exit code is checked (0: pass or skip).

``--compare SRC`` adds ``off/compare``, ``on/compare`` and ``on+recall/compare``: the
same rows through the ``c`` launcher with ``PYTHONPATH=SRC`` (e.g. ``git archive REV src
| tar -x -C /tmp/before``), so a change is measured against the tree before it in one run
(compare them with the ``c`` rows; the launchers differ by under 0.15x).

``--rows on,on+recall`` measures only those rows (and ``bare``), for short rounds while
iterating; every row is measured by default.

``--events N`` (default 0: off) adds a thread whose trace holds N events before the
hand-off's record, and its row ``long`` (the record lookup's independence of the trace's
size is ``bench_lookup.py``'s subject; this row is the whole gate on it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import (
    Stats,
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

TARGETS = {"off": 3.0, "on": 3.5, "on+recall": 3.5, "skip": 1.5, "skip-json": 1.5}
LAUNCHER_C = "import sys; from eidolons.cli.main import main; sys.exit(main(sys.argv[1:]))"


def fill_memory(root: Path, records: int) -> float:
    """Ingest ``records`` hand-offs of bench_memory's corpus into the project's local
    store (where the gate opens it). Returns the seconds it took."""
    from bench_memory import corpus
    from eidolons.memory import STORE_DIR
    from eidolons.memory.local import LocalMemory

    t0 = time.perf_counter()
    memory = LocalMemory(root / STORE_DIR, project=root.resolve().name)
    try:
        handoffs, _ = corpus(records, 20261201)
        for envelope, raw in handoffs:
            result = memory.ingest(envelope, raw, gated=True)
            assert result.get("status") == "ingested", result
        count = memory.stats().get("crystals")
    finally:
        memory.close()
    assert count is None or count == records, count
    return time.perf_counter() - t0


def pad_trace(root: Path, thread_id: str, events: int) -> None:
    from eidolons.trace.log import thread_trace_path

    trace = thread_trace_path(root, thread_id)
    filler = filler_event(thread_id, "2026-11-30T00:00:00.000Z")
    with trace.open("ab") as fh:
        batch: list[bytes] = []
        for i in range(events):
            filler["message_id"] = f"filler-{i:08d}"
            batch.append((json.dumps(filler, separators=(",", ":")) + "\n").encode())
            if len(batch) >= 50_000:
                fh.write(b"".join(batch))
                batch.clear()
        fh.write(b"".join(batch))


def handoff(root: Path, name: str, thread: str, events: int = 0) -> Path:
    """A passed atlas -> vigil hand-off in the project's hand-off directory."""
    directory = root / ".eidolons" / "handoffs"
    directory.mkdir(parents=True, exist_ok=True)
    result = emit_handoff(
        root, f".eidolons/handoffs/{name}", objective=f"Scout report {name}.", thread_id=thread
    )
    if events:
        pad_trace(root, thread, events)
    record_pass(result.envelope_path, root)
    return Path(result.envelope_path).with_name(name)


def quietly(fn: Callable[[], int]) -> int:
    saved = sys.stdout, sys.stderr
    with open(os.devnull, "w") as null:
        sys.stdout = sys.stderr = null
        try:
            return fn()
        finally:
            sys.stdout, sys.stderr = saved


def signed_project(base: Path, home: Path) -> Path:
    """A project after ``eidolons init``, with one passed hand-off (signed receipt)."""
    from eidolons.cli.main import main

    root = base / "signed"
    root.mkdir()
    saved = {k: os.environ.get(k) for k in ("HOME", "XDG_CONFIG_HOME")}
    os.environ["HOME"] = str(home)
    os.environ["XDG_CONFIG_HOME"] = str(home / ".config")
    try:
        assert quietly(lambda: main(["init", "--root", str(root)])) == 0
        assert (root / ".eidolons" / "keys").exists() or (home / ".config").exists()
        return handoff(root, "scout-report.md", "thread-signed")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def paired(row: Stats, bare: Stats) -> float:
    return statistics.median(r / b for r, b in zip(row.samples, bare.samples, strict=True))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--records", type=int, default=10_000, help="memory records (10000)")
    parser.add_argument("--launcher", choices=("script", "c", "both"), default="both")
    parser.add_argument("--events", type=int, default=0, help="a long thread's events (0: none)")
    parser.add_argument(
        "--compare",
        metavar="SRC",
        help="also run on/off with PYTHONPATH=SRC (another tree's src/: before/after in one run)",
    )
    parser.add_argument("--rows", help="only these rows, comma-separated (default: all)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="eidolons-bench-receiver-") as tmp:
        base = Path(tmp)
        home = base / "home"
        home.mkdir()
        root = base / "unsigned"
        (root / ".eidolons").mkdir(parents=True)
        t0 = time.perf_counter()
        payload = handoff(root, "scout-report.md", "thread-short")
        long = handoff(root, "long.md", "thread-long", args.events) if args.events else None
        plain = root / "notes.txt"  # an artifact with no envelope: the gate's commonest case
        plain.write_text("not a hand-off\n")
        took = fill_memory(root, args.records) if args.records else 0.0
        signed = signed_project(base, home)
        print(
            f"built the projects in {time.perf_counter() - t0:.1f} s "
            f"({args.records:,} memory records in {took:.1f} s)"
        )
        env = child_env({"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")})
        env.pop("EIDOLONS_MEMORY", None)
        launchers: dict[str, list[str]] = {}
        if args.launcher in ("script", "both"):
            script, where = console_script()
            launchers["script"] = script
            print(f"launcher script: {where}")
        if args.launcher in ("c", "both"):
            launchers["c"] = [sys.executable, "-c", LAUNCHER_C]
            print(f"launcher c: {sys.executable} -c {LAUNCHER_C!r}")
        rows: dict[str, tuple[Path, Path, list[str]]] = {
            "off": (root, payload, ["--no-memory"]),
            "on": (root, payload, []),
            "on+recall": (root, payload, ["--show-recall"]),  # ADR 0021: recall shown
            "skip": (root, plain, []),
            "skip-json": (root, plain, ["--json"]),
            "signed": (signed.parent.parent.parent, signed, ["--no-memory"]),
        }
        if long is not None:
            rows["long"] = (root, long, ["--no-memory"])
        if args.rows:
            wanted = [name.strip() for name in args.rows.split(",") if name.strip()]
            unknown = sorted(set(wanted) - set(rows))
            if unknown:
                parser.error(f"unknown row(s) {', '.join(unknown)}; choose from {', '.join(rows)}")
            rows = {name: rows[name] for name in wanted}
        jobs: dict[str, Callable[[], float]] = {
            "bare": lambda: run_timed([sys.executable, "-c", "pass"], cwd=root, env=env)
        }
        for lname, launcher in launchers.items():
            for key, (cwd, target, extra) in rows.items():
                argv = [*launcher, "verify-incoming", str(target), "--as", "vigil", *extra]
                jobs[f"{key}/{lname}"] = lambda a=argv, c=cwd: run_timed(a, cwd=c, env=env)  # type: ignore[misc]
        if args.compare:  # the same rows through the c launcher, importing the other tree
            other = {**env, "PYTHONPATH": str(Path(args.compare).resolve())}
            for key in [name for name in ("off", "on", "on+recall") if name in rows]:
                cwd, target, extra = rows[key]
                argv = [sys.executable, "-c", LAUNCHER_C, "verify-incoming", str(target)]
                argv += ["--as", "vigil", *extra]
                jobs[f"{key}/compare"] = lambda a=argv, c=cwd: run_timed(a, cwd=c, env=other)  # type: ignore[misc]
        stats = interleave(jobs, args.rounds)

    bare = stats["bare"]
    print(f"\nreceiver gate, {args.rounds} interleaved rounds; {load_note()}")
    med, low = fmt_ms(bare.median).strip(), fmt_ms(bare.best).strip()
    print(f"python -c pass: median {med} ms, min {low} ms")
    head = f"{'row':22}{'median':>9}{'min':>9}{'x med':>8}{'x pair':>8}{'x min':>8}  target"
    print(head)
    missed = False
    for key, s in stats.items():
        if key == "bare":
            continue
        row, _, how = key.partition("/")
        target = None if how == "compare" else TARGETS.get(row)  # the other tree: info
        ratio = paired(s, bare)
        verdict = ""
        if target is not None:
            ok = ratio <= target
            missed = missed or not ok
            verdict = f"<= {target}x: {'met' if ok else 'MISSED'}"
        else:
            verdict = "info"
        print(
            f"{key:22}{fmt_ms(s.median):>9}{fmt_ms(s.best):>9}"
            f"{s.median / bare.median:>7.2f}x{ratio:>7.2f}x{s.best / bare.best:>7.2f}x  {verdict}"
        )
    print("(x pair: median over rounds of row/bare in the same round; targets judged on it)")
    for lname in launchers:
        if f"long/{lname}" in stats:  # the old issue-3 figure: a long thread vs a short one
            long_s, short_s = stats[f"long/{lname}"], stats[f"off/{lname}"]
            print(
                f"long/{lname} vs off/{lname} (a thread padded with {args.events:,} events vs "
                "a short one): "
                f"{paired(long_s, short_s):.2f}x paired, {long_s.best / short_s.best:.2f}x minimums"
            )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
