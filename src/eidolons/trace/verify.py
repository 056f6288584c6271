"""``trace verify`` (ADR 0012): for each trace, the hash chain over the exact line bytes;
for each orchestrator verdict line, whether the gate counts it (the store's readers judge
it) and, if so, its receipt (``valid``, ``none``, ``invalid: <why>``, or ``unchecked``
without a trust store); for a JSONL file, its tail against this host's head anchor (ADR
0037). A broken chain, an invalid receipt or a cut tail is a failure (exit 3 in block
mode).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eidolons.ecl.events import verify_chain
from eidolons.errors import InputError
from eidolons.keys.host import HeadError, check_head, recorded
from eidolons.keys.receipts import trust_receipt
from eidolons.keys.store import TrustStore
from eidolons.trace.log import TraceLine, read_snapshot
from eidolons.trace.store import (
    NOT_COUNTED,
    TraceReadError,
    TraceStore,
    judged_line,
    looks_like_verdict,
)


class TraceSnapshot:
    """One trace read once (ADR 0012): ``raw``, its non-blank lines' exact bytes (what the
    hash chain covers), and ``lines``, the same bytes as the store's readers judge them
    (:func:`eidolons.trace.store.judged_line`); ``file``, the JSONL file (None for
    PostgreSQL); ``head``, this host's head anchor for it (ADR 0012), read before the
    bytes, so a concurrent append leaves it at or behind what was read."""

    __slots__ = ("file", "head", "kind", "lines", "name", "raw")

    def __init__(
        self,
        kind: str,
        name: str,
        raw: list[bytes],
        lines: list[TraceLine],
        file: Path | None,
        head: Any = None,
    ) -> None:
        self.kind = kind  # "file" (a .jsonl PATH) or "thread" (a thread id of the store)
        self.name = name
        self.raw = raw
        self.lines = lines
        self.file = file
        self.head = head  # what keys.host.recorded gave, or the HeadError it raised

    @property
    def key(self) -> tuple[str, str]:
        return self.kind, self.name


def snapshot_file(path: Path, kind: str = "file", name: str | None = None) -> TraceSnapshot:
    """A ``.jsonl`` trace: this host's head for it, then its bytes in one read. Raises
    :class:`InputError`."""
    try:
        head: Any = recorded(path)
    except HeadError as exc:
        head = exc
    raw, lines = read_snapshot(path, judged_line)
    return TraceSnapshot(kind, str(path) if name is None else name, raw, lines, path, head)


def snapshot_thread(store: TraceStore, thread: str) -> TraceSnapshot:
    """A thread of the configured store: a JSONL file read as :func:`snapshot_file`; a
    PostgreSQL thread by one query, each line with its row's stamp and judged as its
    ``iter_thread`` judges it."""
    if store.kind == "jsonl":
        try:
            return snapshot_file(Path(store.location(thread)), "thread", thread)
        except InputError as exc:  # as the store reports it
            raise TraceReadError(str(exc)) from None
    rows = list(store.iter_stamped(thread))
    raw = [r for r, _, _ in rows]
    lines = [judged_line(r, n, stamp, who) for n, (r, stamp, who) in enumerate(rows, 1)]
    return TraceSnapshot("thread", thread, raw, lines, None)


def receipt_status(event: dict[str, Any], trust: TrustStore | None, now: str) -> str:
    receipt = event.get("receipt")
    if receipt is None:
        return "none"
    if trust is None:
        return "unchecked (no trust store)"
    trusted = trust_receipt(receipt, trust, now)  # the one rule, as the receiver applies it
    st = trusted.statement
    if st is None:
        return f"invalid: the receipt {trusted.why}"
    pred = st["predicate"]
    for field in ("message_id", "verdict", "envelope_sha256"):
        if pred.get(field) != event.get(field):
            return f"invalid: the receipt's {field} differs from the line's"
    payload = event.get("payload_sha256")
    if payload is not None and st["subject"][0]["digest"]["sha256"] != payload:
        return "invalid: the receipt names other payload bytes than the line"
    return "valid"


def head_status(snap: TraceSnapshot) -> dict[str, Any] | None:
    """The trace against the head this host recorded for its file (ADR 0012); None for a
    store that is not a file (PostgreSQL keeps its own append-only guarantees)."""
    if snap.file is None:
        return None
    if isinstance(snap.head, HeadError):
        return {"state": "unreadable", "ok": False, "reason": str(snap.head)}
    return check_head(snap.raw, snap.head)


def verify_trace(snap: TraceSnapshot, trust: TrustStore | None, now: str) -> dict[str, Any]:
    """The chain and receipts of one trace, as ``trace verify --json`` reports them; a
    JSONL trace's tail is checked against this host's head anchor too (``head``)."""
    chain = verify_chain(snap.raw)
    head = head_status(snap)
    receipts: list[dict[str, Any]] = []
    for n, line in enumerate(snap.lines, start=1):
        event = line.event
        if event is None or not looks_like_verdict(event):
            continue
        why = event.get(NOT_COUNTED)  # the reader's judgement (store.judged_line)
        entry = {
            "line": n,
            "message_id": event.get("message_id"),
            "verdict": event.get("verdict"),
            "counted": why is None,
            "receipt": receipt_status(event, trust, now) if why is None else "not checked",
        }
        if why is not None:
            entry["not_counted"] = why
        receipts.append(entry)
    invalid = sum(1 for r in receipts if r["receipt"].startswith("invalid"))
    return {
        "trace": snap.name,
        **chain.to_dict(),
        "head": head,
        "receipts": receipts,
        "invalid_receipts": invalid,
        "ok": chain.ok and invalid == 0 and (head is None or bool(head["ok"])),
    }
