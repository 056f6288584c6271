"""``trace verify`` over traces: the hash chain and each verdict's receipt (ADR 0035).

For each trace (a ``.jsonl`` file or a thread of the configured store):

- the chain, by :func:`eidolons.ecl.tracechain.verify_chain` over the exact line bytes;
- for each line that reads as an orchestrator verdict, whether the receiver gate counts
  it (the one record rule, :func:`eidolons.trace.store.uncounted_reason`: on PostgreSQL a
  row the store did not stamp as a verdict is marked ``counted: false`` with the reason,
  and is no verdict on record for any hop); for each counted one, its receipt: ``valid``
  (trusted by the one receipt rule, :func:`eidolons.keys.receipts.trust_receipt`: an
  orchestrator key of the trust store active now, for a project the store pins for that
  key; and its statement says what the line says: message, verdict, envelope bytes,
  payload digest), ``none`` (no receipt), or ``invalid: <why>``. Without a trust store
  every receipt is ``unchecked``.

- for a JSONL file, its tail against the head this host recorded at the last append
  (:mod:`eidolons.keys.heads`, ADR 0037): a cut or rewritten tail is a break; no head is
  reported as "no head anchor on this host", not as complete.

A broken chain or an invalid receipt is a failure (exit 3 in block mode).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eidolons.ecl.tracechain import verify_chain
from eidolons.errors import InputError
from eidolons.keys.store import TrustStore
from eidolons.trace.log import TraceLine, read_snapshot

TYPE_CHECKING = False
if TYPE_CHECKING:
    from eidolons.trace.store import TraceStore


class TraceSnapshot:
    """One trace read once (ADR 0096): ``raw``, its non-blank lines' exact bytes (what the
    hash chain covers), and ``lines``, the same bytes decoded (the events whose verdicts
    are judged); ``file``, the JSONL file it was read from (None for PostgreSQL), and
    ``head``, this host's head anchor for it (ADR 0037), read *before* the bytes: a gate
    appending meanwhile leaves the head at or behind what was read, never past it."""

    __slots__ = ("file", "head", "kind", "lines", "name", "raw", "stamps")

    def __init__(
        self,
        kind: str,
        name: str,
        raw: list[bytes],
        lines: list[TraceLine],
        file: Path | None,
        head: Any = None,
        stamps: list[Any] | None = None,
    ) -> None:
        self.kind = kind  # "file" (a .jsonl PATH) or "thread" (a thread id of the store)
        self.name = name
        self.raw = raw
        self.lines = lines
        self.file = file
        self.head = head  # what keys.heads.recorded gave, or the HeadError it raised
        self.stamps = stamps  # beside each raw line, what the store keeps (None: files)

    @property
    def key(self) -> tuple[str, str]:
        return self.kind, self.name


def _head_of(file: Path) -> Any:
    from eidolons.keys.heads import HeadError, recorded

    try:
        return recorded(file)
    except HeadError as exc:
        return exc


def snapshot_file(path: Path, kind: str = "file", name: str | None = None) -> TraceSnapshot:
    """A ``.jsonl`` trace: this host's head for it, then its bytes in one read. Raises
    :class:`InputError`."""
    head = _head_of(path)
    raw, lines = read_snapshot(path)
    return TraceSnapshot(kind, str(path) if name is None else name, raw, lines, path, head)


def snapshot_thread(store: TraceStore, thread: str) -> TraceSnapshot:
    """A thread of the configured store: a JSONL file read as :func:`snapshot_file`; a
    PostgreSQL thread by one query, each line with its row's stamp and judged as its
    ``iter_thread`` judges it."""
    from eidolons.trace.store import TraceReadError, judged_line

    if store.kind == "jsonl":
        try:
            return snapshot_file(Path(store.location(thread)), "thread", thread)
        except InputError as exc:  # as the store reports it
            raise TraceReadError(str(exc)) from None
    rows = list(store.iter_stamped(thread))
    raw = [r for r, _ in rows]
    lines = [judged_line(r, n, stamp) for n, (r, stamp) in enumerate(rows, 1)]
    return TraceSnapshot("thread", thread, raw, lines, None, stamps=[s for _, s in rows])


def receipt_status(event: dict[str, Any], trust: TrustStore | None, now: str) -> str:
    receipt = event.get("receipt")
    if receipt is None:
        return "none"
    if trust is None:
        return "unchecked (no trust store)"
    from eidolons.keys.receipts import trust_receipt

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
    """The trace against the head this host recorded for its file (ADR 0037); None for a
    store that is not a file (PostgreSQL keeps its own append-only guarantees)."""
    if snap.file is None:
        return None
    from eidolons.keys.heads import HeadError, check_head

    if isinstance(snap.head, HeadError):
        return {"state": "unreadable", "ok": False, "reason": str(snap.head)}
    return check_head(snap.raw, snap.head)


def verify_trace(snap: TraceSnapshot, trust: TrustStore | None, now: str) -> dict[str, Any]:
    """The chain and receipts of one trace, as ``trace verify --json`` reports them; for a
    JSONL trace, its tail against this host's head anchor too: a cut or rewritten tail
    fails the trace (``head``), whatever the links say."""
    import json

    from eidolons.trace.store import NO_STAMP, looks_like_verdict, not_counted

    lines = snap.raw
    chain = verify_chain(lines)
    head = head_status(snap)
    receipts: list[dict[str, Any]] = []
    for n, raw in enumerate(lines, start=1):
        try:
            event = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if isinstance(event, dict) and looks_like_verdict(event):
            stamp = snap.stamps[n - 1] if snap.stamps is not None else NO_STAMP
            why = not_counted(raw, event, stamp)
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
