"""The hook's cost on a call that touches no hand-off, against bare interpreter start-up.

Usage::

    python bench/bench_hook.py [--rounds R]

Method
------
A throw-away project with one emitted hand-off (so the hook has something to protect).
Interleaved R times (default 30, after one warm-up round), each a subprocess fed the
same stdin:

(a) ``python -c pass`` (this interpreter), the baseline;
(b) the hook command ``eidolons init`` registers (``python -I -c BOOTSTRAP claude-code
    --root ROOT``) on a Claude Code ``PreToolUse`` Read of a source file (the sample
    stdin of a subagent ``vigil`` Read): allowed at once, exit 0;
(c) for information: the same through the ``eidolons`` console script;
(d) for information: (b) on a Read of the verified hand-off (the receiver gate runs).

Reported: medians, p90 and the ratio (b)/(a); target <= 1.5.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import (
    child_env,
    console_script,
    emit_handoff,
    fmt_ms,
    interleave,
    record_pass,
    run_timed,
)
from eidolons.hosts.hook.fast import command_argv


def event(root: Path, path: Path) -> bytes:
    doc = {
        "session_id": "99d5554b-bd3e-4fb3-8b40-58837fe851ee",
        "transcript_path": str(root / "t.jsonl"),
        "cwd": str(root),
        "prompt_id": "fb2a130b-fb9e-453e-bc45-7ca0782bc612",
        "permission_mode": "default",
        "agent_id": "ae03233dc7de3192d",
        "agent_type": "vigil",
        "effort": {"level": "medium"},
        "hook_event_name": "PreToolUse",
        "tool_name": "Read",
        "tool_input": {"file_path": str(path)},
        "tool_use_id": "toolu_e2e_read_1",
    }
    return json.dumps(doc, indent=2).encode()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "proj"
        (root / ".eidolons").mkdir(parents=True)
        source = root / "src.py"
        source.write_text("print('hello')\n")
        payload = root / "handoff.md"
        result = emit_handoff(root, payload.name)
        record_pass(result.envelope_path, root)
        hook = command_argv("claude-code", str(root))
        script, where = console_script()
        plain, handoff = event(root, source), event(root, payload)
        env = child_env()
        jobs = {
            "a": lambda: run_timed([sys.executable, "-c", "pass"], cwd=root, env=env, stdin=plain),
            "b": lambda: run_timed(hook, cwd=root, env=env, stdin=plain),
            "c": lambda: run_timed(
                [*script, "hook", "claude-code", "--root", str(root)],
                cwd=root,
                env=env,
                stdin=plain,
            ),
            "d": lambda: run_timed(hook, cwd=root, env=env, stdin=handoff),
        }
        stats = interleave(jobs, args.rounds)
    labels = {
        "a": "python -c pass (baseline)",
        "b": "hook, Read of a source file (registered command)",
        "c": f"hook via the console script ({where}) [info]",
        "d": "hook, Read of a verified hand-off (receiver gate) [info]",
    }
    print(f"bench_hook: {args.rounds} interleaved rounds, python {sys.version.split()[0]}")
    for key, s in stats.items():
        print(f"  ({key}) {labels[key]}: median {fmt_ms(s.median)}, p90 {fmt_ms(s.p90)}")
    ratio = stats["b"].median / stats["a"].median
    best = stats["b"].best / stats["a"].best
    verdict = "met" if ratio <= 1.5 else "NOT met"
    print(f"  ratio (b)/(a): {ratio:.2f}x (medians), {best:.2f}x (minimums)")
    print(f"  target <= 1.5x: {verdict}")
    print(f"  for information: (d)/(a) {stats['d'].median / stats['a'].median:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
