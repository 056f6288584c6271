"""The upstream nexus's views of a chain (``show``, ``graph``, ``cost``, ``otel``), as JSON of
the shapes in ``nexus-cli.md`` (additions only) and as text, from ordered hops. No I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from eidolons._text import plural, printable
from eidolons.trace.chain import UNKNOWN, Hop
from eidolons.trace.chain.ids import span_id_bytes, trace_id_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

COST_NOTE = (
    "tokens are self-reported estimates, not audited spend (context_delta.tokens_used as "
    "each sender declared it)"
)
OTEL_NOTE = (
    "printed only; nothing is sent. Use `eidolons trace export --otlp URL` to send spans "
    "over OTLP/HTTP."
)
DEFAULT_OTEL_VERSION = "1.30.0"


def _name(value: str | None) -> str:
    return value or UNKNOWN


def thread_of(hops: Sequence[Hop]) -> str:
    return next((h.thread_id for h in hops if h.thread_id), UNKNOWN)


# -- show
def show_doc(hops: Sequence[Hop]) -> list[dict[str, Any]]:
    return [
        {
            "seq": seq,
            "from": _name(h.sender),
            "to": _name(h.recipient),
            "performative": h.performative,
            "artifact": h.kind,
            "tokens": h.tokens,
            "tier": h.tier,
            "model": h.model,
            "ts": h.ts,
            "unverifiable": h.unverifiable,
            **h.receiver_side(),
        }
        for seq, h in enumerate(hops, 1)
    ]


def show_text(hops: Sequence[Hop]) -> list[str]:
    lines = [f"ECL hand-off chain  (thread {thread_of(hops)}, {plural(len(hops), 'hop')})"]
    for row in show_doc(hops):
        tokens = "—" if row["tokens"] is None else str(row["tokens"])
        refused = row["refused"]
        lines.append(
            f"  {row['seq']:>3}  {row['from']} → {row['to']}  {row['performative'] or UNKNOWN}"
            f"  {row['artifact'] or UNKNOWN}  {tokens}  {row['tier'] or UNKNOWN}"
            + (f"  REFUSED by {refused['receiver']}: {refused['code']}" if refused else "")
            + (f"  (unverifiable: {row['unverifiable']})" if row["unverifiable"] else "")
        )
        lines += [
            f"       probe by {p['receiver']}: {p['code'] or p['verdict']}" for p in row["probes"]
        ]
    return [printable(line) for line in lines]


# -- graph
def graph_doc(hops: Sequence[Hop]) -> dict[str, Any]:
    nodes = sorted({_name(h.sender) for h in hops} | {_name(h.recipient) for h in hops})
    edges: dict[tuple[str, str], dict[str, Any]] = {}
    for h in hops:
        pair = (_name(h.sender), _name(h.recipient))
        edge = edges.setdefault(
            pair, {"from": pair[0], "to": pair[1], "performatives": [], "count": 0}
        )
        perf = h.performative or UNKNOWN
        if perf not in edge["performatives"]:
            edge["performatives"].append(perf)
        edge["count"] += 1
    return {"nodes": nodes, "edges": list(edges.values())}


def graph_text(hops: Sequence[Hop]) -> list[str]:
    lines = [f"ECL hand-off graph (thread {thread_of(hops)})"]
    for e in graph_doc(hops)["edges"]:
        times = f" (×{e['count']})" if e["count"] > 1 else ""
        lines.append(f"  {e['from']} ──{','.join(e['performatives'])}──▶ {e['to']}{times}")
    return [printable(line) for line in lines]


# -- cost
def cost_doc(hops: Sequence[Hop], budget: int | None = None) -> dict[str, Any]:
    ledger: dict[str, dict[str, Any]] = {}
    for h in hops:
        name = _name(h.sender)
        row = ledger.setdefault(name, {"eidolon": name, "tokens": 0, "hops": 0})
        row["tokens"] += h.tokens or 0
        row["hops"] += 1
    rows = sorted(ledger.values(), key=lambda r: (-r["tokens"], r["eidolon"]))
    total = sum(r["tokens"] for r in rows)
    return {
        "by_eidolon": rows,
        "total_tokens": total,
        "hops": len(hops),
        "budget": budget,
        "budget_exceeded": budget is not None and total > budget,
        "note": COST_NOTE,
    }


def cost_text(doc: dict[str, Any]) -> list[str]:
    hops, total = doc["hops"], doc["total_tokens"]
    lines = [f"ECL token ledger ({plural(hops, 'hop')}, total {total} tokens — estimate)"]
    for r in doc["by_eidolon"]:
        lines.append(f"  {r['eidolon']:<16} {r['tokens']:>10}  ({plural(r['hops'], 'hop')})")
    budget = doc["budget"]
    if budget is not None:
        lines.append(
            f"budget exhausted: total {total} > budget {budget}"
            if doc["budget_exceeded"]
            else f"within budget: total {total} <= budget {budget}"
        )
    lines.append(f"note: {COST_NOTE}")
    return [printable(line) for line in lines]


# -- otel (printed only)
def otel_doc(hops: Sequence[Hop], version: str = DEFAULT_OTEL_VERSION) -> dict[str, Any]:
    spans = []
    for h in hops:
        thread = h.thread_id or UNKNOWN
        spans.append(
            {
                "trace_id": thread,
                "span_id": h.message_id,
                "parent_span_id": h.parent_id,
                "otel_trace_id": trace_id_bytes(thread).hex(),
                "otel_span_id": span_id_bytes(h.message_id).hex(),
                "otel_parent_span_id": span_id_bytes(h.parent_id).hex() if h.parent_id else None,
                "name": f"invoke_agent {_name(h.sender)}",
                "start_time": h.ts,
                "attributes": {
                    "gen_ai.system": "eidolons",
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": _name(h.sender),
                    "gen_ai.agent.id": h.sender_version,
                    "gen_ai.conversation.id": thread,
                    "gen_ai.request.model": h.model,
                    "gen_ai.usage.output_tokens": h.tokens or 0,
                    "eidolons.token_budget": h.token_budget,
                    "eidolons.performative": h.performative,
                    "eidolons.tier": h.tier,
                    "eidolons.to": _name(h.recipient),
                    "eidolons.artifact.kind": h.kind,
                    "eidolons.host": h.host,
                },
            }
        )
    return {
        "schema": "opentelemetry.gen_ai",
        "gen_ai_convention_version": version,
        "note": OTEL_NOTE,
        "spans": spans,
    }
