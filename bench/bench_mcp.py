"""read_verified on a warm ``eidolons mcp serve`` against one ``verify-incoming`` process.

Usage::

    python bench/bench_mcp.py [--rounds R]

Method
------
One throw-away project with one atlas -> vigil hand-off emitted and passed by the
orchestrator gate (through the library, as a sender and an orchestrator would). One
server, ``eidolons mcp serve --as vigil --no-memory``, is started once over stdio with the
SDK's client (its start-up is reported separately). Then, interleaved R times (default 30,
after one warm-up round):

(a) ``eidolons verify-incoming PAYLOAD --as vigil --no-memory --print-payload``, one
    process: what a receiver with Bash runs to get the verified bytes (the baseline);
(b) ``read_verified(PAYLOAD)`` on the warm server: the same gate, in-process, plus a JSON-RPC
    round trip.

Reported: medians, p90s and the ratio (b)/(a). Both append the receiver's two events, so
the trace grows the same way for both.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import (
    SCOUT_REPORT,
    child_env,
    console_script,
    emit_handoff,
    fmt_ms,
    interleave,
    load_note,
    record_pass,
    run_timed,
)

BODY = SCOUT_REPORT * 20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    from anyio.from_thread import start_blocking_portal
    from mcp import Client, StdioServerParameters

    with tempfile.TemporaryDirectory(prefix="eidolons-bench-mcp-") as tmp:
        root = Path(tmp)
        (root / ".eidolons").mkdir()
        payload = root / "scout-report.md"
        result = emit_handoff(root, payload.name, BODY)
        record_pass(result.envelope_path, root)
        script, where = console_script()
        env = child_env()
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "eidolons", "mcp", "serve", "--as", "vigil", "--no-memory", "--root", tmp],
        )
        with start_blocking_portal() as portal:
            t0 = time.perf_counter()
            with portal.wrap_async_context_manager(Client(params)) as client:
                startup = time.perf_counter() - t0

                def mcp_call() -> float:
                    t = time.perf_counter()
                    r = portal.call(client.call_tool, "read_verified", {"artifact": str(payload)})
                    elapsed = time.perf_counter() - t
                    if r.is_error or r.content[0].text.encode() != BODY:
                        raise SystemExit(f"bench: read_verified failed: {r.content}")
                    return elapsed

                cli = [*script, "verify-incoming", str(payload), "--as", "vigil", "--no-memory"]
                jobs = {
                    "a": lambda: run_timed([*cli, "--print-payload"], cwd=root, env=env),
                    "b": mcp_call,
                }
                stats = interleave(jobs, args.rounds)
        a, b = stats["a"], stats["b"]
        print(f"eidolons from {where}; {args.rounds} rounds; {load_note()}")
        print(f"server start-up (spawn + initialize): {fmt_ms(startup)} ms")
        print(
            f"(a) verify-incoming --print-payload process: median {fmt_ms(a.median)} ms, "
            f"p90 {fmt_ms(a.p90)} ms"
        )
        print(
            f"(b) read_verified on a warm server:          median {fmt_ms(b.median)} ms, "
            f"p90 {fmt_ms(b.p90)} ms"
        )
        print(f"ratio (b)/(a): {b.median / a.median:.2f}x (medians), {b.best / a.best:.2f}x (best)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
