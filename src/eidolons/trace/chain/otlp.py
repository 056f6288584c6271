"""Hops as OpenTelemetry spans over OTLP/HTTP (``trace export --otlp``; the SDK is the
optional ``eidolons[otel]``). One span per hand-off, ids from the ECL ids
(:mod:`eidolons.trace.chain.ids`), GenAI semantic-convention attributes, each decision a
span event.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from eidolons.trace.chain import UNKNOWN, Decision, Hop
from eidolons.trace.chain.ids import span_id_bytes, trace_id_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SCOPE = "eidolons.trace.export"
TRACES_PATH = "/v1/traces"


def traces_endpoint(url: str) -> str:
    """The traces URL of ``url``: a base URL (no path, or ``/``) gets ``/v1/traces``, as
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` does; a URL with any other path is used as it is."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=TRACES_PATH)) if parts.path in ("", "/") else url


def _ns(ts: str | None) -> int | None:
    if not ts:
        return None
    try:
        stamp = datetime.fromisoformat(ts)
    except ValueError:
        return None
    if stamp.tzinfo is None:
        return None
    return int(stamp.timestamp() * 1_000_000) * 1000


def _attrs(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def span_attributes(hop: Hop) -> dict[str, Any]:
    latest = hop.latest("orchestrator")
    refusal = hop.refusal()  # the addressee's side: probes by other receivers aside
    code = refusal.code if refusal is not None else None
    receiver = hop.latest("receiver")
    received = None
    if receiver is not None:
        received = "pass" if receiver.passed else (receiver.decision or "refused")
    return _attrs(
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.system": "eidolons",
            "gen_ai.agent.name": hop.sender or UNKNOWN,
            "gen_ai.agent.id": hop.sender_version,
            "gen_ai.conversation.id": hop.thread_id or UNKNOWN,
            "gen_ai.request.model": hop.model,
            "gen_ai.usage.output_tokens": hop.tokens,
            "ecl.message_id": hop.message_id,
            "ecl.thread_id": hop.thread_id,
            "ecl.parent_id": hop.parent_id,
            "ecl.from": hop.sender,
            "ecl.to": hop.recipient,
            "ecl.performative": hop.performative,
            "ecl.artifact.kind": hop.kind,
            "ecl.artifact.path": hop.path,
            "ecl.tier": hop.tier,
            "ecl.verdict": latest.verdict if latest else "unrecorded",
            "ecl.failure_code": code,
            "ecl.receiver.decision": received,
            "ecl.evidence": latest.evidence if latest and latest.passed else None,
            "ecl.receipt": latest.receipt_status if latest else None,
        }
    )


def event_attributes(d: Decision) -> dict[str, Any]:
    return _attrs(
        {
            "ecl.gate": d.gate,
            "ecl.verdict": d.verdict,
            "ecl.decision": d.decision,
            "ecl.failure_code": d.code,
            "ecl.reason": d.reason,
            "ecl.receiver": d.receiver,
            "ecl.evidence": (d.evidence or "unsigned") if d.passed else None,
            "ecl.receipt": d.receipt_status,
            "ecl.duration_ms": d.duration_ms,
        }
    )


def export_hops(
    hops: Sequence[Hop], endpoint: str, *, timeout: float, service_version: str
) -> tuple[bool, int]:
    """Send one span per hop to ``endpoint`` (an OTLP/HTTP traces URL). Returns (accepted,
    number of spans)."""
    import logging
    import time

    from opentelemetry import trace as api
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExportResult
    from opentelemetry.sdk.trace.id_generator import IdGenerator

    logging.getLogger("opentelemetry").setLevel(logging.CRITICAL)  # we report the outcome

    class _FromEcl(IdGenerator):
        """Hands the SDK the ids derived for the span being started."""

        trace_id = 0
        span_id = 0

        def generate_trace_id(self) -> int:
            return self.trace_id

        def generate_span_id(self) -> int:
            return self.span_id

    class _Collect(SpanProcessor):
        def __init__(self) -> None:
            self.spans: list[ReadableSpan] = []

        def on_end(self, span: ReadableSpan) -> None:
            self.spans.append(span)

    ids = _FromEcl()
    collect = _Collect()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "eidolons", "service.version": service_version}),
        id_generator=ids,
    )
    provider.add_span_processor(collect)
    tracer = provider.get_tracer(SCOPE, service_version)
    now = time.time_ns()
    for hop in hops:
        trace_id = int.from_bytes(trace_id_bytes(hop.thread_id or UNKNOWN), "big")
        ids.trace_id, ids.span_id = trace_id, int.from_bytes(span_id_bytes(hop.message_id), "big")
        context = None
        if hop.parent_id:
            parent = api.SpanContext(
                trace_id,
                int.from_bytes(span_id_bytes(hop.parent_id), "big"),
                is_remote=True,
                trace_flags=api.TraceFlags(api.TraceFlags.SAMPLED),
            )
            context = api.set_span_in_context(api.NonRecordingSpan(parent))
        start = _ns(hop.ts) or now
        span = tracer.start_span(
            f"invoke_agent {hop.sender or UNKNOWN}",
            context=context,
            kind=api.SpanKind.INTERNAL,
            attributes=span_attributes(hop),
            start_time=start,
        )
        end = start
        for d in hop.decisions:
            at = max(_ns(d.ts) or start, start)
            end = max(end, at)
            span.add_event(f"ecl.{d.event}", attributes=event_attributes(d), timestamp=at)
        refusal = hop.refusal()
        if refusal is not None:
            span.set_status(api.Status(api.StatusCode.ERROR, refusal.code or refusal.verdict))
        elif hop.decisions:
            span.set_status(api.Status(api.StatusCode.OK))
        span.end(end_time=end)
    exporter = OTLPSpanExporter(endpoint=endpoint, timeout=timeout)
    try:
        result = exporter.export(collect.spans)
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]
        provider.shutdown()
    return result is SpanExportResult.SUCCESS, len(collect.spans)
