"""``eidolons trace show|graph|verify|cost|otel|list``: the nexus's chain verbs (its JSON
shapes, flags and exit codes for envelope PATHs) minus its bugs, and the thread views."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from eidolons.trace.chain import Hop, order_hops
from eidolons.trace.log import append_event
from tests.conftest import (
    FIXTURE_HMAC_KEY,
    FIXTURES,
    Run,
    clean_env,
    emit_cmd,
    needs_fixtures,
    read_trace,
)

Cli = Callable[..., Run]
THREAD = "0190a0b0-0000-7000-8000-000000000001"
IDS = [f"0190a0b0-0000-7000-8000-00000000000{i}" for i in (1, 2, 3)]
# (payload name, sender, receiver, performative, kind, tokens): file names sort against the
# chain order, so an order by file name (the nexus's) would be visibly wrong
CHAIN = [
    ("z-scout.md", "atlas@1.4.2", "spectra@4.11.0", "PROPOSE", "scout-report", 320),
    ("m-spec.md", "spectra@4.11.0", "apivr@3.8.0", "PROPOSE", "spec", 1200),
    ("a-fail.md", "apivr@3.8.0", "vigil@1.8.0", "ESCALATE", "repair-failed-report", 50),
]


def build_chain(cli: Cli, project: Path, directory: str = "handoffs") -> list[Path]:
    """Three linked hand-offs on one thread (parent_id chain), emitted in chain order."""
    out = []
    (project / directory).mkdir(exist_ok=True)
    for i, (name, sender, to, perf, kind, tokens) in enumerate(CHAIN):
        payload = project / directory / name
        payload.write_text(f"# {kind}\n\n## Decision target\nx\n")
        extra = ["--thread", THREAD, "--tokens-used", str(tokens), "--no-trace"]
        extra += ["--trust-level", "standard"]  # chain-view fixtures, not receiver input
        if i:
            extra += ["--parent", IDS[i - 1]]
        r = cli(
            *emit_cmd(
                payload, "--no-check", *extra, sender=sender, to=to, performative=perf, kind=kind
            )
        )
        assert r.code == 0, r.err
        envelope = payload.with_suffix(".envelope.json")
        doc = json.loads(envelope.read_text())
        doc["message_id"] = IDS[i]  # fixed ids (emit mints UUIDv7s); the digest is unchanged
        envelope.write_text(json.dumps(doc))
        out.append(envelope)
    return out


def test_show_json_has_the_nexus_shape_in_chain_order(cli: Cli, project: Path) -> None:
    build_chain(cli, project)
    r = cli("trace", "show", "handoffs", "--json")
    assert r.code == 0, r.err
    rows = r.json()
    nexus = {"seq", "from", "to", "performative", "artifact", "tokens", "tier", "model", "ts"}
    assert [set(row) for row in rows] == [
        nexus | {"refused", "probes", "unverifiable"}
    ] * 3  # additions only
    assert [(x["seq"], x["from"], x["to"]) for x in rows] == [
        (1, "atlas", "spectra"),
        (2, "spectra", "apivr"),
        (3, "apivr", "vigil"),
    ]
    assert [x["artifact"] for x in rows] == ["scout-report", "spec", "repair-failed-report"]
    assert [x["tokens"] for x in rows] == [320, 1200, 50]
    assert rows[0]["tier"] == "standard" and rows[0]["model"] == "unknown"


def test_show_text_header_and_rows(cli: Cli, project: Path) -> None:
    build_chain(cli, project)
    r = cli("trace", "show", "handoffs")
    lines = r.out.splitlines()
    assert r.code == 0 and lines[0] == f"ECL hand-off chain  (thread {THREAD}, 3 hops)"
    assert "atlas → spectra" in lines[1] and "PROPOSE" in lines[1] and "320" in lines[1]
    assert "apivr → vigil" in lines[3] and "ESCALATE" in lines[3]


def test_one_bad_file_does_not_sink_the_run(cli: Cli, project: Path) -> None:
    build_chain(cli, project)
    (project / "handoffs" / "b-broken.envelope.json").write_text("{not json")
    for verb in ("show", "graph", "cost", "otel"):
        r = cli("trace", verb, "handoffs", "--json")
        assert r.code == 0, (verb, r.err)
        assert "b-broken.envelope.json" in r.err and "skipped" in r.err
    assert len(cli("trace", "show", "handoffs", "--json").json()) == 3


def test_missing_paths_are_skipped_and_nothing_found_is_an_error(cli: Cli, project: Path) -> None:
    envelopes = build_chain(cli, project)
    r = cli("trace", "show", "no-such-dir/", str(envelopes[0]), "--json")
    assert r.code == 0 and "no-such-dir" in r.err and len(r.json()) == 1
    r = cli("trace", "show", "no-such-thread")
    assert r.code == 1 and "no trace" in r.err
    assert cli("trace", "show", "../x/y").code == 2  # not a file, not a thread id
    assert cli("trace", "graph").code == 2  # no PATH


def test_hops_ordered_by_parent_then_time_not_by_name() -> None:
    def hop(mid: str, parent: str | None, ts: str) -> Hop:
        h = Hop(mid)
        h.parent_id, h.ts = parent, ts
        return h

    hops = [
        hop("c", "b", "2026-01-01T00:00:01Z"),  # child stamped *before* its parent
        hop("b", "a", "2026-01-01T00:00:05Z"),
        hop("a", None, "2026-01-01T00:00:03Z"),
        hop("x", None, "2026-01-01T00:00:00Z"),  # an earlier root
        hop("orphan", "gone", "2026-01-01T00:00:04Z"),  # parent not in the set: a root
        hop("p", "q", "2026-01-01T00:00:09Z"),  # a cycle must not hide hops
        hop("q", "p", "2026-01-01T00:00:08Z"),
        hop("a2", "a", "2026-01-01T00:00:02Z"),  # a sibling of b, earlier
    ]
    assert [h.message_id for h in order_hops(hops)] == [
        "x", "a", "a2", "b", "c", "orphan", "q", "p"
    ]  # fmt: skip


def test_graph_json_and_text_group_edges_on_the_pair(cli: Cli, project: Path) -> None:
    build_chain(cli, project)
    extra = project / "handoffs" / "again.md"
    extra.write_text("# again\n")
    r = cli(
        *emit_cmd(
            extra, "--no-trace", "--no-check", sender="atlas", to="spectra", performative="INFORM"
        )
    )
    assert r.code == 0, r.err
    doc = cli("trace", "graph", "handoffs", "--json").json()
    assert doc["nodes"] == ["apivr", "atlas", "spectra", "vigil"]
    first = doc["edges"][0]
    assert first == {
        "from": "atlas",
        "to": "spectra",
        "performatives": ["PROPOSE", "INFORM"],
        "count": 2,
    } or first["performatives"] == ["INFORM", "PROPOSE"]
    assert len(doc["edges"]) == 3
    text = cli("trace", "graph", "handoffs").out
    assert text.startswith("ECL hand-off graph (thread ")
    assert "atlas ──" in text and "──▶ spectra (×2)" in text


def test_verify_runs_the_gate_without_writing_the_trace(cli: Cli, project: Path) -> None:
    envelopes = build_chain(cli, project)
    r = cli("trace", "verify", "handoffs", "--mode", "warn")
    assert r.code == 0 and r.out.splitlines()[-1] == "all 3 envelopes verified"
    (project / "handoffs" / "m-spec.md").write_text("rewritten in transit\n")
    (project / "handoffs" / "c-bad.envelope.json").write_text("[]")
    r = cli("trace", "verify", "handoffs", "--json", "--mode", "warn")
    assert r.code == 0
    doc = r.json()
    assert {k: doc[k] for k in ("mode", "total", "failed", "all_pass")} == {
        "mode": "warn",
        "total": 4,
        "failed": 2,
        "all_pass": False,
    }
    verdicts = {Path(x["envelope"]).name: x["verdict"] for x in doc["results"]}
    assert verdicts == {
        "a-fail.envelope.json": "pass",
        "c-bad.envelope.json": "malformed",
        "m-spec.envelope.json": "tamper",
        "z-scout.envelope.json": "pass",
    }
    assert all({"verdict", "from", "to", "envelope"} <= set(x) for x in doc["results"])
    assert [Path(x["envelope"]).name for x in doc["results"]] == [  # chain order, bad file last
        "z-scout.envelope.json",
        "m-spec.envelope.json",
        "a-fail.envelope.json",
        "c-bad.envelope.json",
    ]
    r = cli("trace", "verify", "handoffs", "--block")
    assert r.code == 3 and r.out.splitlines()[-1] == "2/4 envelopes failed integrity"
    assert cli("trace", "verify", str(envelopes[0]), "--block").code == 0
    assert cli("trace", "verify", "handoffs", "--mode", "block", "--json").code == 3
    assert not (project / ".eidolons" / ".trace").exists()  # verify writes no events


def test_cost_ledger_budget_and_estimate_note(cli: Cli, project: Path) -> None:
    build_chain(cli, project)
    doc = cli("trace", "cost", "handoffs", "--json").json()
    assert doc["by_eidolon"] == [
        {"eidolon": "spectra", "tokens": 1200, "hops": 1},
        {"eidolon": "atlas", "tokens": 320, "hops": 1},
        {"eidolon": "apivr", "tokens": 50, "hops": 1},
    ]
    assert doc["total_tokens"] == 1570 and doc["hops"] == 3
    assert doc["budget"] is None and doc["budget_exceeded"] is False
    assert "self-reported estimates, not audited spend" in doc["note"]
    r = cli("trace", "cost", "handoffs", "--budget", "2000")
    assert r.code == 0 and "within budget: total 1570 <= budget 2000" in r.out
    assert r.out.startswith("ECL token ledger (3 hops, total 1570 tokens — estimate)")
    assert "estimates" in r.out
    r = cli("trace", "cost", "handoffs", "--budget", "1000")
    assert r.code == 3 and "budget exhausted: total 1570 > budget 1000" in r.out
    r = cli("trace", "cost", "handoffs", "--budget", "1000", "--json")
    assert r.code == 3 and r.json()["budget_exceeded"] is True


def test_otel_spans_nexus_shape_and_valid_ids(cli: Cli, project: Path) -> None:
    build_chain(cli, project)
    doc = cli("trace", "otel", "handoffs", "--otel-version", "1.37.0").json()
    assert doc["schema"] == "opentelemetry.gen_ai" and doc["gen_ai_convention_version"] == "1.37.0"
    assert "nothing is sent" in doc["note"]
    spans = doc["spans"]
    assert [s["span_id"] for s in spans] == IDS
    assert [s["parent_span_id"] for s in spans] == [None, IDS[0], IDS[1]]
    assert all(s["trace_id"] == THREAD for s in spans)
    assert {s["otel_trace_id"] for s in spans} == {THREAD.replace("-", "")}
    assert all(len(s["otel_span_id"]) == 16 and int(s["otel_span_id"], 16) for s in spans)
    assert spans[1]["otel_parent_span_id"] == spans[0]["otel_span_id"]
    a = spans[0]["attributes"]
    assert a["gen_ai.operation.name"] == "invoke_agent" and a["gen_ai.agent.name"] == "atlas"
    assert a["gen_ai.agent.id"] == "1.4.2" and a["gen_ai.usage.output_tokens"] == 320
    assert a["eidolons.to"] == "spectra" and a["eidolons.artifact.kind"] == "scout-report"
    assert a["gen_ai.conversation.id"] == THREAD and spans[0]["name"] == "invoke_agent atlas"


def test_untrusted_names_cannot_forge_output_lines(cli: Cli, project: Path) -> None:
    (envelope, *_) = build_chain(cli, project)
    doc = json.loads(envelope.read_text())
    doc["from"]["eidolon"] = "atlas\n  2  evil → vigil  DECIDE\x1b[2J"
    envelope.write_text(json.dumps(doc))
    for verb in ("show", "graph", "cost"):
        out = cli("trace", verb, "handoffs").out
        assert "\x1b" not in out and "\n  2  evil" not in out, verb


def _verified_thread(cli: Cli, project: Path) -> str:
    payload = project / "handoff" / "r.md"
    payload.parent.mkdir(exist_ok=True)
    payload.write_text("# r\n\n## Decision target\nx\n")
    r = cli(*emit_cmd(payload, "--json", sender="atlas@1.4.2", to="vigil@1.9.0"))
    assert r.code == 0, r.err
    envelope = Path(r.json()["envelope_path"])
    assert cli("verify-envelope", envelope, "--block").code == 0
    assert cli("verify-incoming", payload, "--as", "vigil").code == 0
    return str(r.json()["envelope"]["thread_id"])


def test_thread_views_come_from_the_trace(cli: Cli, project: Path) -> None:
    thread = _verified_thread(cli, project)
    doc = cli("trace", "graph", thread, "--json").json()
    assert doc["edges"] == [
        {"from": "atlas", "to": "vigil", "performatives": ["INFORM"], "count": 1}
    ]
    r = cli("trace", "verify", thread, "--json", "--mode", "warn")
    assert r.json()["results"][0]["verdict"] == "pass"
    trace = project / ".eidolons" / ".trace" / f"{thread}.jsonl"
    r = cli("trace", "cost", str(trace), "--json")
    assert r.code == 0 and r.json()["hops"] == 1
    # the existing `trace show THREAD`: the events themselves
    r = cli("trace", "show", thread)
    assert r.code == 0 and [line[2:].split()[1] for line in r.out.splitlines()] == [
        "emit",
        "verify_pass",
        "verify_pass",
        "receive",
    ]


def test_list_threads_newest_first_with_hops_and_refusals(cli: Cli, project: Path) -> None:
    older = _verified_thread(cli, project)
    trace_dir = project / ".eidolons" / ".trace"
    newer = "0190ffff-0000-7000-8000-00000000abcd"
    base = {"thread_id": newer, "from": "atlas@1.4.2", "to": "vigil@1.9.0"}
    base |= {"performative": "INFORM", "integrity_method": "sha256"}
    append_event(trace_dir / f"{newer}.jsonl", {**base, "ts": "2999-01-01T00:00:00.000Z",
                 "event": "emit", "message_id": "m1", "gate": "sender"})  # fmt: skip
    append_event(trace_dir / f"{newer}.jsonl", {**base, "ts": "2999-01-01T00:00:01.000Z",
                 "event": "verify_fail", "message_id": "m2", "gate": "receiver",
                 "decision": "refused", "verify_failure_code": "UNVERIFIED"})  # fmt: skip
    with (trace_dir / f"{newer}.jsonl").open("ab") as fh:
        fh.write(b"junk\n")
    rows = cli("trace", "list", "--json").json()
    assert [r["thread_id"] for r in rows] == [newer, older]
    assert rows[0]["hops"] == 2 and rows[0]["refusals"] == 1
    assert rows[0]["refusal_codes"] == ["UNVERIFIED"] and rows[0]["damaged_lines"] == 1
    assert rows[1]["hops"] == 1 and rows[1]["refusals"] == 0 and rows[1]["events"] == 4
    text = cli("trace", "list").out.splitlines()
    assert text[0].startswith("THREAD") and text[1].startswith(newer)
    assert "1 (UNVERIFIED)" in text[1] and "[1 damaged line]" in text[1]


def test_follow_is_bounded_by_events_and_idle_time(cli: Cli, project: Path) -> None:
    thread = _verified_thread(cli, project)
    r = cli("trace", "show", thread, "--follow", "--max-events", "2")
    assert r.code == 0 and len(r.out.splitlines()) == 2
    r = cli("trace", "show", thread, "--follow", "--idle-timeout", "0", "--json")
    assert r.code == 0 and [json.loads(x)["event"] for x in r.out.splitlines()] == [
        "emit",
        "verify_pass",
        "verify_pass",
        "receive",
    ]
    assert cli("trace", "show", thread, "--max-events", "1").code == 2  # only with --follow
    assert cli("trace", "show", "handoff", "--follow").code == 2  # one trace only


def test_follow_prints_events_appended_while_it_runs(cli: Cli, project: Path) -> None:
    """A real process: the events on file are printed first, then one appended after
    they were read, and only then does it stop (after that many events)."""
    import subprocess
    import sys

    from tests.conftest import clean_env

    thread = _verified_thread(cli, project)
    trace = project / ".eidolons" / ".trace" / f"{thread}.jsonl"
    before = len(read_trace(trace))
    proc = subprocess.Popen(
        [sys.executable, "-m", "eidolons", "trace", "show", thread, "--follow", "--json",
         "--max-events", str(before + 1), "--idle-timeout", "20"],
        cwd=project, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        seen = [json.loads(proc.stdout.readline()) for _ in range(before)]
        assert [e["event"] for e in seen] == ["emit", "verify_pass", "verify_pass", "receive"]
        assert proc.poll() is None  # still following
        append_event(trace, {"event": "note", "message_id": "late", "ts": "x"})
        assert json.loads(proc.stdout.readline())["message_id"] == "late"
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("verb", ["show", "graph", "verify", "cost", "otel"])
def test_nexus_flags_accepted_by_every_verb(cli: Cli, project: Path, verb: str) -> None:
    build_chain(cli, project)
    r = cli("trace", verb, "handoffs", "--json", "--budget", "99999", "--otel-version", "1.30.0",
            "--mode", "warn")  # fmt: skip
    assert r.code == 0, r.err
    json.loads(r.out)


def test_read_new_events_leaves_an_unfinished_line_for_next_time(tmp_path: Path) -> None:
    from eidolons.trace.log import read_new_events

    path = tmp_path / "t.jsonl"
    assert read_new_events(path, 0) == ([], 0)
    path.write_bytes(b'{"n":1}\n')
    with path.open("ab") as fh:
        fh.write(b'{"n": 2')  # a writer mid-line
    lines, offset = read_new_events(path, 0)
    assert [ln.event for ln in lines] == [{"n": 1}] and offset == len(b'{"n":1}\n')
    with path.open("ab") as fh:
        fh.write(b"}\nnot json\n")
    lines, offset = read_new_events(path, offset)
    assert [ln.event for ln in lines] == [{"n": 2}, None] and offset == path.stat().st_size


@needs_fixtures
def test_verify_over_the_upstream_fixtures(cli: Cli, project: Path) -> None:
    """The nexus's verify on the conformance fixtures: only integrity counts (no contracts),
    so the undeclared edge and the over-budget hand-off pass; the bad digest fails, and the
    HMAC fixture fails without its key and passes with it."""
    r = cli("trace", "verify", FIXTURES, "--json", "--mode", "warn")
    assert r.code == 0, r.err
    doc = r.json()
    failed = {Path(x["envelope"]).parent.name: x["verdict"] for x in doc["results"]}
    failed = {k: v for k, v in failed.items() if v not in ("pass", "unverifiable")}
    assert doc["total"] == 12 and failed == {
        "missing-integrity": "tamper",
        "conformant-high-trust-v2.1": "no_key",
    }
    keyed = clean_env(ECL_HMAC_KEY=FIXTURE_HMAC_KEY)
    r = cli("trace", "verify", FIXTURES, "--json", "--block", env=keyed)
    assert r.code == 3 and r.json()["failed"] == 1
    assert cli("trace", "show", FIXTURES, "--json").json()[0]["tokens"] is not None


@pytest.mark.parametrize(
    "args",
    [
        ("cost", "handoffs", "--budget", "-1"),
        ("cost", "handoffs", "--budget", "many"),
        ("show", "THREAD", "--follow", "--max-events", "0"),
        ("show", "THREAD", "--follow", "--idle-timeout", "-1"),
        ("show", "THREAD", "--follow", "--idle-timeout", "nan"),
        ("show", "THREAD", "--idle-timeout", "0"),
        ("graph", "handoffs", "--format", "png"),
        ("verify", "handoffs", "--mode", "lenient"),
        ("report", "THREAD", "-o", "no/such/dir/r.html"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(
    cli: Cli, project: Path, args: tuple[str, ...]
) -> None:
    build_chain(cli, project)
    thread = _verified_thread(cli, project)
    r = cli("trace", *(thread if a == "THREAD" else a for a in args))
    assert r.code == 2, (args, r.err)
    assert "Traceback" not in r.err and r.out == ""


def test_verify_thread_with_a_trust_store_fails_an_unsigned_latest_pass(
    project: Path, tmp_path: Path
) -> None:
    """In a project with a trust store a receiver accepts only a signed receipt, so
    ``trace verify THREAD`` must not call a hop verified on a hand-written pass appended
    after the signed verdict (chain re-linked, so only the receipt tells them apart)."""
    from tests.conftest import run_cli

    env = clean_env(XDG_CONFIG_HOME=str(tmp_path / "cfg"))

    def cli(*args: str | Path) -> Run:
        return run_cli(*args, cwd=project, env=env)

    assert cli("keys", "init").code == 0
    thread = _verified_thread(cli, project)
    r = cli("trace", "verify", thread, "--block", "--json")
    assert r.code == 0, r.out
    (row,) = r.json()["results"]
    assert row["verdict"] == "pass" and row["receipt"] == "valid"
    trace = project / ".eidolons" / ".trace" / f"{thread}.jsonl"
    signed = next(e for e in read_trace(trace) if e.get("gate") == "orchestrator")
    forged = {k: v for k, v in signed.items() if k not in ("seq", "prev", "receipt")}
    append_event(trace, forged)  # an agent's own pass line, correctly chained
    r = cli("trace", "verify", thread, "--block", "--json")
    assert r.code == 3
    (row,) = r.json()["results"]
    assert row["receipt"] == "none" and r.json()["all_pass"] is False
    text = cli("trace", "verify", thread, "--mode", "warn").out
    assert "receipt none" in text and "1/1" in text


@pytest.mark.parametrize(
    "body",
    [
        '{"a": 1}\n{"b": 2}\n{"c": 3}\n',  # JSON objects, none a trace event
        "not json\nstill not\nnor this\n",
        '[1, 2]\n{"event": "emit"}\n',  # the first line decides
        '{"event": 7}\n',
    ],
)
def test_show_refuses_a_file_that_is_not_a_trace_with_one_line(
    cli: Cli, project: Path, body: str
) -> None:
    (project / "notes.jsonl").write_text(body)
    for extra in ((), ("--json",), ("--follow", "--max-events", "1", "--idle-timeout", "0")):
        r = cli("trace", "show", "notes.jsonl", *extra)
        assert r.code == 2, r
        assert r.out == ""
        lines = r.err.splitlines()
        assert len(lines) == 1, r.err
        assert lines[0].startswith("eidolons: notes.jsonl: not a trace (line ")
        assert "damaged" not in r.err


def test_show_still_reads_a_trace_with_a_damaged_later_line(cli: Cli, project: Path) -> None:
    good = {"event": "emit", "message_id": IDS[0], "thread_id": THREAD}
    (project / "t.jsonl").write_text(json.dumps(good) + "\nnot json\n")
    r = cli("trace", "show", "t.jsonl", "--json")
    assert r.code == 0, r
    assert [e["message_id"] for e in r.json()] == [IDS[0]]
    assert "t.jsonl:2: damaged line skipped" in r.err
    (project / "empty.jsonl").write_text("")
    assert cli("trace", "show", "empty.jsonl", "--json").code == 0


def test_show_refuses_a_named_file_that_is_neither_a_trace_nor_an_envelope(
    cli: Cli, project: Path
) -> None:
    (project / "notes.md").write_text("# Notes\n\nnot a trace\n")
    event = {"event": "emit", "message_id": IDS[0], "thread_id": THREAD}
    (project / "trace.log").write_text(json.dumps(event) + "\n")
    for name, why in (("notes.md", "not valid JSON"), ("trace.log", "read from a .jsonl")):
        r = cli("trace", "show", name)
        assert r.code == 2, r
        assert r.out == ""
        assert r.err.splitlines() == [r.err.strip()], r.err  # one line
        assert r.err.startswith(f"eidolons: {name}: not a trace or an envelope (")
        assert why in r.err
