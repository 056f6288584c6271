"""The host's payload index (ADR 0018): what the hook's fast path and an append pay for it.

Usage::

    python bench/bench_payload_index.py [--rounds R] [--threads N ...] [--compare SRC]

Method
------
For each N of ``--threads`` (default 1 and 50), a throw-away project with N threads,
each holding an emitted hand-off (so N trace files), and a source file. Interleaved R
times (default 30, after one warm-up round), each a subprocess:

(a) ``python -c pass``, the baseline;
(b) the hook on a Claude Code ``PreToolUse`` Read of the source file, run as ``eidolons
    init`` registers it but with this tree's ``src/`` first on ``sys.path`` (``-I``
    ignores ``PYTHONPATH``): the index covers every trace, allowed at once;
(c) with ``--compare SRC``: the same through another tree's ``src/`` (the tree before a
    change). Each hand-off is emitted through both trees, this one last, so that each
    finds its own index (before ADR 0018: ``.eidolons/payloads.idx``) up to date.

Then, in-process, the cost of one ``JsonlStore.append`` (a receiver event) on the same
project, median and minimum of 5 runs of 200, and with ``--compare`` the same in a
subprocess importing SRC.

Reported: medians, minimums and the ratio (b)/(a) (target <= 1.5x, the hook's goal);
(c)/(a) for information.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import child_env, fmt_ms, interleave, run_timed

HERE = Path(__file__).resolve().parent.parent / "src"
BOOT = (
    "import sys; sys.path.insert(0, {src!r}); from eidolons.cli.main import main; "
    "sys.exit(main(['hook', *sys.argv[1:]]))"
)
APPEND = """
import os, sys, tempfile, time
from pathlib import Path
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp()
from eidolons.trace.log import JsonlStore
root = Path(tempfile.mkdtemp()) / "p"
(root / ".eidolons").mkdir(parents=True)
store = JsonlStore(root)
threads = int(sys.argv[1])
for t in range(threads):
    store.append(f"t{t}", {"event": "emit", "message_id": f"m{t}", "thread_id": f"t{t}",
                           "payload_path": f"h{t}.md"})
event = {"event": "receive", "message_id": "m0", "thread_id": "t0", "payload_path": "h0.md",
         "gate": "receiver"}
runs = []
for _ in range(5):
    t0 = time.perf_counter()
    for _ in range(200):
        store.append("t0", event)
    runs.append((time.perf_counter() - t0) / 200)
runs.sort()
print(runs[2], runs[0])
"""


def project(base: Path, threads: int, trees: list[Path]) -> Path:
    root = base / f"proj-{threads}"
    (root / ".eidolons").mkdir(parents=True)
    (root / "src.py").write_text("print('hello')\n")
    for i in range(threads):
        (root / f"h{i}.md").write_text("# Report\n\n## Decision target\nx\n")
        for src in trees:  # this tree last: its index is the one up to date
            args = ["emit", f"h{i}.md", "--from", "atlas@1.4.2", "--to", "vigil@1.9.0"]
            args += ["--performative", "PROPOSE", "--kind", "scout-report", "--objective", "o"]
            args += ["--thread", f"t{i}", "--force"]
            env = child_env({"PYTHONPATH": str(src)})
            r = subprocess.run(
                [sys.executable, "-m", "eidolons", *args],
                cwd=root,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            assert r.returncode == 0, r.stderr
    return root


def event(root: Path) -> bytes:
    doc = {
        "session_id": "s",
        "transcript_path": str(root / "t.jsonl"),
        "cwd": str(root),
        "agent_id": "ae03233dc7de3192d",
        "agent_type": "vigil",
        "hook_event_name": "PreToolUse",
        "tool_name": "Read",
        "tool_input": {"file_path": str(root / "src.py")},
        "tool_use_id": "toolu_1",
    }
    return json.dumps(doc).encode()


def append_cost(src: Path, threads: int) -> tuple[float, float]:
    env = child_env({"PYTHONPATH": str(src)})
    out = subprocess.run(
        [sys.executable, "-c", APPEND, str(threads)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return float(out[0]), float(out[1])


def hook(src: Path, root: Path) -> list[str]:
    boot = BOOT.format(src=str(src))
    return [sys.executable, "-I", "-c", boot, "claude-code", "--root", str(root)]


def measure(root: Path, rounds: int, compare: Path | None) -> None:
    env, stdin = child_env(), event(root)
    mine = hook(HERE, root)
    jobs = {
        "a": lambda: run_timed([sys.executable, "-c", "pass"], cwd=root, env=env),
        "b": lambda: run_timed(mine, cwd=root, env=env, stdin=stdin),
    }
    if compare is not None:
        theirs = hook(compare, root)
        jobs["c"] = lambda: run_timed(theirs, cwd=root, env=env, stdin=stdin)
    stats = interleave(jobs, rounds)
    a = stats["a"]
    print(f"    (a) python -c pass: median {fmt_ms(a.median)}, min {fmt_ms(a.best)}")
    for key, label in (("b", "hook, this tree"), ("c", "hook, --compare tree")):
        if key in stats:
            s = stats[key]
            print(
                f"    ({key}) {label}: median {fmt_ms(s.median)}, min {fmt_ms(s.best)}"
                f"  {s.median / a.median:.2f}x (min {s.best / a.best:.2f}x)"
            )
    ratio = stats["b"].median / a.median
    print(f"    target (b)/(a) <= 1.5x: {'met' if ratio <= 1.5 else 'NOT met'}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 50])
    ap.add_argument("--compare", type=Path, help="another tree's src/ (before a change)")
    args = ap.parse_args()
    compare = args.compare.resolve() if args.compare else None
    trees = [compare, HERE] if compare else [HERE]
    print(f"bench_payload_index: {args.rounds} interleaved rounds, load {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        for threads in args.threads:
            root = project(Path(tmp), threads, trees)
            print(f"  {threads} trace file(s):")
            measure(root, args.rounds, compare)
            for label, src in (("this tree", HERE), ("--compare tree", compare)):
                if src is not None:
                    med, low = append_cost(src, threads)
                    print(f"    append, {label}: median {med * 1e6:.0f} us, min {low * 1e6:.0f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
