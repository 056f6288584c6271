"""One test-suite for every trace store: the JSONL files and PostgreSQL must give the same
answers (the receiver's record lookup above all)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eidolons.ecl.events import GENESIS, line_hash, verify_chain
from eidolons.trace.log import JsonlStore
from eidolons.trace.store import TraceStore
from tests.tracestore.pgserver import ORCH_LOGIN, PgServer

MID = "7d3a0a4e-1b2c-4d5e-8f90-123456789abc"
THREAD = "2f1e7c60-0000-4000-8000-00000000aaaa"  # the events' thread_id field only


@pytest.fixture(scope="module")
def pg_db(pg: PgServer, shared_db: str) -> str:
    return pg.dsn(ORCH_LOGIN, shared_db)


@pytest.fixture(params=["jsonl", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TraceStore]:
    if request.param == "jsonl":
        yield JsonlStore(tmp_path)
        return
    from eidolons.trace.postgres import PostgresStore

    s = PostgresStore(request.getfixturevalue("pg_db"))
    try:
        yield s
    finally:
        s.close()


def login(store: TraceStore) -> str | None:
    """The login a store reports as the writer of what this test wrote (None: unknown)."""
    from eidolons.trace.postgres import PostgresStore

    return store.connection().info.user if isinstance(store, PostgresStore) else None


@pytest.fixture
def thread() -> str:
    return f"thread-{uuid.uuid4()}"


def add_raw(store: TraceStore, thread: str, raw: bytes) -> None:
    """A line not written by this tool's encoder (by hand, or imported)."""
    if isinstance(store, JsonlStore):
        path = store.path(thread)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab") as fh:
            fh.write(raw + b"\n")
    else:
        store.append_lines(thread, [raw])  # type: ignore[attr-defined]


def verdict(kind: str = "verify_pass", mid: str = MID, **extra: Any) -> dict[str, Any]:
    event = {
        "ts": "2026-12-01T09:00:00.000Z",
        "event": kind,
        "message_id": mid,
        "thread_id": THREAD,
        "from": "atlas@1.0.0",
        "to": "vigil@1.0.0",
        "integrity_method": "sha256",
        "gate": "orchestrator",
    }
    event.update(extra)
    return event


def test_append_returns_what_was_written(store: TraceStore, thread: str) -> None:
    first = store.append(thread, verdict(n=1))
    second = store.append(thread, verdict(n=2))
    assert first.event["n"] == 1 and second.event["n"] == 2
    assert list(store.iter_raw(thread)) == [first.line, second.line]
    assert [json.loads(x.line) for x in (first, second)] == [first.event, second.event]
    read = [ln.event for ln in store.iter_thread(thread)]
    writers = {e.pop("written_by", None) for e in read if e is not None}  # the reader's key
    assert read == [first.event, second.event]
    assert writers == {login(store)}
    assert thread in first.location


def test_append_all_links_the_events_as_separate_appends_would(
    store: TraceStore, thread: str
) -> None:
    store.append(thread, verdict(n=0))
    written = store.append_all(thread, [verdict(n=1), verdict("verify_fail", n=2)])
    raw = list(store.iter_raw(thread))
    assert raw[1:] == [a.line for a in written]
    assert [a.event["seq"] for a in written] == [2, 3]
    assert written[0].event["prev"] == line_hash(raw[0])
    assert written[1].event["prev"] == line_hash(raw[1])
    assert verify_chain(raw).state == "intact"
    assert store.latest_verdict(thread, MID)["n"] == 2  # type: ignore[index]


def test_no_record(store: TraceStore, thread: str) -> None:
    assert store.latest_verdict(thread, MID) is None
    store.append(thread, verdict(mid="another-message"))
    assert store.latest_verdict(thread, MID) is None


def test_latest_orchestrator_verdict_wins(store: TraceStore, thread: str) -> None:
    store.append(thread, verdict("verify_pass", n=1))
    store.append(thread, verdict("verify_fail", n=2))
    assert store.latest_verdict(thread, MID)["n"] == 2  # type: ignore[index]
    store.append(thread, verdict("verify_pass", n=3))
    assert store.latest_verdict(thread, MID)["n"] == 3  # type: ignore[index]


@pytest.mark.parametrize(
    "override",
    [
        {"gate": "receiver"},
        {"gate": "sender"},
        {"gate": None},
        {"event": "emit"},
        {"event": "receive"},
    ],
)
def test_only_orchestrator_verdicts_are_records(
    store: TraceStore, thread: str, override: dict[str, Any]
) -> None:
    store.append(thread, verdict(n=1))
    event = verdict(n=2)
    for key, value in override.items():
        if value is None:
            del event[key]
        else:
            event[key] = value
    store.append(thread, event)
    assert store.latest_verdict(thread, MID)["n"] == 1  # type: ignore[index]


def test_the_record_is_looked_up_in_the_envelopes_thread_only(
    store: TraceStore, thread: str
) -> None:
    store.append(thread + "-other", verdict())
    assert store.latest_verdict(thread, MID) is None
    assert store.latest_verdict(thread + "-other", MID) is not None


def test_unsafe_thread_ids_share_the_unknown_thread(store: TraceStore, thread: str) -> None:
    mid = str(uuid.uuid4())
    store.append("../escape", verdict(mid=mid, n=1))
    assert store.latest_verdict(None, mid)["n"] == 1  # type: ignore[index]
    assert store.latest_verdict("unknown", mid)["n"] == 1  # type: ignore[index]
    assert store.latest_verdict(".hidden", mid)["n"] == 1  # type: ignore[index]
    assert "unknown" in store.threads()
    assert "../escape" not in store.threads()


def test_an_id_spelled_another_way_is_never_evidence(store: TraceStore, thread: str) -> None:
    # the same JSON value, but not as this tool writes it: skipped by both stores
    raw = json.dumps(verdict(), separators=(",", ":")).replace(MID, MID[:-1] + "\\u0063")
    assert json.loads(raw)["message_id"] == MID
    add_raw(store, thread, raw.encode("ascii"))
    assert store.latest_verdict(thread, MID) is None


def test_damaged_lines_are_reported_and_lookup_goes_on(store: TraceStore, thread: str) -> None:
    store.append(thread, verdict(n=1))
    add_raw(store, thread, b'{"not json' + MID.encode())
    add_raw(store, thread, b"[1, 2]")
    lines = list(store.iter_thread(thread))
    assert [ln.event is None for ln in lines] == [False, True, True]
    assert lines[1].error and "JSON" in lines[1].error
    assert store.latest_verdict(thread, MID)["n"] == 1  # type: ignore[index]


def test_a_later_hand_spelled_line_does_not_hide_the_record(store: TraceStore, thread: str) -> None:
    store.append(thread, verdict(n=1))
    raw = json.dumps(verdict(n=2), separators=(",", ":")).replace(MID, MID[:-1] + "\\u0063")
    add_raw(store, thread, raw.encode("ascii"))
    assert store.latest_verdict(thread, MID)["n"] == 1  # type: ignore[index]


def test_threads_and_has_thread(store: TraceStore, thread: str) -> None:
    assert thread not in store.threads()
    assert not store.has_thread(thread)
    store.append(thread, verdict())
    store.append(thread + "-b", verdict())
    names = store.threads()
    assert names == sorted(names)
    assert {thread, thread + "-b"} <= set(names)
    assert store.has_thread(thread)


def test_lines_carry_the_one_hash_chain(store: TraceStore, thread: str) -> None:
    a = store.append(thread, verdict(n=1))
    b = store.append(thread, verdict(n=2))
    assert (a.event["seq"], a.event["prev"]) == (1, GENESIS)
    assert (b.event["seq"], b.event["prev"]) == (2, line_hash(a.line))
    report = verify_chain(store.iter_raw(thread))
    assert report.state == "intact" and report.lines == 2


def test_read_new_returns_only_what_was_appended_since(store: TraceStore, thread: str) -> None:
    """``trace show --follow`` on either store."""
    store.append(thread, verdict(n=1))
    store.append(thread, verdict(n=2))
    lines, cursor = store.read_new(thread, 0)
    assert [ln.event["n"] for ln in lines if ln.event] == [1, 2]
    assert store.read_new(thread, cursor) == ([], cursor)
    store.append(thread, verdict(n=3))
    lines, cursor = store.read_new(thread, cursor)
    assert [ln.event["n"] for ln in lines if ln.event] == [3]


def test_find_payload_names_the_hand_off(store: TraceStore, thread: str) -> None:
    """ADR 0007's "does the trace name this payload?" on either store."""
    key = f"out/{thread}.md"
    assert store.find_payload([key]) is None
    store.append(thread, verdict("receive", payload_path=key))  # a receive does not count
    assert store.find_payload([key]) is None
    raw = json.dumps(verdict("emit", payload_path=key), separators=(",", ":"))
    add_raw(store, thread, raw.replace('"payload_path":', '"payload_path": ').encode())
    assert store.find_payload([key]) is None  # spelled another way: not this tool's line
    store.append(thread, verdict("emit", payload_path=key, n=1))
    store.append(thread, verdict("verify_pass", payload_path=key, n=2))
    found = store.find_payload(["other.md", key])
    assert found is not None and found["n"] == 1  # the thread's first naming event
    assert store.find_payload(["other.md"]) is None
    assert store.find_payload([]) is None


def test_who_wrote_a_line_is_the_stores_word_never_the_lines(
    store: TraceStore, thread: str
) -> None:
    """``written_by`` is set by a reader that knows the writer (PostgreSQL's row): a line
    that claims one itself is read without it, or with the real login."""
    add_raw(store, thread, json.dumps(verdict(written_by="orchestrator-of-record")).encode())
    (line,) = list(store.iter_thread(thread))
    assert line.event is not None
    assert line.event.get("written_by") == login(store)
