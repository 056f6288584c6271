"""``eidolons trace list``: the project's threads, newest (latest event) first, with hop
and event counts and their refusals (warned failures counted apart)."""

from __future__ import annotations

import argparse
import sys

from eidolons._text import plural, printable
from eidolons.cli.common import print_json, project_root

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def thread_summary(thread_id: str, events: list[dict[str, Any]], damaged: int) -> dict[str, Any]:
    stamps = sorted(e["ts"] for e in events if isinstance(e.get("ts"), str))
    fails = [e for e in events if e.get("event") == "verify_fail"]
    refused = [e for e in fails if e.get("decision") == "refused"]
    found = (e.get("verify_failure_code") for e in refused)
    codes = list(dict.fromkeys(c for c in found if isinstance(c, str)))  # first seen first
    return {
        "thread_id": thread_id,
        "hops": len({e["message_id"] for e in events if isinstance(e.get("message_id"), str)}),
        "events": len(events),
        "first_ts": stamps[0] if stamps else None,
        "last_ts": stamps[-1] if stamps else None,
        "refusals": len(refused),
        "refusal_codes": codes,
        "warned": len(fails) - len(refused),
        "damaged_lines": damaged,
    }


def run_list(args: argparse.Namespace) -> int:
    from eidolons.trace.store import open_store

    root = project_root(args.root)
    if isinstance(root, int):
        return root
    rows = []
    with open_store(root) as store:
        for thread in store.threads():
            read = [line.event for line in store.iter_thread(thread)]
            events = [e for e in read if e is not None]
            rows.append(thread_summary(thread, events, len(read) - len(events)))
    rows.sort(key=lambda r: r["thread_id"])
    rows.sort(key=lambda r: r["last_ts"] or "", reverse=True)
    if args.json:
        print_json(rows)
        return 0
    if not rows:
        print("no threads traced in this project", file=sys.stderr)
        return 0
    out = [f"{'THREAD':<38} {'HOPS':>4} {'EVENTS':>6}  {'LAST EVENT':<24}  REFUSALS"]
    for r in rows:
        refusals = "-"
        if r["refusals"]:
            refusals = f"{r['refusals']} ({', '.join(r['refusal_codes'])})"
        note = f"  [{plural(r['damaged_lines'], 'damaged line')}]" if r["damaged_lines"] else ""
        out.append(
            f"{r['thread_id']:<38} {r['hops']:>4} {r['events']:>6}  {r['last_ts'] or '?':<24}  "
            f"{refusals}{note}"
        )
    sys.stdout.write("".join(printable(line) + "\n" for line in out))
    return 0
