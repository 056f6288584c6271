"""The trace-event vocabulary and :func:`trace_event`, the one builder of every event.

Pure (the clock aside). The keys every event shares are spelled and ordered once (schema
``data/schemas/handoff-event.v1.json``): ``ts``, ``event``, ``message_id``, ``thread_id``
(``unknown`` when absent), ``from``, ``to``, ``performative`` (omitted when the envelope
cannot be parsed), ``integrity_method``, the hop (:func:`hop_fields`), the caller's
fields, ``gate`` and its fields, ``duration_ms``, the tags and paths checked (ADR 0004,
0021), the tool, then ``evidence`` or ``reason``.
"""

from __future__ import annotations

import time
from enum import StrEnum

from eidolons import __version__

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Mapping
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
    if duration_ms is not None:
        out["duration_ms"] = duration_ms
    value = (
        integrity_value if integrity_value is not None else (env.integrity_value if env else None)
    )
    if value is not None:
        out["integrity_value"] = value
    if payload_sha256 is not None:
        out["payload_sha256"] = payload_sha256
    if envelope_sha256 is not None:
        out["envelope_sha256"] = envelope_sha256
    if payload_path is not None:
        out["payload_path"] = payload_path
    out["emitter" if event is EventType.EMIT else "verifier"] = TOOL
    if evidence is not None:
        out["evidence"] = evidence
    if reason is not None:
        out["reason"] = reason
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
