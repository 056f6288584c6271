"""``trace verify`` over traces: the hash chain and each verdict's receipt (ADR 0035).

For each trace (a ``.jsonl`` file or a thread of the configured store):

- the chain, by :func:`eidolons.ecl.tracechain.verify_chain` over the exact line bytes;
- for each orchestrator verdict line, its receipt: ``valid`` (signed by an orchestrator
  key of the trust store that is active now, and its statement says what the line says:
  message, verdict, envelope bytes, payload digest), ``none`` (no receipt), or
  ``invalid: <why>``. Without a trust store every receipt is ``unchecked``.

- for a JSONL file, its tail against the head this host recorded at the last append
  (:mod:`eidolons.keys.heads`, ADR 0037): a cut or rewritten tail is a break; no head is
  reported as "no head anchor on this host", not as complete.

A broken chain or an invalid receipt is a failure (exit 3 in block mode).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from eidolons.ecl.tracechain import verify_chain
from eidolons.keys.store import ORCHESTRATOR, TrustStore


def receipt_status(event: dict[str, Any], trust: TrustStore | None, now: str) -> str:
    receipt = event.get("receipt")
    if receipt is None:
        return "none"
    if trust is None:
        return "unchecked (no trust store)"
    from eidolons.ecl.receipt import PAYLOAD_TYPE, parse_statement
    from eidolons.keys.dsse import DsseError, verify_envelope

    known = {k.keyid: k.public_raw for k in trust.keys if k.role == ORCHESTRATOR}
    try:
        body, accepted = verify_envelope(receipt, known, [PAYLOAD_TYPE])
    except DsseError as exc:
        return f"invalid: malformed receipt ({exc})"
    if not accepted:
        return "invalid: not signed by an orchestrator key of the trust store"
    key = trust.get(accepted[0])
    status = key.status(now) if key is not None else "unknown"
    if status != "active":
        return f"invalid: signed by orchestrator key {accepted[0][:16]}, {status}"
    st = parse_statement(body)
    if st is None:
        return "invalid: not an eidolons receipt statement"
    pred = st["predicate"]
    for field in ("message_id", "verdict", "envelope_sha256"):
        if pred.get(field) != event.get(field):
            return f"invalid: the receipt's {field} differs from the line's"
    payload = event.get("payload_sha256")
    if payload is not None and st["subject"][0]["digest"]["sha256"] != payload:
        return "invalid: the receipt names other payload bytes than the line"
    return "valid"


def head_status(lines: list[bytes], file: Path | None) -> dict[str, Any] | None:
    """The trace against the head this host recorded for ``file`` (ADR 0037); None for a
    store that is not a file (PostgreSQL keeps its own append-only guarantees)."""
    if file is None:
        return None
    from eidolons.keys.heads import HeadError, check_head, recorded

    try:
        head = recorded(file)
    except HeadError as exc:
        return {"state": "unreadable", "ok": False, "reason": str(exc)}
    return check_head(lines, head)


def verify_trace(
    name: str,
    raw_lines: Iterable[bytes],
    trust: TrustStore | None,
    now: str,
    file: Path | None = None,
) -> dict[str, Any]:
    """The chain and receipts of one trace, as ``trace verify --json`` reports them; with
    ``file`` (a JSONL trace), its tail against this host's head anchor too: a cut or
    rewritten tail fails the trace (``head``), whatever the links say."""
    import json

    lines = list(raw_lines)
    chain = verify_chain(lines)
    head = head_status(lines, file)
    receipts: list[dict[str, Any]] = []
    for n, raw in enumerate(lines, start=1):
        try:
            event = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if (
            isinstance(event, dict)
            and event.get("gate") == "orchestrator"
            and event.get("event") in ("verify_pass", "verify_fail")
        ):
            receipts.append(
                {
                    "line": n,
                    "message_id": event.get("message_id"),
                    "verdict": event.get("verdict"),
                    "receipt": receipt_status(event, trust, now),
                }
            )
    invalid = sum(1 for r in receipts if r["receipt"].startswith("invalid"))
    return {
        "trace": name,
        **chain.to_dict(),
        "head": head,
        "receipts": receipts,
        "invalid_receipts": invalid,
        "ok": chain.ok and invalid == 0 and (head is None or bool(head["ok"])),
    }
