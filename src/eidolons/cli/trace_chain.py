"""The chain verbs of ``eidolons trace``: ``show``, ``graph``, ``verify``, ``cost``, ``otel``,
``report``. For envelope PATHs, the upstream nexus's JSON shapes, flags and exit codes;
``show`` over thread ids or ``.jsonl`` traces lists the events themselves."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from eidolons._text import plural, printable
from eidolons.cli.common import error, print_json, project_root, use_color

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from eidolons.trace.chain import Hop
    from eidolons.trace.chain.sources import Collected
    from eidolons.trace.store import TraceStore
    from eidolons.trace.verify import TraceSnapshot

EXIT_NOTHING = 1
EXIT_BLOCKED = 3
FOLLOW_POLL_S = 0.2
OK_VERDICTS = ("pass", "unverifiable")  # as upstream: anything else is a failure


def run_chain(args: argparse.Namespace) -> int:
    from eidolons.io.config import Limits, verify_mode
    from eidolons.trace.chain import sources

    verb = args.trace_command
    root = project_root(args.root)
    if isinstance(root, int):
        return root
    mode = verify_mode(getattr(args, "mode", None), block=getattr(args, "block", False))
    bad = _bad_option(args)
    if bad is not None:
        return error(bad)
    from eidolons.trace.store import open_store

    with open_store(root) as store:
        collected = sources.collect(args.paths, store, Limits.from_env(os.environ))
        unshown = _unshown(args.paths, collected) if verb == "show" else None
        if unshown is not None:
            return error(f"{unshown}; nothing shown")
        if verb == "show" and args.follow:
            if not collected.trace_only or len(collected.trace_files) + len(collected.threads) != 1:
                _problems(collected)
                return error("--follow takes one thread id or .jsonl trace")
            return _follow(collected, root, args)
        if verb == "show" and collected.trace_only:
            return _show_events(collected, store, args.json)
        if verb == "verify" and store.kind == "jsonl":
            _deleted_traces(args.paths, collected, store)
        if collected.empty and verb == "verify":  # a gate's vocabulary: 2, one line
            why = "; ".join(p.removesuffix("; skipped") for p in collected.problems)
            collected.problems.clear()
            return error(printable(f"nothing to verify: {why or 'no trace or envelope found'}"))
        if collected.empty:
            _problems(collected)
            return error("no trace or envelope found to read", _nothing_code(args))
        if verb == "verify":  # each trace read once: its events and its chain (ADR 0012)
            from eidolons.trace.verify import snapshot_file, snapshot_thread

            read = [snapshot_file(p) for p in collected.trace_files]
            read += [snapshot_thread(store, t) for t in collected.threads]
            hops = sources.hops(collected, store, {snap.key: snap.lines for snap in read})
            chains, trusted = _chains(collected, read, root)
        else:
            hops, chains, trusted = sources.hops(collected, store), [], False
    _problems(collected)
    if verb == "verify":
        return _verify(collected, hops, root, mode, args.json, chains, trusted)
    if not hops:
        return error("no hand-off found in what was read", EXIT_NOTHING)
    return _report(hops, args, root) if verb == "report" else _view(hops, args)


def _bad_option(args: argparse.Namespace) -> str | None:
    """What is wrong with ``show``'s ``--follow`` options or ``cost``'s ``--budget``."""
    if args.trace_command == "show":
        if not args.follow and (args.max_events is not None or args.idle_timeout is not None):
            return "--max-events and --idle-timeout go with --follow"
        if args.max_events is not None and args.max_events < 1:
            return "--max-events must be at least 1"
        if args.idle_timeout is not None and not args.idle_timeout >= 0:
            return "--idle-timeout must be a number of seconds, 0 or more"
    if getattr(args, "budget", None) is not None and args.budget < 0:
        return "--budget must be 0 or more"
    return None


def _unshown(paths: list[str], collected: Collected) -> str | None:
    """Why ``show`` shows nothing: a ``.jsonl`` that is not a trace, or a file named on
    the command line that is neither a trace nor an envelope."""
    from eidolons.trace.chain.sources import not_a_trace

    for path in collected.trace_files:
        why = not_a_trace(path)
        if why is not None:
            return f"{path}: not a trace ({why})"
    named = {a for a in paths if os.path.isfile(a)}
    for env in collected.envelopes:  # a file named as such, not found in a directory
        if env.path in named and env.error is not None:
            path = Path(env.path)
            is_trace = path.stat().st_size > 0 and not_a_trace(path) is None
            why = "a trace is read from a .jsonl file" if is_trace else env.error
            return f"{env.path}: not a trace or an envelope ({why})"
    return None


def _deleted_traces(paths: list[str], collected: Collected, store: TraceStore) -> None:
    """A trace named by thread id or ``.jsonl`` path that is gone, while this host holds
    its head (ADR 0012), is verified as an empty trace: its head then reports the cut."""
    from eidolons.keys.host import HeadError, recorded
    from eidolons.trace.log import thread_file_name

    for arg in paths:
        if os.path.exists(arg):
            continue
        is_thread = thread_file_name(arg) == arg and arg not in collected.threads
        file = Path(store.location(arg)) if is_thread else Path(arg)
        if not (is_thread or arg.endswith(".jsonl")):
            continue
        try:
            if recorded(file) is None:
                continue
        except HeadError:
            pass  # an unreadable head: verified, and failed, as one
        if is_thread:
            collected.threads.append(arg)
        else:
            collected.trace_files.append(file)
        collected.problems = [p for p in collected.problems if not p.startswith(f"{arg}: ")]


def _nothing_code(args: argparse.Namespace) -> int:
    """2 when every PATH was neither a file nor a valid thread id (a usage slip), else 1."""
    from eidolons.trace.log import thread_file_name

    slips = all(not os.path.exists(a) and thread_file_name(a) != a for a in args.paths)
    return 2 if slips else EXIT_NOTHING


def _problems(collected: Collected) -> None:
    for problem in collected.problems:
        print(f"eidolons: {printable(problem)}", file=sys.stderr)
    collected.problems.clear()


def _out(lines: list[str]) -> None:
    sys.stdout.write("".join(f"{line}\n" for line in lines))


# -- show over traces: the events themselves
def event_line(event: dict[str, Any], color: bool, hop: Hop | None = None) -> str:
    """One event; a receiver's decision for ``hop`` under another name than its
    addressee's (:meth:`Hop.by_addressee`) is marked as a probe, not as its refusal."""
    from eidolons.trace.chain import Decision
    from eidolons.trace.store import NOT_COUNTED, WRITTEN_BY

    kind = str(event.get("event", "?"))
    uncounted = event.get(NOT_COUNTED)  # set by the store's reader (the one record rule)
    decision = Decision(event)
    probe = hop is not None and decision.gate == "receiver" and not hop.by_addressee(decision)
    flag = "??" if uncounted else {"verify_fail": "!!", "verify_pass": "ok"}.get(kind, "  ")
    flag = ".." if probe and not uncounted else flag
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
    if probe:
        parts.append(f"probe by {decision.receiver} (not the addressee)")
    if uncounted:
        parts.append(f"NOT COUNTED: {uncounted}")
    if event.get(WRITTEN_BY):
        parts.append(f"host={event[WRITTEN_BY]}")
    line = printable(" ".join(parts))
    if color and kind == "verify_fail" and not probe:
        line = f"\x1b[31m{line}\x1b[0m"
    return line


def _show_events(collected: Collected, store: TraceStore, as_json: bool) -> int:
    from eidolons.trace.chain import hops_from_events
    from eidolons.trace.chain.sources import trace_events

    events = trace_events(collected, store)
    _problems(collected)
    if as_json:
        print_json(events)
    else:
        color = use_color(sys.stdout)
        hops = {h.message_id: h for h in hops_from_events(events)}
        _out([event_line(e, color, hops.get(str(e.get("message_id")))) for e in events])
    return 0


def _follow(collected: Collected, root: Path, args: argparse.Namespace) -> int:
    """Print the trace's events, then new ones as they are appended, until ``--max-events``
    events were printed, ``--idle-timeout`` seconds pass without one, or Ctrl-C."""
    from eidolons.trace.chain import Hop
    from eidolons.trace.store import open_store

    path = collected.trace_files[0] if collected.trace_files else None
    name = str(path) if path else collected.threads[0]
    store = open_store(root, file=path)  # a thread: the project's configured store
    color = use_color(sys.stdout)
    hops: dict[str, Hop] = {}  # message id -> its hop, described as the events arrive
    printed, offset, idle_since = 0, 0, time.monotonic()
    try:
        while args.max_events is None or printed < args.max_events:
            lines, offset = store.read_new(name if path is None else None, offset)
            for line in lines:
                if line.event is None:
                    print(f"eidolons: {name}: damaged line skipped: {line.error}", file=sys.stderr)
                    continue
                if args.json:  # one event per line (JSON Lines), as it arrives
                    sys.stdout.write(json.dumps(line.event, ensure_ascii=True) + "\n")
                else:
                    mid = str(line.event.get("message_id"))
                    hop = hops.setdefault(mid, Hop(mid))
                    hop.describe_from_event(line.event)
                    sys.stdout.write(event_line(line.event, color, hop) + "\n")
                printed += 1
                if args.max_events is not None and printed >= args.max_events:
                    break
            sys.stdout.flush()
            if lines:
                idle_since = time.monotonic()
            elif args.idle_timeout is not None and time.monotonic() - idle_since >= (
                args.idle_timeout
            ):
                break
            elif args.max_events is None or printed < args.max_events:
                time.sleep(FOLLOW_POLL_S)
    except KeyboardInterrupt:
        pass
    finally:
        store.close()
    return 0


# -- the nexus's views
def _view(hops: list[Hop], args: argparse.Namespace) -> int:
    """``show``, ``graph``, ``cost`` or ``otel`` of the hops, as JSON or text."""
    from eidolons.trace.chain import render, views

    verb = args.trace_command
    fmt = getattr(args, "format", None) or ("json" if args.json or verb == "otel" else "text")
    if fmt not in ("json", "text"):
        sys.stdout.write(render.RENDERERS[fmt](hops))
        return 0
    doc: Any
    text: list[str] = []
    if verb == "otel":
        doc = views.otel_doc(hops, args.otel_version)
    elif verb == "cost":
        doc = views.cost_doc(hops, args.budget)
        text = views.cost_text(doc)
    elif verb == "show":
        doc, text = views.show_doc(hops), views.show_text(hops)
    else:
        doc, text = views.graph_doc(hops), views.graph_text(hops)
    if fmt == "json":
        print_json(doc)
    else:
        _out(text)
    return EXIT_BLOCKED if verb == "cost" and doc["budget_exceeded"] else 0


def _report(hops: list[Hop], args: argparse.Namespace, root: Path) -> int:
    from eidolons.ecl.events import TOOL, utc_now
    from eidolons.io.files import write_bytes
    from eidolons.trace.chain.evidence import check_receipts
    from eidolons.trace.chain.report import render_report
    from eidolons.trace.chain.views import thread_of

    trusted, problem = check_receipts(hops, root)
    if problem:
        print(f"eidolons: {printable(problem)}", file=sys.stderr)
    page = render_report(
        hops, thread=thread_of(hops), generated=utc_now(), tool=TOOL, trusted=trusted
    )
    if not args.output:
        sys.stdout.write(page)
        return 0
    try:
        write_bytes(args.output, page.encode("utf-8"))
    except OSError as exc:
        return error(f"cannot write {args.output}: {exc.strerror or exc}")
    print(f"report: {printable(args.output)} ({len(hops)} hops)", file=sys.stderr)
    return 0


# -- verify
def _chains(
    collected: Collected, read: list[TraceSnapshot], root: Path
) -> tuple[list[dict[str, Any]], bool]:
    """Traces read (files, threads): the hash chain and each verdict's receipt; and
    whether the project has a trust store (then only a valid receipt is evidence). A
    trust store that cannot be read counts as one: no receipt checks, so none is valid."""
    from eidolons.ecl.events import utc_now
    from eidolons.keys.store import TrustStoreError, load_trust_store
    from eidolons.trace.verify import verify_trace

    unreadable = False
    try:
        trust = load_trust_store(root)
    except TrustStoreError as exc:
        collected.problems.append(f"{exc}; receipts not checked")
        trust, unreadable = None, True
    now = utc_now()
    return [verify_trace(snap, trust, now) for snap in read], trust is not None or unreadable


def _verify(
    collected: Collected,
    hops: list[Hop],
    root: Path,
    mode: str,
    as_json: bool,
    chains: list[dict[str, Any]],
    trusted: bool,
) -> int:
    """Envelopes: the orchestrator gate in warn mode (no trace written). Hops known only
    from a trace: the latest orchestrator verdict on record and its line's receipt (with a
    trust store, only a ``valid`` receipt is evidence). Traces: hash chain and receipts."""
    results = _envelope_rows(collected, hops, root) + _recorded_rows(hops, chains, trusted)
    for row in results:
        row.setdefault("ok", row["verdict"] in OK_VERDICTS)
    failed = sum(1 for r in results if not r["ok"])
    refused = sum(1 for r in results if r["refused_by"])
    for r in results:
        r["ok"] = r["ok"] and not r["refused_by"]
    broken = sum(1 for c in chains if not c["ok"])
    if as_json:
        print_json(
            {
                "mode": mode,
                "total": len(results),
                "failed": failed,
                "refused": refused,
                "all_pass": failed == 0 and refused == 0 and broken == 0,
                "results": results,
                "chains": chains,
            }
        )
    else:
        _out([printable(line) for line in _verify_lines(results, failed, refused)])
        _out([printable(line) for line in _chain_lines(chains)])
    if refused:  # a recorded refusal is a fact, not a re-judgement: in any mode
        return EXIT_BLOCKED
    return EXIT_BLOCKED if mode == "block" and (failed or broken) else 0


def _verify_lines(results: list[dict[str, Any]], failed: int, refused: int) -> list[str]:
    lines = []
    for r in results:
        where = r["envelope"] or f"msg={r.get('message_id')}"
        if r["envelope"] is None and r.get("evidence"):
            where += f" (on record, evidence {r['evidence']}, receipt {r['receipt']})"
        glyph = "✓" if r["ok"] else "✗"
        lines.append(f"  {glyph} [{r['verdict']}] {r['from']} → {r['to']}  {where}")
        if r["refused_by"]:
            lines.append(
                f"      refused by {r['refused_by']['receiver']}: {r['refused_by']['code']}"
            )
        lines += [
            f"      probe by {p['receiver']}: {p['code'] or p['verdict']}" for p in r["probes"]
        ]
    total = len(results)
    counted = plural(total, "envelope")  # "3 envelopes", "1 envelope"
    if failed:
        lines.append(f"{failed}/{counted} failed integrity")
    if refused:
        lines.append(f"{refused}/{total} refused by {'its' if total == 1 else 'their'} addressee")
    unverifiable = sum(1 for r in results if r["verdict"] == "unverifiable")
    if not (failed or refused or unverifiable):
        lines.append(f"all {counted} verified" if total != 1 else "1 envelope verified")
    elif not (failed or refused):
        lines.append(
            f"none of {counted} failed integrity; {unverifiable} unverifiable (no digest to check)"
        )
    return lines


def _receiver_side(hop: Hop | None) -> dict[str, Any]:
    """The receivers' side of a ``trace verify`` row (:meth:`Hop.receiver_side`)."""
    side = hop.receiver_side("receiver") if hop is not None else {"refused": None, "probes": []}
    return {"refused_by": side["refused"], "probes": side["probes"]}


def _envelope_rows(collected: Collected, hops: list[Hop], root: Path) -> list[dict[str, Any]]:
    """Each envelope read, judged again: in chain order, those that did not parse last."""
    from eidolons.gates.verify import verify_parsed
    from eidolons.io.config import Limits, hmac_key

    limits, key = Limits.from_env(os.environ), hmac_key()
    place = {h.envelope: i for i, h in enumerate(hops) if h.envelope is not None}
    rows = []
    for env in sorted(collected.envelopes, key=lambda e: place.get(e.path, len(place))):
        row: dict[str, Any] = {"verdict": "malformed", "from": "?", "to": "?", "envelope": env.path}
        at = place.get(env.path)
        row.update(_receiver_side(hops[at] if at is not None else None))
        parsed = env.envelope
        if parsed is None:
            row["message"] = env.error
        else:
            result = verify_parsed(
                parsed,
                Path(env.path),
                envelope_sha256=env.sha256 or "",
                root=root,
                limits=limits,
                key=key,
            )
            row.update(
                verdict=str(result.verdict),
                **{"from": parsed.sender.eidolon, "to": parsed.recipient.eidolon},
                message_id=parsed.message_id,
                message=env.unverifiable or result.message,
            )
        rows.append(row)
    return rows


def _recorded_rows(
    hops: list[Hop], chains: list[dict[str, Any]], trusted: bool
) -> list[dict[str, Any]]:
    """Each hop known from a trace only: its latest orchestrator verdict on record."""
    receipts = {  # message id -> receipt of its latest counted verdict line
        str(entry["message_id"]): str(entry["receipt"])
        for c in chains
        for entry in c["receipts"]
        if entry["counted"]  # a line the gate would not count is no verdict on record
    }
    rows = []
    for hop in hops:
        if hop.envelope is not None:
            continue
        latest = hop.latest("orchestrator")
        receipt = receipts.get(hop.message_id) if latest else None
        row: dict[str, Any] = {
            "verdict": latest.verdict if latest else "unrecorded",
            "from": hop.sender or "?",
            "to": hop.recipient or "?",
            "envelope": None,
            "message_id": hop.message_id,
            "message": "latest orchestrator verdict on record"
            if latest
            else "no orchestrator verdict on record",
            "evidence": (latest.evidence or "unsigned") if latest else None,
            "receipt": receipt,
            **_receiver_side(hop),
        }
        if trusted and latest and receipt != "valid":
            row["ok"] = False
            row["message"] = f"latest orchestrator verdict on record, receipt {receipt}"
        rows.append(row)
    return rows


def _chain_lines(chains: list[dict[str, Any]]) -> list[str]:
    out = []
    for c in chains:
        brk = c["first_break"]
        if brk is not None:
            out.append(f"  ✗ chain BROKEN at line {brk['line']}: {brk['reason']}  {c['trace']}")
        else:
            out.append(f"  ✓ chain {c['state']} ({c['lines']} lines)  {c['trace']}")
        head = c.get("head")
        if head is not None and not head["ok"]:
            out.append(f"  ✗ {head['reason']}  {c['trace']}")
        elif head is not None:
            if head["state"] == "anchored":
                note = f"head anchored on this host at seq {head['seq']}"
                if head["after"]:
                    note += f" ({head['after']} later lines not anchored)"
            else:
                note = f"{head['reason']}: a cut tail would not show"
            out.append(f"    {'✓' if head['state'] == 'anchored' else '!'} {note}")
        for r in c["receipts"]:
            glyph = "✗" if r["receipt"].startswith("invalid") else " "
            if not r["counted"]:
                out.append(
                    f"    ! line {r['line']} [{r['verdict']}] msg={r['message_id']}: "
                    f"not counted ({r['not_counted']})"
                )
                continue
            out.append(
                f"    {glyph} line {r['line']} [{r['verdict']}] msg={r['message_id']}: "
                f"receipt {r['receipt']}"
            )
    return out
