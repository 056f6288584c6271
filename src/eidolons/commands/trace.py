"""``eidolons trace show THREAD_ID_OR_FILE``: a thread's events, in order."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = "show a thread's trace events"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="trace_command", metavar="ACTION", required=True)
    show = sub.add_parser("show", help="print a thread's events in order, verify failures flagged")
    show.add_argument("thread", metavar="THREAD_ID_OR_FILE")
    show.add_argument("--json", action="store_true", help="one JSON array of the events")
    show.add_argument("--root", metavar="DIR")


def _format(event: dict[str, object], color: bool) -> str:
    from eidolons._text import printable

    kind = str(event.get("event", "?"))
    flag = "  "
    if kind == "verify_fail":
        flag = "!!"
    elif kind == "verify_pass":
        flag = "ok"
    parts = [
        flag,
        str(event.get("ts", "?")),
        f"{kind:<11}",
        f"{event.get('from', '?')} -> {event.get('to', '?')}",
        str(event.get("performative", "?")),
        f"msg={event.get('message_id', '?')}",
    ]
    if "gate" in event:
        parts.append(f"gate={event['gate']}")
    if kind == "verify_fail":
        parts.append(f"{event.get('verify_failure_code', '?')} ({event.get('decision', '?')})")
    line = printable(" ".join(parts))
    if color and kind == "verify_fail":
        line = f"\x1b[31m{line}\x1b[0m"
    return line


def run(args: argparse.Namespace) -> int:
    from eidolons.commands._common import error, print_json, use_color
    from eidolons.config import find_root
    from eidolons.errors import EidolonsError
    from eidolons.trace import read_events, thread_file_name, thread_trace_path

    try:
        candidate = Path(args.thread)
        if candidate.suffix == ".jsonl" or candidate.is_file():
            path = candidate
        else:
            if thread_file_name(args.thread) != args.thread:
                return error(f"{args.thread!r} is not a valid thread id")
            path = thread_trace_path(find_root(args.root), args.thread)
        if not path.is_file():
            return error(f"no trace at {path}", 1)
        events = []
        color = use_color(sys.stdout)
        for line in read_events(path):
            if line.event is None:
                print(
                    f"eidolons: {path}:{line.lineno}: damaged line skipped: {line.error}",
                    file=sys.stderr,
                )
                continue
            events.append(line.event)
            if not args.json:
                print(_format(line.event, color))
        if args.json:
            print_json(events)
    except EidolonsError as exc:
        return error(str(exc))
    return 0
