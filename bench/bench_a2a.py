"""The receiver gate's cost per A2A message: ``a2a serve``'s server against the same server
with no gate.

Usage::

    python bench/bench_a2a.py [--rounds R]

Method
------
Two throw-away projects on this machine stand for two hosts: the sender's, with R + 1
hand-offs to vigil emitted and passed by its orchestrator gate (signed receipts), and the
receiver's, which pins the sender's key. Two servers of the official SDK run under uvicorn
on 127.0.0.1, in threads of this process, with one agent card declaring the ECL extension:

(n) no gate: an executor that completes each task at once (what an A2A agent without the
    gate does with a message, before its own work);
(g) the gate: ``a2a serve --as vigil``'s application (no COMMAND): the receiver gate on the
    message's bytes, the pass recorded, the hand-off kept.

Each round sends hand-off i to both, in an order rotated each round, with the client
``a2a send`` uses (the card read, one message, the task's end). A new hand-off each round:
a redelivery would be answered from the record, without the gate. Reported: medians, p90s
and the ratio (g)/(n): what the gate adds per message, the network round trip included.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from io import StringIO
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import SCOUT_REPORT, fmt_ms, interleave


def cli(*argv: str | Path, cwd: Path) -> str:
    """``eidolons ARGV`` in this process, in ``cwd``; its stdout (exit 0 required)."""
    from eidolons.cli.main import main

    here, out = os.getcwd(), StringIO()
    os.chdir(cwd)
    try:
        with redirect_stdout(out), redirect_stderr(StringIO()) as err:
            code = main([str(a) for a in argv])
    finally:
        os.chdir(here)
    if code != 0:
        raise SystemExit(f"eidolons {' '.join(map(str, argv))}: exit {code}: {err.getvalue()}")
    return out.getvalue()


def hosts(base: Path, count: int) -> tuple[Path, list[tuple[Path, Path]]]:
    """The receiver's root, and ``count`` (payload, envelope) hand-offs passed on the sender's."""
    a, b = base / "a", base / "b"
    for root in (a, b):
        (root / ".eidolons").mkdir(parents=True)
        cli("keys", "init", "--root", root, cwd=root)
    trust = json.loads((a / ".eidolons" / "trust.json").read_text())
    public = cli("keys", "export", trust["keys"][0]["keyid"], "--root", a, cwd=a).strip()
    cli("keys", "add", public, "--role", "orchestrator", "--project", trust["project"],
        "--root", b, cwd=b)  # fmt: skip
    handoffs = a / ".eidolons" / "handoffs"
    handoffs.mkdir(parents=True)
    out = []
    for i in range(count):
        payload = handoffs / f"report-{i}.md"
        payload.write_bytes(SCOUT_REPORT)
        cli("emit", payload, "--from", "atlas", "--to", "vigil", "--performative", "PROPOSE",
            "--kind", "scout-report", "--objective", "o", "--root", a, cwd=a)  # fmt: skip
        envelope = payload.with_name(f"report-{i}.envelope.json")
        cli("verify-envelope", envelope, "--block", "--root", a, cwd=a)
        out.append((payload, envelope))
    return b, out


@contextmanager
def running(app: Callable[[str], Any]) -> Iterator[str]:
    import uvicorn

    sock = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    server = uvicorn.Server(uvicorn.Config(app(url), log_level="error"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def no_gate(receiver: Any) -> Callable[[str], Any]:
    """The same card and wire, an executor that completes each task at once."""
    from a2a.helpers import new_task, new_text_part
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types import TaskState
    from starlette.applications import Starlette

    class Done(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            task_id, context_id = context.task_id or "", context.context_id or ""
            await event_queue.enqueue_event(
                new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED)
            )
            updater = TaskUpdater(event_queue, task_id, context_id)
            await updater.complete(updater.new_agent_message([new_text_part("done")]))

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            raise NotImplementedError

    def app(url: str) -> Starlette:
        card = receiver.card(url)
        handler = DefaultRequestHandler(Done(), InMemoryTaskStore(), card)
        return Starlette(
            routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/")]
        )

    return app


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    from eidolons.ecl.grammar import Limits
    from eidolons.hosts.a2a import Receiver, build_app, send

    with tempfile.TemporaryDirectory(prefix="eidolons-bench-a2a-") as tmp:
        os.environ["XDG_CONFIG_HOME"] = str(Path(tmp) / "config")  # keys of this run only
        b, handoffs = hosts(Path(tmp), args.rounds + 1)
        receiver = Receiver("vigil", b, command=[], key=None, limits=Limits())
        sent = {"g": iter(handoffs), "n": iter(handoffs)}
        with (
            running(lambda url: build_app(receiver, url)) as gate,
            running(no_gate(receiver)) as plain,
        ):

            def job(key: str, url: str) -> Callable[[], float]:
                def once() -> float:
                    payload, envelope = next(sent[key])
                    receipt = envelope.with_name(
                        envelope.name.replace(".envelope.json", ".receipt.json")
                    )
                    sidecars = {".receipt.json": receipt.read_bytes()}
                    began = time.perf_counter()
                    answer = asyncio.run(
                        send(
                            url, payload.read_bytes(), payload.name, envelope.read_bytes(), sidecars
                        )
                    )
                    took = time.perf_counter() - began
                    if answer.state != "completed":
                        raise SystemExit(f"({key}) {answer.state}: {answer.lines}")
                    return took

                return once

            stats = interleave({"n": job("n", plain), "g": job("g", gate)}, args.rounds)
    n, g = stats["n"], stats["g"]
    print(f"A2A message to a receiver, {args.rounds} rounds (one warm-up), 127.0.0.1")
    print(f"{'':26}{'median':>9}{'p90':>9}")
    print(f"{'(n) same server, no gate':26}{fmt_ms(n.median):>9}{fmt_ms(n.p90):>9}")
    print(f"{'(g) a2a serve, the gate':26}{fmt_ms(g.median):>9}{fmt_ms(g.p90):>9}")
    print(f"gate cost per message: (g)/(n) = {g.median / n.median:.2f}x (median), "
          f"+{(g.median - n.median) * 1000:.1f} ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
