"""``eidolons trace ACTION``: a thread's events, its hand-offs as a chain (show, graph,
verify, cost, otel, report), the project's threads (list), OTLP export and the shared
PostgreSQL store (store init, export, import).

Exit codes: 0 done; 1 nothing found to read (``verify``: 2, ADR 0003); 2 usage; 3
``verify`` failures in block mode, ``cost`` over ``--budget``. A PATH that cannot be read
is reported on stderr and skipped."""

from __future__ import annotations

import argparse

from eidolons.cli.common import fail
from eidolons.errors import EidolonsError

HELP = "a thread's trace: events, the hand-off chain, its graph, cost and report"

CHAIN_VERBS = {
    "show": "events of a thread or trace file; the hop table of envelope PATHs",
    "graph": "who handed what to whom (text, JSON, Mermaid, DOT or SVG)",
    "verify": "re-run the orchestrator gate on envelope PATHs (no trace written); check a "
    "trace's hash chain and receipts",
    "cost": "token ledger by sender (self-reported estimates)",
    "otel": "print the chain as OpenTelemetry GenAI spans (JSON; nothing is sent)",
}
GRAPH_FORMATS = ("text", "json", "mermaid", "dot", "svg")


def _nexus_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "paths", nargs="+", metavar="PATH", help="envelope, directory, thread id or .jsonl trace"
    )
    p.add_argument("--json", action="store_true", help="machine output")
    p.add_argument("--budget", type=int, metavar="N", help="cost: exit 3 when total tokens > N")
    p.add_argument(
        "--otel-version", default="1.30.0", metavar="V", help="otel: GenAI convention version"
    )
    p.add_argument("--mode", choices=("warn", "block"), help="verify: exit 3 on a failure in block")
    p.add_argument("--block", action="store_true", help="verify: same as --mode block")
    p.add_argument("--root", metavar="DIR", help="project root (default: discovered)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="trace_command", metavar="ACTION")
    p.set_defaults(trace_help=p.print_help)  # no ACTION: the verbs, exit 0 (as upstream)
    for verb, text in CHAIN_VERBS.items():
        q = sub.add_parser(verb, help=text, description=text)
        _nexus_flags(q)
        if verb == "show":
            q.add_argument("--follow", action="store_true", help="keep printing new events")
            q.add_argument(
                "--max-events", type=int, metavar="N", help="--follow: stop after N events"
            )
            q.add_argument(
                "--idle-timeout",
                type=float,
                metavar="S",
                help="--follow: stop after S seconds without a new event",
            )
        if verb == "graph":
            q.add_argument(
                "--format", choices=GRAPH_FORMATS, help="default: text (json with --json)"
            )
    q = sub.add_parser("report", help="one self-contained HTML page of a chain")
    q.add_argument("paths", nargs="+", metavar="THREAD", help="thread id (or any chain PATH)")
    q.add_argument("-o", "--output", metavar="FILE", help="write the page here (default: stdout)")
    q.add_argument("--root", metavar="DIR", help="project root (default: discovered)")
    q = sub.add_parser("list", help="the project's threads, newest first")
    q.add_argument("--json", action="store_true", help="machine output")
    q.add_argument("--root", metavar="DIR", help="project root (default: discovered)")
    _store_arguments(sub)


def _store_arguments(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dsn = "postgresql:// URI (default: $EIDOLONS_TRACE_DSN)"
    store = sub.add_parser("store", help="manage the shared PostgreSQL trace store")
    store_sub = store.add_subparsers(dest="store_command", metavar="ACTION", required=True)
    init = store_sub.add_parser(
        "init", help="create or migrate the PostgreSQL trace schema; bind logins to this database"
    )
    init.add_argument("--dsn", help=f"an administrator's {dsn}")
    init.add_argument(
        "--grant-gate",
        action="append",
        default=[],
        metavar="ROLE",
        help="bind this login to the database as a gate (INSERT and SELECT); repeatable",
    )
    init.add_argument(
        "--grant-orchestrator",
        action="append",
        default=[],
        metavar="ROLE",
        help="bind this login as the orchestrator (may record orchestrator verdicts); repeatable",
    )
    export = sub.add_parser(
        "export", help="copy the project's JSONL trace to another store, or send it as OTLP spans"
    )
    target = export.add_mutually_exclusive_group(required=True)
    target.add_argument("--to", choices=["postgres"], help="the target store")
    target.add_argument(
        "--otlp",
        metavar="URL",
        help="send one span per hand-off to this OTLP/HTTP collector (e.g. "
        "http://127.0.0.1:4318, which posts to its /v1/traces; a URL with a path is used as it is)",
    )
    export.add_argument(
        "--timeout", type=float, default=10.0, metavar="S", help="--otlp: seconds (default 10)"
    )
    export.add_argument("threads", nargs="*", metavar="THREAD", help="default: every thread")
    export.add_argument("--dsn", help=f"the target's {dsn}")
    export.add_argument("--root", metavar="DIR", help="project root (default: discovered)")
    imp = sub.add_parser(
        "import", help="copy threads from PostgreSQL into the project's JSONL trace"
    )
    imp.add_argument("threads", nargs="*", metavar="THREAD", help="default: every thread")
    imp.add_argument("--dsn", help=f"the source's {dsn}")
    imp.add_argument("--root", metavar="DIR", help="project root (default: discovered)")


def run(args: argparse.Namespace) -> int:
    if args.trace_command is None:
        args.trace_help()
        return 0
    try:
        if args.trace_command == "export" and args.otlp is not None:
            from eidolons.cli.trace_export import run_export

            return run_export(args)
        if args.trace_command in ("store", "export", "import"):
            from eidolons.cli.trace_store import run_store

            return run_store(args)
        if args.trace_command == "list":
            from eidolons.cli.trace_list import run_list

            return run_list(args)
        from eidolons.cli.trace_chain import run_chain

        return run_chain(args)
    except EidolonsError as exc:
        return fail(exc, 2)
