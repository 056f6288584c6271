"""The upstream nexus's trace cases, as its own tests build them (``nexus-cli.md``):
envelopes of version 2.0 with no ``integrity`` block and no payload file, ``artifact.path``
naming a file that does not exist, ``context_delta.tokens_used`` set, tied timestamps and
no parents, so hops come in file-path order. A view is not a gate: it reads them, and
marks them unverifiable."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Run

Cli = Callable[..., Run]
THREAD = "thread-nexus-1"
TS = "2026-05-13T10:00:00Z"  # one timestamp for every hop: the order is the files' order
# file name, message id (sorting against the file names), from, to, performative, kind, tokens
HOPS = [
    ("01-scout.envelope.json", "m-3", "atlas", "spectra", "PROPOSE", "scout-report", 300),
    ("02-spec.envelope.json", "m-2", "spectra", "apivr", "PROPOSE", "spec", 1200),
    ("03-impl.envelope.json", "m-1", "apivr", "vigil", "REQUEST", "change-summary", 70),
    ("04-again.envelope.json", "m-0", "apivr", "vigil", "INFORM", "change-summary", None),
]


def upstream_envelope(
    mid: str, sender: str, to: str, perf: str, kind: str, tokens: int | None
) -> dict[str, Any]:
    return {
        "envelope_version": "2.0",
        "message_id": mid,
        "thread_id": THREAD,
        "from": {"eidolon": sender, "version": "1.0.0"},
        "to": {"eidolon": to, "version": "1.0.0"},
        "performative": perf,
        "artifact": {"kind": kind, "path": f"artifacts/{kind}.md"},  # no such file
        "context_delta": {"tokens_used": tokens},
        "trace": {"ts": TS, "tier": "standard", "model": "claude-sonnet", "host": "claude-code"},
    }


@pytest.fixture
def chain(project: Path) -> Path:
    """The nexus fixtures' directory, one sub-directory deep (searched recursively)."""
    where = project / "fixtures" / "chain"
    where.mkdir(parents=True)
    for name, *hop in HOPS:
        (where / name).write_text(json.dumps(upstream_envelope(*hop)))  # type: ignore[arg-type]
    return project / "fixtures"


def test_show_json_lists_every_hop_in_path_order(cli: Cli, chain: Path) -> None:
    r = cli("trace", "show", chain, "--json")
    assert r.code == 0, r.err
    rows = r.json()
    assert [(x["seq"], x["from"], x["to"]) for x in rows] == [
        (1, "atlas", "spectra"),
        (2, "spectra", "apivr"),
        (3, "apivr", "vigil"),
        (4, "apivr", "vigil"),
    ]
    assert [x["tokens"] for x in rows] == [300, 1200, 70, None]
    assert [x["artifact"] for x in rows][:2] == ["scout-report", "spec"]
    assert {(x["tier"], x["model"], x["ts"]) for x in rows} == {("standard", "claude-sonnet", TS)}
    assert all(x["unverifiable"] for x in rows)  # no integrity block: marked, not skipped


def test_show_text_has_the_header_and_one_row_per_hop(cli: Cli, chain: Path) -> None:
    lines = cli("trace", "show", chain).out.splitlines()
    assert lines[0] == f"ECL hand-off chain  (thread {THREAD}, 4 hops)"
    assert len(lines) == 5
    assert "atlas → spectra" in lines[1] and "300" in lines[1] and "standard" in lines[1]
    assert "—" in lines[4]  # no tokens
    assert all("unverifiable" in line for line in lines[1:])


def test_graph_json_groups_edges_on_the_pair(cli: Cli, chain: Path) -> None:
    doc = cli("trace", "graph", chain, "--json").json()
    assert doc["nodes"] == ["apivr", "atlas", "spectra", "vigil"]
    assert doc["edges"][-1] == {
        "from": "apivr",
        "to": "vigil",
        "performatives": ["REQUEST", "INFORM"],
        "count": 2,
    }


def test_graph_text_draws_an_edge_a_pair(cli: Cli, chain: Path) -> None:
    lines = cli("trace", "graph", chain).out.splitlines()
    assert lines[0] == f"ECL hand-off graph (thread {THREAD})"
    assert lines[-1].strip() == "apivr ──REQUEST,INFORM──▶ vigil (×2)"


def test_cost_json_is_the_ledger_by_sender(cli: Cli, chain: Path) -> None:
    doc = cli("trace", "cost", chain, "--json").json()
    assert doc["by_eidolon"] == [
        {"eidolon": "spectra", "tokens": 1200, "hops": 1},
        {"eidolon": "atlas", "tokens": 300, "hops": 1},
        {"eidolon": "apivr", "tokens": 70, "hops": 2},
    ]
    assert (doc["total_tokens"], doc["hops"], doc["budget"]) == (1570, 4, None)
    assert "self-reported estimates, not audited spend" in doc["note"]


def test_cost_text_header(cli: Cli, chain: Path) -> None:
    lines = cli("trace", "cost", chain).out.splitlines()
    assert lines[0] == "ECL token ledger (4 hops, total 1570 tokens — estimate)"


def test_cost_over_budget_exits_3(cli: Cli, chain: Path) -> None:
    r = cli("trace", "cost", chain, "--budget", "1000")
    assert r.code == 3 and "budget exhausted: total 1570 > budget 1000" in r.out
    doc = cli("trace", "cost", chain, "--budget", "1000", "--json")
    assert doc.code == 3 and doc.json()["budget_exceeded"] is True


def test_cost_within_budget_exits_0(cli: Cli, chain: Path) -> None:
    r = cli("trace", "cost", chain, "--budget", "1570")
    assert r.code == 0 and "within budget: total 1570 <= budget 1570" in r.out


def test_otel_prints_one_span_an_envelope(cli: Cli, chain: Path) -> None:
    doc = cli("trace", "otel", chain).json()
    assert doc["schema"] == "opentelemetry.gen_ai"
    assert doc["gen_ai_convention_version"] == "1.30.0"
    spans = doc["spans"]
    assert [s["span_id"] for s in spans] == ["m-3", "m-2", "m-1", "m-0"]
    first = spans[0]
    assert (first["trace_id"], first["parent_span_id"], first["name"]) == (
        THREAD,
        None,
        "invoke_agent atlas",
    )
    assert first["start_time"] == TS
    attrs = first["attributes"]
    assert attrs["gen_ai.agent.id"] == "1.0.0" and attrs["gen_ai.usage.output_tokens"] == 300
    assert attrs["eidolons.to"] == "spectra" and attrs["eidolons.host"] == "claude-code"
    assert spans[3]["attributes"]["gen_ai.usage.output_tokens"] == 0
    assert (
        cli("trace", "otel", chain, "--otel-version", "1.31.0").json()["gen_ai_convention_version"]
        == "1.31.0"
    )


def test_verify_marks_an_envelope_without_integrity_unverifiable(cli: Cli, chain: Path) -> None:
    r = cli("trace", "verify", chain, "--json")
    doc = r.json()
    assert (doc["total"], doc["failed"], doc["all_pass"]) == (4, 0, True)
    assert {x["verdict"] for x in doc["results"]} == {"unverifiable"}
    assert r.code == 0  # as upstream: unverifiable is not a failure
    text = cli("trace", "verify", chain).out.splitlines()
    assert text[-1] == "none of 4 envelopes failed integrity; 4 unverifiable (no digest to check)"
    assert all("[unverifiable]" in line for line in text[:-1])


def test_a_missing_path_is_skipped_with_a_warning(cli: Cli, chain: Path) -> None:
    r = cli("trace", "show", chain, "no-such-dir", "--json")
    assert r.code == 0 and len(r.json()) == 4
    assert "no-such-dir" in r.err


def test_nothing_collected_is_an_error(cli: Cli, project: Path) -> None:
    r = cli("trace", "show", project / "no-such-dir")
    assert r.code != 0 and "no-such-dir" in r.err


def test_an_unknown_sub_command_is_an_error_naming_it(cli: Cli) -> None:
    r = cli("trace", "shw", "x")
    assert r.code != 0 and "shw" in r.err and r.out == ""


def test_no_sub_command_prints_the_usage_and_exits_0(cli: Cli) -> None:
    for argv in (("trace",), ("trace", "-h")):
        r = cli(*argv)
        assert r.code == 0, r.err
        assert all(verb in r.out for verb in ("show", "graph", "verify", "cost", "otel"))
