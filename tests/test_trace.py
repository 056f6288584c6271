"""The trace file: append-only, safe under concurrent writers, tolerant when read."""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Callable
from pathlib import Path

import pytest

from eidolons.errors import TraceWriteError
from eidolons.trace.log import append_event, iter_reverse, read_events, thread_file_name
from tests.conftest import Run, emit_payload, read_trace

Cli = Callable[..., Run]
WRITERS = 8
EVENTS_EACH = 250


def _writer(path: str, writer: int) -> None:
    for i in range(EVENTS_EACH):
        append_event(
            Path(path), {"event": "emit", "writer": writer, "i": i, "pad": "x" * (i % 7 * 300)}
        )


def test_concurrent_writers_lose_and_tear_nothing(tmp_path: Path) -> None:
    path = tmp_path / "t" / "thread.jsonl"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(path), w)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""  # ends with a newline
    events = [json.loads(line) for line in lines[:-1]]  # every line parses
    assert len(events) == WRITERS * EVENTS_EACH
    seen = {(e["writer"], e["i"]) for e in events}
    assert len(seen) == WRITERS * EVENTS_EACH
    for w in range(WRITERS):  # each writer's own events stay in order
        assert [e["i"] for e in events if e["writer"] == w] == list(range(EVENTS_EACH))


def test_concurrent_gate_processes_on_one_thread(cli: Cli, project: Path) -> None:
    """Real CLI processes verifying at once all land in one well-formed trace."""
    import subprocess
    import sys

    from tests.conftest import clean_env

    _, envelope, env = emit_payload(cli, project)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "eidolons", "verify-envelope", str(envelope), "--block"],
            cwd=project,
            env=clean_env(),
            stderr=subprocess.DEVNULL,
        )
        for _ in range(12)
    ]
    assert all(p.wait(60) == 0 for p in procs)
    events = read_trace(project / ".eidolons/.trace" / f"{env['thread_id']}.jsonl")
    assert [e["event"] for e in events].count("verify_pass") == 12


def test_torn_line_is_reported_skipped_and_not_glued_to(tmp_path: Path) -> None:
    import hashlib

    def unlinked(event: dict[str, object] | None) -> dict[str, object] | None:
        return (
            None if event is None else {k: v for k, v in event.items() if k not in ("seq", "prev")}
        )

    path = tmp_path / "t.jsonl"
    append_event(path, {"event": "emit", "n": 1})
    torn = b'{"event": "verify_pass", "message_id": "m", "tor'
    with path.open("ab") as fh:
        fh.write(torn)  # a writer died mid-line
    lines = list(read_events(path))
    assert [unlinked(ln.event) for ln in lines[:1]] == [{"event": "emit", "n": 1}]
    assert lines[1].event is None and "torn" in (lines[1].error or "")
    append_event(path, {"event": "emit", "n": 2})
    good = [unlinked(ln.event) for ln in read_events(path) if ln.event is not None]
    assert good == [{"event": "emit", "n": 1}, {"event": "emit", "n": 2}]
    # old bytes kept, never rewritten; the new line is the third, linked to the torn one
    link = f'"seq":3,"prev":"{hashlib.sha256(torn).hexdigest()}"'.encode()
    assert torn + b'\n{"event":"emit","n":2,' + link + b"}\n" in path.read_bytes()


def test_damaged_lines_are_skipped_in_both_directions(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"n":1}\nnot json\n[1,2]\n\n{"n":2}\n{"n":\n{"n":3}\n')
    forward = list(read_events(path))
    assert [ln.event for ln in forward if ln.event] == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert sum(1 for ln in forward if ln.event is None) == 3
    backward = [ln.event for ln in iter_reverse(path) if ln.event]
    assert backward == [{"n": 3}, {"n": 2}, {"n": 1}]


@pytest.mark.parametrize("block", [1, 2, 7, 64, 4096])
def test_reverse_reading_matches_forward_for_any_block_size(tmp_path: Path, block: int) -> None:
    path = tmp_path / "t.jsonl"
    for i in range(60):
        append_event(path, {"i": i, "s": "y" * (i * 3)})
    assert [ln.event for ln in iter_reverse(path, block=block)] == [
        ln.event for ln in reversed(list(read_events(path)))
    ]


def test_reverse_reading_reports_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"n":1}\n{"n":2')
    lines = list(iter_reverse(path, block=3))
    assert lines[0].event is None and "torn" in (lines[0].error or "")
    assert lines[1].event == {"n": 1}


def test_append_refuses_a_non_regular_trace(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").mkdir()
    with pytest.raises(TraceWriteError):
        append_event(tmp_path / "d.jsonl", {"e": 1})


def test_append_does_not_follow_a_symlinked_trace(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("precious\n")
    (tmp_path / "t.jsonl").symlink_to(target)
    with pytest.raises(TraceWriteError):
        append_event(tmp_path / "t.jsonl", {"e": 1})
    assert target.read_text() == "precious\n"


@pytest.mark.parametrize(
    ("thread", "name"),
    [
        ("01942d10-0002-7e04-9c5d-2df1b8c3e702", "01942d10-0002-7e04-9c5d-2df1b8c3e702"),
        ("../x", "unknown"),
        ("a/b", "unknown"),
        (".hidden", "unknown"),
        ("", "unknown"),
        (None, "unknown"),
        ("x" * 300, "unknown"),
        ("ok_id.1", "ok_id.1"),
    ],
)
def test_thread_file_names(thread: str | None, name: str) -> None:
    assert thread_file_name(thread) == name


def test_trace_show(cli: Cli, project: Path) -> None:
    payload, envelope, env = emit_payload(cli, project)
    cli("verify-envelope", envelope, "--block")
    payload.write_text("changed")
    cli("verify-envelope", envelope, "--block")
    trace = project / ".eidolons/.trace" / f"{env['thread_id']}.jsonl"
    with trace.open("ab") as fh:
        fh.write(b"garbage line\n")
    r = cli("trace", "show", env["thread_id"])
    assert r.code == 0
    lines = r.out.splitlines()
    assert len(lines) == 3
    assert "emit" in lines[0] and "verify_pass" in lines[1]
    assert lines[2].startswith("!!") and "INTEGRITY_MISMATCH (refused)" in lines[2]
    assert "damaged line skipped" in r.err and ":4:" in r.err
    r = cli("trace", "show", str(trace), "--json")
    assert [e["event"] for e in r.json()] == ["emit", "verify_pass", "verify_fail"]
    assert cli("trace", "show", "no-such-thread").code == 1
    assert cli("trace", "show", "../etc").code == 2


def test_trace_without_a_verb_prints_the_verbs_and_exits_0(cli: Cli) -> None:
    for args in ((), ("-h",)):
        r = cli("trace", *args)
        assert (r.code, r.err) == (0, ""), args
        assert r.out.startswith("usage: eidolons trace ")
        for verb in ("show", "graph", "verify", "cost", "otel", "report", "list", "export"):
            assert f"\n    {verb} " in r.out, verb
    assert cli("trace", "frobnicate").code == 2


def test_mistyped_trace_verb_names_the_nearest_one(cli: Cli) -> None:
    r = cli("trace", "shw", "x")
    assert r.code == 2 and r.out == ""
    assert r.err.splitlines()[-1] == (
        "eidolons trace: error: unknown action 'shw' (did you mean 'show'?)"
    )


def test_reverse_filter_decodes_only_candidate_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    for i in range(30):
        append_event(path, {"message_id": f"m-{i % 3}", "i": i})
    with path.open("ab") as fh:
        fh.write(b"garbage without the id\n")
    hits = [ln.event for ln in iter_reverse(path, block=16, contains=b'"m-1"')]
    assert [e["i"] for e in hits if e] == [i for i in reversed(range(30)) if i % 3 == 1]
    assert all(ln.event is not None for ln in iter_reverse(path, contains=b"m-2"))
