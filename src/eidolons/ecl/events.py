"""The trace-event vocabulary and :func:`trace_event`, the one builder of every event.

Pure (the clock aside). The keys every event shares are spelled and ordered once (schema
``data/schemas/handoff-event.v1.json``): ``ts``, ``event``, ``message_id``, ``thread_id``
(``unknown`` when absent), ``from``, ``to``, ``performative`` (omitted when the envelope
cannot be parsed), ``integrity_method``, the hop (:func:`hop_fields`), the caller's
fields, ``gate`` and its fields, ``duration_ms``, the tags and paths checked (ADR 0004,
0021), the tool, then ``evidence`` or ``reason``.

The trace's hash chain: each line of a thread carries ``seq`` (1-based) and ``prev`` (the
SHA-256 of the previous line's exact bytes, 64 zeros for the first); the JSONL writer and
the PostgreSQL store both link with :func:`next_link` and :func:`chained`.

Gate receipts (ADR 0011): a DSSE envelope (``application/vnd.in-toto+json``) over the
in-toto Statement of :func:`statement_bytes`: ``subject`` the payload (``artifact.path``
and the SHA-256 of the bytes hashed, or the envelope file when none was hashed),
``predicate`` the project id, the envelope's ids, agents, performative and integrity,
``envelope_sha256``, ``verdict``, ``failure_code``, ``gate``, ``command``, ``time`` and
``verifier``. :func:`judge_statement` decides over the bytes a trusted signature covered:
an orchestrator-gate pass for these exact envelope (and payload) bytes, or else
INTEGRITY_MISMATCH (other bytes, a signed non-pass) or UNVERIFIED (not such a
statement). Whether its ``project`` counts is the trust store's rule, applied first.
"""

from __future__ import annotations

import time
from enum import StrEnum

from eidolons import __version__
from eidolons.ecl.grammar import loads_strict
from eidolons.errors import EnvelopeError

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

    from eidolons.ecl.envelope import Envelope


class EventType(StrEnum):
    EMIT = "emit"
    VERIFY_PASS = "verify_pass"
    VERIFY_FAIL = "verify_fail"
    RECEIVE = "receive"


class GateName(StrEnum):
    SENDER = "sender"
    ORCHESTRATOR = "orchestrator"
    RECEIVER = "receiver"


#: ``verifier`` / ``emitter`` of every event this version writes.
TOOL = f"eidolons@{__version__}"
#: ``message_id`` / ``thread_id`` (and the trace file) of an event that has none.
UNKNOWN = "unknown"
UNKNOWN_AGENT = "unknown@n/a"


def utc_now() -> str:
    """RFC 3339 UTC timestamp with millisecond precision and a ``Z`` suffix."""
    ms = time.time_ns() // 1_000_000
    seconds, millis = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


def agent_label(eidolon: str | None, version: str | None) -> str:
    """``<eidolon>@<version>``, ``unknown`` / ``n/a`` for what is missing."""
    return f"{eidolon or 'unknown'}@{version or 'n/a'}"


def trace_event(
    event: EventType,
    envelope: Envelope | None,
    *,
    gate: GateName,
    to: str | None = None,
    fields: Mapping[str, Any] | None = None,
    gate_fields: Mapping[str, Any] | None = None,
    payload_sha256: str | None = None,
    envelope_sha256: str | None = None,
    integrity_value: str | None = None,
    payload_path: str | None = None,
    reason: str | None = None,
    evidence: str | None = None,
    duration_ms: int | None = None,
    ts: str | None = None,
    ids: tuple[str | None, str | None] = (None, None),
) -> dict[str, Any]:
    """One trace event, in the key order of the module docstring. ``to`` overrides the
    recipient label; ``integrity_value`` defaults to the envelope's tag; ``ids`` are the
    (message_id, thread_id) to use when the envelope has none."""
    env = envelope
    out: dict[str, Any] = {
        "ts": ts or utc_now(),
        "event": str(event),
        "message_id": (env.message_id if env else None) or ids[0] or UNKNOWN,
        "thread_id": (env.thread_id if env else None) or ids[1] or UNKNOWN,
        "from": agent_label(env.sender.eidolon, env.sender.version) if env else UNKNOWN_AGENT,
        "to": to
        if to is not None
        else (agent_label(env.recipient.eidolon, env.recipient.version) if env else UNKNOWN_AGENT),
    }
    if env is not None:  # unknown when the envelope cannot be parsed: omitted, not invented
        out["performative"] = env.performative
    out["integrity_method"] = env.integrity_method if env else UNKNOWN
    if env is not None:
        out.update(hop_fields(env))
    if fields:
        out.update(fields)
    out["gate"] = str(gate)
    if gate_fields:
        out.update(gate_fields)
    value = env.integrity_value if env and integrity_value is None else integrity_value
    tail = (
        ("duration_ms", duration_ms),
        ("integrity_value", value),
        ("payload_sha256", payload_sha256),
        ("envelope_sha256", envelope_sha256),
        ("payload_path", payload_path),
        ("emitter" if event is EventType.EMIT else "verifier", TOOL),
        ("evidence", evidence),
        ("reason", reason),
    )
    for key, given in tail:
        if given is not None:
            out[key] = given
    return out


def hop_fields(env: Envelope) -> dict[str, Any]:
    """What the envelope says about the hop, for chain views of the trace (ADR 0004)."""
    out: dict[str, Any] = {"parent_id": env.parent_id}
    if env.artifact_kind is not None:
        out["artifact_kind"] = env.artifact_kind
    out["artifact_path"] = env.artifact_path
    cd = env.context_delta
    tokens = cd.get("tokens_used") if cd is not None else None
    if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0:
        out["context_tokens"] = tokens
    return out


def elapsed_ms(start_ns: int) -> int:
    """Whole milliseconds since ``time.monotonic_ns()`` returned ``start_ns``."""
    return max(0, (time.monotonic_ns() - start_ns) // 1_000_000)


# ----------------------------------------------------------------- the chain

GENESIS = "0" * 64


def line_hash(line: bytes) -> str:
    """The hex SHA-256 of a line's exact bytes; a trailing newline is not part of it."""
    if line.endswith(b"\n"):
        line = line[:-1]
    from eidolons.ecl.integrity import sha256_hex

    return sha256_hex(line)


def next_link(last_line: bytes | None, last_seq: int) -> tuple[int, str]:
    """``(seq, prev)`` for the line that follows ``last_line`` (the thread's ``last_seq``-th
    line), or for a thread's first line when ``last_line`` is None."""
    if last_line is None:
        return 1, GENESIS
    return last_seq + 1, line_hash(last_line)


def chained(event: Mapping[str, Any], seq: int, prev: str) -> dict[str, Any]:
    """A copy of ``event`` carrying its link (any ``seq``/``prev`` it held is replaced)."""
    out = {k: v for k, v in event.items() if k not in ("seq", "prev")}
    out["seq"] = seq
    out["prev"] = prev
    return out


class ChainReport:
    """What :func:`verify_chain` found. ``state``: ``intact`` (every line linked),
    ``unchained`` (no line carries a link: a trace written by an upstream tool),
    ``partial`` (an unchained prefix, then an intact chain: a trace continued by this
    tool), ``broken`` (``first_break`` says where and why), ``empty``."""

    __slots__ = ("chained", "first_break", "lines", "state", "unchained_prefix")

    def __init__(self) -> None:
        self.lines = 0
        self.chained = 0
        self.unchained_prefix = 0
        self.first_break: tuple[int, str] | None = None
        self.state = "empty"

    @property
    def ok(self) -> bool:
        return self.first_break is None

    def to_dict(self) -> dict[str, Any]:
        brk = self.first_break
        return {
            "state": self.state,
            "lines": self.lines,
            "chained": self.chained,
            "unchained_prefix": self.unchained_prefix,
            "first_break": {"line": brk[0], "reason": brk[1]} if brk else None,
        }


def _link_of(raw: bytes) -> tuple[bool, object, object]:
    """(is a JSON object, seq, prev) of one line; absent fields are None."""
    import json

    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return False, None, None
    if not isinstance(value, dict):
        return False, None, None
    return True, value.get("seq"), value.get("prev")


def verify_chain(lines: Iterable[bytes]) -> ChainReport:
    """The first break in a thread's non-blank lines: line ``n`` must carry ``seq == n``
    and ``prev`` the hash of line ``n-1``. Lines before the first linked one are an
    unchained prefix; after it, any unlinked or damaged line is a break. A rewritten last
    line goes unnoticed here: the signed receipts cover it (ADR 0012)."""
    report = ChainReport()
    previous: bytes | None = None
    started = False
    for n, raw in enumerate(lines, start=1):
        report.lines = n
        is_obj, seq, prev = _link_of(raw)
        linked = is_obj and (seq is not None or prev is not None)
        if report.first_break is None:
            if not linked:
                if started:
                    why = "damaged line" if not is_obj else "line carries no seq/prev"
                    report.first_break = (n, f"{why} inside the chain (inserted or rewritten)")
                else:
                    report.unchained_prefix += 1
            else:
                started = True
                expected = GENESIS if previous is None else line_hash(previous)
                if seq != n or isinstance(seq, bool):
                    report.first_break = (
                        n,
                        f"seq {seq!r} at line {n} (a line was removed, inserted or reordered)",
                    )
                elif prev != expected:
                    report.first_break = (
                        n,
                        f"prev does not match line {n - 1} (line {n - 1} was edited, or a "
                        "line was removed)"
                        if n > 1
                        else "prev of line 1 is not 64 zeros",
                    )
                else:
                    report.chained += 1
        previous = raw
    if report.first_break is not None:
        report.state = "broken"
    elif report.lines == 0:
        report.state = "empty"
    elif report.chained == 0:
        report.state = "unchained"
    elif report.unchained_prefix:
        report.state = "partial"
    else:
        report.state = "intact"
    return report


# -------------------------------------------------------------- the receipts

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://eidolons.dev/attestation/ecl-verification/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
RECEIPT_GATE = "orchestrator"


def statement(
    *,
    subject_name: str,
    subject_sha256: str,
    predicate: dict[str, Any],
) -> dict[str, Any]:
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": subject_name, "digest": {"sha256": subject_sha256}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


def statement_bytes(doc: dict[str, Any]) -> bytes:
    """The serialized body: compact, sorted, ASCII JSON (the signature covers these bytes;
    verifiers parse the bytes they verified, never a re-encoding)."""
    from eidolons.ecl.grammar import dumps

    return dumps(doc, compact=True, sort_keys=True).encode()


def parse_statement(body: bytes) -> dict[str, Any] | None:
    """The statement, or None when the body is not an eidolons receipt statement."""
    try:
        doc = loads_strict(body)
    except EnvelopeError:
        return None
    if not isinstance(doc, dict) or doc.get("_type") != STATEMENT_TYPE:
        return None
    if doc.get("predicateType") != PREDICATE_TYPE or not isinstance(doc.get("predicate"), dict):
        return None
    subject = doc.get("subject")
    if not isinstance(subject, list) or len(subject) != 1 or not isinstance(subject[0], dict):
        return None
    digest = subject[0].get("digest")
    if not isinstance(digest, dict) or not isinstance(digest.get("sha256"), str):
        return None
    return doc


def judge_names(
    pred: dict[str, Any], *, message_id: str | None, envelope_sha256: str
) -> tuple[str, str] | None:
    """None when the predicate is an orchestrator verdict on these exact envelope bytes
    and this ``message_id`` (whatever the verdict and payload); else (code, why)."""
    if pred.get("gate") != RECEIPT_GATE:
        return "UNVERIFIED", f"the receipt was written by gate {pred.get('gate')!r}"
    if pred.get("envelope_sha256") != envelope_sha256:
        return "INTEGRITY_MISMATCH", "the signed receipt is for other envelope bytes"
    if pred.get("message_id") != message_id:
        return "INTEGRITY_MISMATCH", "the signed receipt is for another message_id"
    return None


def judge_statement(
    doc: dict[str, Any],
    *,
    message_id: str | None,
    envelope_sha256: str,
    payload_sha256: str | None,
) -> tuple[str, str] | None:
    """None when the statement vouches for this envelope (and payload); else (code, why)."""
    pred = doc["predicate"]
    problem = judge_names(pred, message_id=message_id, envelope_sha256=envelope_sha256)
    if problem is not None:
        return problem
    subject_sha = doc["subject"][0]["digest"]["sha256"]
    if payload_sha256 is not None and subject_sha != payload_sha256:
        return "INTEGRITY_MISMATCH", "the signed receipt is for other payload bytes"
    if pred.get("verdict") != "pass":
        code = pred.get("failure_code")
        return "INTEGRITY_MISMATCH", (
            f"the orchestrator's signed verdict is {pred.get('verdict')!r} ({code})"
        )
    return None
