"""The trace head anchored on this host (ADR 0012): a cut tail, or a tail rewritten with
a recomputed chain, is a break; a trace with no head says so instead of "intact"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eidolons.ecl.events import chained, next_link
from eidolons.keys.host import head_path, recorded
from eidolons.trace.log import append_event, append_events, read_snapshot
from tests.conftest import Run, run_cli


def _trace(project: Path, n: int = 4) -> Path:
    path = project / ".eidolons" / ".trace" / "t1.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        append_event(path, {"event": "emit", "thread_id": "t1", "n": i})
    return path


def _lines(path: Path) -> list[bytes]:
    return [x for x in path.read_bytes().split(b"\n") if x.strip()]


def _verify(project: Path, *args: str | Path) -> Run:
    return run_cli("trace", "verify", *args, "--block", "--json", cwd=project)


def _rechain(lines: list[bytes], events: list[dict[str, object]]) -> bytes:
    """What an agent that knows the chain rule writes: valid links all the way down."""
    out = list(lines)
    for event in events:
        seq, prev = next_link(out[-1] if out else None, len(out))
        out.append(json.dumps(chained(event, seq, prev), separators=(",", ":")).encode())
    return b"".join(x + b"\n" for x in out)


def test_normal_appends_stay_anchored_and_intact(project: Path) -> None:
    path = _trace(project)
    assert recorded(path) is not None and recorded(path)[0] == 4  # type: ignore[index]
    r = _verify(project, "t1")
    chain = r.json()["chains"][0]
    assert r.code == 0, r
    assert chain["state"] == "intact" and chain["head"]["state"] == "anchored"
    assert chain["head"]["seq"] == 4 and chain["head"]["after"] == 0
    text = run_cli("trace", "verify", path, "--block", cwd=project)
    assert text.code == 0 and "head anchored on this host at seq 4" in text.out


def test_events_written_together_move_the_head_and_a_later_cut_is_a_break(
    project: Path,
) -> None:
    # a pass writes its verify_pass and receive in one write: the head must follow both,
    # and every append after them, or a cut of the later tail goes unseen
    path = _trace(project, 2)
    append_events(path, [{"event": "verify_pass", "n": 2}, {"event": "receive", "n": 3}])
    assert recorded(path)[0] == 4  # type: ignore[index]
    append_event(path, {"event": "verify_fail", "thread_id": "t1", "n": 4})
    assert recorded(path)[0] == 5  # type: ignore[index]
    path.write_bytes(b"".join(x + b"\n" for x in _lines(path)[:2]))
    r = _verify(project, "t1")
    assert r.code == 3 and r.json()["chains"][0]["head"]["state"] == "cut", r


def test_a_cut_tail_is_a_break(project: Path) -> None:
    path = _trace(project)
    path.write_bytes(b"".join(x + b"\n" for x in _lines(path)[:-2]))
    r = _verify(project, path)
    chain = r.json()["chains"][0]
    assert r.code == 3, r
    assert chain["state"] == "intact"  # the links alone cannot tell
    assert chain["head"]["state"] == "cut" and chain["ok"] is False
    assert "tail cut or rewritten after seq 2" in chain["head"]["reason"]
    text = run_cli("trace", "verify", "t1", "--block", cwd=project)
    assert text.code == 3 and "✗ tail cut or rewritten after seq 2" in text.out
    warn = run_cli("trace", "verify", "t1", "--mode", "warn", "--json", cwd=project)
    assert warn.code == 0 and warn.json()["all_pass"] is False


def test_a_tail_rewritten_with_a_recomputed_chain_is_a_break(project: Path) -> None:
    path = _trace(project)
    kept = _lines(path)[:2]
    forged: list[dict[str, object]] = [
        {"event": "emit", "thread_id": "t1", "n": f"forged{i}"} for i in range(2)
    ]
    path.write_bytes(_rechain(kept, forged))  # same length, every link valid
    r = _verify(project, "t1")
    chain = r.json()["chains"][0]
    assert chain["state"] == "intact" and r.code == 3, r
    assert chain["head"]["state"] == "rewritten"
    assert "the line at seq 4 is not the head" in chain["head"]["reason"]
    # longer than the head, still rewritten under it
    path.write_bytes(_rechain(kept, forged * 3))
    assert _verify(project, "t1").json()["chains"][0]["head"]["state"] == "rewritten"


def test_the_tools_next_append_does_not_re_anchor_a_cut_tail(project: Path) -> None:
    path = _trace(project)
    path.write_bytes(b"".join(x + b"\n" for x in _lines(path)[:-2]))
    append_event(path, {"event": "emit", "thread_id": "t1", "n": "after the cut"})
    append_event(path, {"event": "emit", "thread_id": "t1", "n": "and another"})
    assert recorded(path) == (4, recorded(path)[1])  # type: ignore[index]
    r = _verify(project, "t1")
    assert r.code == 3 and r.json()["chains"][0]["head"]["state"] == "rewritten", r


def test_a_trace_with_no_head_on_this_host_says_so(project: Path) -> None:
    path = _trace(project)
    head_path(path).unlink()  # as a trace written upstream, or copied from another host
    r = _verify(project, "t1")
    chain = r.json()["chains"][0]
    assert r.code == 0 and chain["head"]["state"] == "none", r
    text = run_cli("trace", "verify", "t1", "--block", cwd=project)
    assert "no head anchor on this host" in text.out and "head anchored" not in text.out


def test_a_damaged_head_file_fails_closed(project: Path) -> None:
    path = _trace(project)
    head_path(path).write_bytes(b"garbage")
    r = _verify(project, "t1")
    assert r.code == 3 and r.json()["chains"][0]["head"]["state"] == "unreadable", r


def test_a_deleted_trace_whose_head_this_host_holds_is_a_break(project: Path) -> None:
    path = _trace(project)
    path.unlink()
    for name in ("t1", str(path)):
        r = _verify(project, name)
        assert r.code == 3, r
        assert r.json()["chains"][0]["head"]["state"] == "cut"
    other = run_cli("trace", "verify", "t2", "--block", cwd=project)
    assert other.code != 0 and "no trace for a thread of that id" in other.err


def test_an_honest_append_during_verify_is_no_cut(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The head is read before the trace's bytes: a gate appending while ``trace verify``
    runs leaves a head at or behind what was read (later lines not anchored), never one
    past it, which would report the honest append as a cut tail."""
    import eidolons.trace.verify as tv

    _trace(project)
    real = read_snapshot  # what traceverify imports and calls

    def read_then_append(file: Path, decode: object = None) -> tuple[list[bytes], list[object]]:
        out = real(file, decode)  # type: ignore[arg-type]
        append_event(file, {"event": "emit", "thread_id": "t1", "n": 99})  # a gate, meanwhile
        return out  # type: ignore[return-value]

    monkeypatch.setattr(tv, "read_snapshot", read_then_append)
    r = _verify(project, "t1")
    chain = r.json()["chains"][0]
    assert r.code == 0, chain
    assert chain["head"]["state"] == "anchored" and chain["lines"] == 4
