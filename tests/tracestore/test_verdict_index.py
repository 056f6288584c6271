"""The verdict index (ADR 0022): a hint for the JSONL record lookup, never evidence.

Every test compares with what the full backward scan answers on the same trace: the index
may only make the lookup faster. "Answered by the index" is shown without timing: the
full scan (``JsonlStore.latest_verdict``'s fallback, ``log.latest_counted``) is made to
fail, or the lines decoded are counted.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

import eidolons.trace.log
from eidolons.errors import InputError
from eidolons.trace import indexes, log
from eidolons.trace.log import JsonlStore, iter_reverse

MID = "7d3a0a4e-1b2c-4d5e-8f90-123456789abc"
OTHER = "0b9e1f1c-2222-4333-8444-555555555555"


@pytest.fixture
def store(tmp_path: Path) -> JsonlStore:
    return JsonlStore(tmp_path)


@pytest.fixture
def thread() -> str:
    return f"thread-{uuid.uuid4()}"


def verdict(kind: str = "verify_pass", mid: str = MID, **extra: Any) -> dict[str, Any]:
    event = {
        "ts": "2026-12-01T09:00:00.000Z",
        "event": kind,
        "message_id": mid,
        "thread_id": "t",
        "from": "atlas@1.0.0",
        "to": "vigil@1.0.0",
        "gate": "orchestrator",
    }
    event.update(extra)
    return event


def receipt_events(mid: str = MID) -> list[dict[str, Any]]:
    """What a receiver gate appends per reception: never a record."""
    return [
        verdict("verify_pass", mid, gate="receiver", receiver="vigil"),
        verdict("receive", mid, gate="receiver", receiver="vigil"),
    ]


def add_raw(store: JsonlStore, thread: str, raw: bytes) -> None:
    """A line appended by another tool (upstream bash tools, an import, a hand edit)."""
    store.path(thread).parent.mkdir(parents=True, exist_ok=True)
    with store.path(thread).open("ab") as fh:
        fh.write(raw + b"\n")


def raw_verdict(**fields: Any) -> bytes:
    return json.dumps(verdict(**fields), separators=(",", ":")).encode("ascii")


def index_file(store: JsonlStore, thread: str) -> Path:
    return Path(indexes.index_path(os.stat(store.path(thread))))


def full_scan(store: JsonlStore, thread: str, mid: str = MID) -> dict[str, Any] | None:
    """The answer without the index (the lookup as it was before it): what the lookup
    must always give."""
    from eidolons.io.config import trace_scan_bound
    from eidolons.trace.store import TraceReadError, counted_for, judged_line, verdict_needle

    needle, bound = verdict_needle(mid), trace_scan_bound()
    try:
        path = store.path(thread)
        for line in iter_reverse(path, contains=needle, max_bytes=bound, decode=judged_line):
            if counted_for(line) == mid:
                return line.event
    except InputError as exc:
        raise TraceReadError(str(exc)) from None
    return None


@pytest.fixture
def no_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    """The full scan fails the test: the lookup must be answered by the index."""

    def refuse(*a: Any, **k: Any) -> Any:
        raise AssertionError("the lookup fell back to the full scan")

    monkeypatch.setattr(log, "latest_counted", refuse)


def n_of(record: dict[str, Any] | None) -> Any:
    return None if record is None else record.get("n")


def slots(path: Path) -> list[tuple[int, bytes]]:
    data = path.read_bytes()[indexes.HEADER :]
    found = []
    for number in range(len(data) // indexes.SLOT):
        raw = data[number * indexes.SLOT : (number + 1) * indexes.SLOT]
        if raw[:16] != indexes.NO_ID:
            found.append((number, raw))
    return found


def slot_of(path: Path, mid: str) -> tuple[int, bytes]:
    idh = indexes.id_hash(json.dumps(mid)[1:-1].encode())
    (hit,) = [s for s in slots(path) if s[1][:16] == idh]
    return hit


def line_span(store: JsonlStore, thread: str, predicate: Any) -> tuple[int, bytes]:
    """(offset, bytes) of the first line whose event satisfies ``predicate``."""
    data = store.path(thread).read_bytes()
    at = 0
    for raw in data.split(b"\n"):
        if raw.strip() and predicate(json.loads(raw)):
            return at, raw
        at += len(raw) + 1
    raise AssertionError("no such line")


def forge_slot(store: JsonlStore, thread: str, mid: str, off: int, line: bytes) -> None:
    """Rewrite ``mid``'s slot to point at ``line`` at ``off``, with a valid checksum."""
    path = index_file(store, thread)
    number, raw = slot_of(path, mid)
    key = indexes.file_key(os.stat(store.path(thread)))
    forged = indexes.slot_bytes(
        key, number, raw[:16], off, len(line), hashlib.sha256(line).digest()
    )
    data = bytearray(path.read_bytes())
    at = indexes.HEADER + number * indexes.SLOT
    data[at : at + indexes.SLOT] = forged
    path.write_bytes(bytes(data))


# -- the index answers, with the latest-verdict semantics of the scan ----------------------


def test_old_absent_and_root_messages_are_answered_by_the_index(
    store: JsonlStore, thread: str, no_scan: None
) -> None:
    store.append(thread, verdict(mid=thread, n="root"))  # message_id = thread_id
    store.append(thread, verdict(mid=MID, n="old"))
    for i in range(300):
        store.append(thread, verdict(mid=f"m-{i}", thread_id=thread, n=i))
        for event in receipt_events(f"m-{i}"):
            store.append(thread, dict(event, thread_id=thread))
    assert n_of(store.latest_verdict(thread, thread)) == "root"
    assert n_of(store.latest_verdict(thread, MID)) == "old"
    assert n_of(store.latest_verdict(thread, "m-150")) == 150
    assert store.latest_verdict(thread, "never-verified") is None


def test_the_latest_verdict_wins_through_the_index(
    store: JsonlStore, thread: str, no_scan: None
) -> None:
    store.append(thread, verdict("verify_pass", n=1))
    store.append(thread, verdict("verify_fail", n=2))
    store.append(thread, verdict(mid=OTHER, n=9))
    assert n_of(store.latest_verdict(thread, MID)) == 2
    store.append(thread, verdict("verify_pass", n=3))
    assert n_of(store.latest_verdict(thread, MID)) == 3
    for event in receipt_events():  # a receiver's verify_pass is never a record
        store.append(thread, event)
    store.append(thread, verdict("verify_pass", gate="sender", n=4))
    assert n_of(store.latest_verdict(thread, MID)) == 3


def test_the_thousandth_reception_decodes_what_the_first_does(
    store: JsonlStore, thread: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each reception appends lines holding the id; the lookup does not read them."""
    decoded: list[bytes] = []
    real = eidolons.trace.log.decode_line

    def counting(raw: bytes, lineno: int) -> Any:
        decoded.append(raw)
        return real(raw, lineno)

    store.append(thread, verdict(n=1))
    counts = []
    for receptions in (1, 200):
        while sum(1 for _ in store.iter_raw(thread)) < 1 + 2 * receptions:
            for event in receipt_events():
                store.append(thread, event)
        monkeypatch.setattr(eidolons.trace.log, "decode_line", counting)
        decoded.clear()
        assert n_of(store.latest_verdict(thread, MID)) == 1
        counts.append(len(decoded))
        monkeypatch.setattr(eidolons.trace.log, "decode_line", real)
    assert counts == [1, 1]  # the pointed line only


# -- lines the index does not cover: read as the full scan reads them --------------------


def test_a_tail_appended_by_another_tool_is_scanned_and_wins(
    store: JsonlStore, thread: str
) -> None:
    store.append(thread, verdict("verify_pass", n=1))
    store.append(thread, verdict(mid=OTHER, n=2))
    add_raw(store, thread, raw_verdict(kind="verify_fail", n=3))  # by hand, unchained
    assert n_of(store.latest_verdict(thread, MID)) == 3 == n_of(full_scan(store, thread))
    # a later line spelling the id another way is not evidence, there as in the scan
    spelled = raw_verdict(n=4).replace(MID.encode(), MID[:-1].encode() + b"\\u0063")
    add_raw(store, thread, spelled)
    assert n_of(store.latest_verdict(thread, MID)) == 3 == n_of(full_scan(store, thread))


def test_the_next_append_indexes_the_foreign_tail(
    store: JsonlStore, thread: str, no_scan: None
) -> None:
    store.append(thread, verdict("verify_pass", n=1))
    add_raw(store, thread, raw_verdict(kind="verify_fail", n=2))
    add_raw(store, thread, b'{"torn": "a writer died mid-li')  # no newline: torn
    store.append(thread, verdict(mid=OTHER, n=3))  # after the torn line, on its own line
    assert n_of(store.latest_verdict(thread, MID)) == 2
    assert n_of(store.latest_verdict(thread, OTHER)) == 3


def test_lines_the_scan_would_not_accept_are_never_indexed(
    store: JsonlStore, thread: str, no_scan: None
) -> None:
    store.append(thread, verdict(n=1))
    spelled = raw_verdict(n=2).replace(MID.encode(), MID[:-1].encode() + b"\\u0063")
    add_raw(store, thread, spelled)  # the same JSON value, not as this tool writes it
    twice = raw_verdict(n=3)[:-1] + b',"message_id":"' + OTHER.encode() + b'"}'
    add_raw(store, thread, twice)  # a duplicate key: the event is OTHER's, not MID's
    add_raw(store, thread, raw_verdict(n=4, gate="receiver"))
    add_raw(store, thread, b'{"event":"verify_pass","message_id":"' + MID.encode() + b'"')
    store.append(thread, verdict(mid="unrelated", n=5))  # indexes the lines above
    for mid in (MID, OTHER):
        assert n_of(store.latest_verdict(thread, mid)) == n_of(full_scan(store, thread, mid))
    assert n_of(store.latest_verdict(thread, MID)) == 1
    assert n_of(store.latest_verdict(thread, OTHER)) == 3


def test_an_overlong_foreign_line_is_damage_for_the_index_too(
    store: JsonlStore, thread: str, no_scan: None
) -> None:
    store.append(thread, verdict(n=1))
    big = raw_verdict(kind="verify_fail", n=2, pad="x" * eidolons.trace.log.MAX_LINE_BYTES)
    add_raw(store, thread, big)
    # blanks then a verdict: JSON, but past the length rule; its end is a verdict
    add_raw(store, thread, b" " * (2 * eidolons.trace.log.MAX_LINE_BYTES + 10) + raw_verdict(n=6))
    add_raw(store, thread, raw_verdict(kind="verify_fail", n=3, mid=OTHER))
    store.append(thread, verdict(mid="unrelated"))
    assert n_of(store.latest_verdict(thread, MID)) == 1 == n_of(full_scan(store, thread))
    assert n_of(store.latest_verdict(thread, OTHER)) == 3 == n_of(full_scan(store, thread, OTHER))


def test_the_scan_bound_applies_to_the_uncovered_tail_only(
    store: JsonlStore, thread: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An old record past the bound is found through the index (the bound is a cost
    guard for reading, ADR 0022); a tail past the bound still refuses."""
    from eidolons.trace.store import TraceReadError

    store.append(thread, verdict(n=1))
    for i in range(120):
        store.append(thread, verdict(mid=f"filler-{i}", pad="y" * 500))
    monkeypatch.setenv("EIDOLONS_MAX_TRACE_SCAN_BYTES", str(16 * 1024))
    assert n_of(store.latest_verdict(thread, MID)) == 1
    assert store.latest_verdict(thread, "absent") is None
    with pytest.raises(TraceReadError, match="scan bound"):
        full_scan(store, thread)
    add_raw(store, thread, b" " * (20 * 1024))  # an uncovered tail past the bound
    with pytest.raises(TraceReadError, match="scan bound"):
        store.latest_verdict(thread, MID)


# -- a damaged or forged index: slower, never another answer ------------------------------


def three_verdicts(store: JsonlStore, thread: str) -> None:
    store.append(thread, verdict("verify_pass", n=1))
    store.append(thread, verdict("verify_pass", mid=OTHER, n=2))
    store.append(thread, verdict("verify_fail", n=3))


def test_a_slot_pointed_at_another_messages_pass_falls_back(store: JsonlStore, thread: str) -> None:
    three_verdicts(store, thread)
    off, line = line_span(store, thread, lambda e: e.get("message_id") == OTHER)
    forge_slot(store, thread, MID, off, line)
    assert n_of(store.latest_verdict(thread, MID)) == 3  # the scan's answer


def test_a_slot_whose_line_was_rewritten_falls_back(store: JsonlStore, thread: str) -> None:
    """The trace changed under the index: the pointed line is re-read and re-hashed."""
    three_verdicts(store, thread)
    path = store.path(thread)
    data = path.read_bytes()
    old = data.split(b"\n")[2]
    new = old.replace(b'"verify_fail"', b'"verify_pasS"')  # same length, other bytes
    path.write_bytes(data.replace(old, new))
    assert n_of(store.latest_verdict(thread, MID)) == 1 == n_of(full_scan(store, thread))


def test_a_pointed_line_rewritten_into_an_older_pass_is_not_taken(
    store: JsonlStore, thread: str
) -> None:
    """The pointed line is re-hashed, not only re-judged: the indexed fail rewritten in
    place into a pass for the message (same length) and the fail moved to a later covered
    line, also of the same length, so every offset and the last covered line stay put.
    An index trusting any verdict at its offset would answer the pass the scan does not."""
    store.append(thread, verdict("verify_pass", n=1))
    store.append(thread, verdict("verify_fail", n=3))  # the slot points here
    store.append(thread, verdict("receive", mid=OTHER, gate="receiver", pad="x" * 40))
    store.append(thread, verdict("receive", mid=OTHER, gate="receiver"))  # last covered
    path = store.path(thread)
    lines = path.read_bytes().split(b"\n")
    fail, filler = lines[1], lines[2]
    lines[1] = fail.replace(b'"verify_fail"', b'"verify_pass"')
    moved = fail[:-1] + b',"pad":"' + b"p" * (len(filler) - len(fail) - 9) + b'"}'
    assert len(moved) == len(filler) and len(lines[1]) == len(fail)
    lines[2] = moved
    path.write_bytes(b"\n".join(lines))
    expected = full_scan(store, thread)
    assert expected is not None and expected["event"] == "verify_fail"
    assert store.latest_verdict(thread, MID) == expected


def test_a_slot_pointed_into_a_line_or_past_the_coverage_falls_back(
    store: JsonlStore, thread: str
) -> None:
    three_verdicts(store, thread)
    size = store.path(thread).stat().st_size
    damaged = b"1" + raw_verdict(n=9)  # not JSON as a line; its suffix is a verdict
    add_raw(store, thread, damaged)
    store.append(thread, verdict(mid="unrelated"))  # covered now
    forge_slot(store, thread, MID, size + 1, damaged[1:])  # the suffix, not a line
    assert n_of(store.latest_verdict(thread, MID)) == 3 == n_of(full_scan(store, thread))
    size = store.path(thread).stat().st_size
    add_raw(store, thread, raw_verdict(n=5))
    forge_slot(store, thread, MID, size, raw_verdict(n=5))  # beyond what it covers
    assert n_of(store.latest_verdict(thread, MID)) == 5 == n_of(full_scan(store, thread))


def test_a_cut_and_regrown_tail_is_not_taken_as_covered(store: JsonlStore, thread: str) -> None:
    """The last covered line is re-read: a tail cut and replaced by another tool with a
    line of the same length is not covered, so its verdict is seen."""
    three_verdicts(store, thread)
    store.append(thread, verdict("receive", mid=OTHER, gate="receiver", pad="z" * 40))
    path = store.path(thread)
    data = path.read_bytes()
    last_start = data.rstrip(b"\n").rfind(b"\n") + 1
    length = len(data) - last_start - 1
    fail = raw_verdict(kind="verify_fail", n=8)
    fail = fail[:-1] + b',"pad":"' + b"p" * (length - len(fail) - 9) + b'"}'
    assert len(fail) == length
    path.write_bytes(data[:last_start] + fail + b"\n")
    assert n_of(store.latest_verdict(thread, MID)) == 8 == n_of(full_scan(store, thread))


def test_a_header_edited_without_its_checksum_is_not_read(store: JsonlStore, thread: str) -> None:
    """A header claiming lines it does not cover (its checksum no longer matching)."""
    store.append(thread, verdict("verify_pass", n=1))
    size = store.path(thread).stat().st_size
    fail = raw_verdict(kind="verify_fail", n=2)
    add_raw(store, thread, fail)
    path = index_file(store, thread)
    data = path.read_bytes()
    key = indexes.file_key(os.stat(store.path(thread)))
    header = indexes.read_header(data, key)
    assert header is not None
    old = indexes.header_slot(key, header)
    header.covered, header.last_start = size + len(fail) + 1, size
    header.last_sha = hashlib.sha256(fail).hexdigest()
    new = indexes.header_slot(key, header)
    forged = new.replace(new.split()[-1], old.split()[-1])  # with the old checksum
    assert forged != new and len(forged) == len(new)
    path.write_bytes(forged + forged + data[indexes.HEADER :])
    assert n_of(store.latest_verdict(thread, MID)) == 2 == n_of(full_scan(store, thread))


def test_an_old_copy_of_the_index_does_not_hide_a_later_fail(
    store: JsonlStore, thread: str
) -> None:
    store.append(thread, verdict("verify_pass", n=1))
    path = index_file(store, thread)
    saved = path.read_bytes()
    store.append(thread, verdict("verify_fail", n=2))
    path.write_bytes(saved)  # replayed: it covers the trace up to the pass only
    assert n_of(store.latest_verdict(thread, MID)) == 2


@pytest.mark.parametrize("damage", ["truncate", "header", "slot", "empty", "garbage"])
def test_a_damaged_index_falls_back_to_the_scan(
    store: JsonlStore, thread: str, damage: str
) -> None:
    three_verdicts(store, thread)
    path = index_file(store, thread)
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[: indexes.HEADER + 10 * indexes.SLOT]
    elif damage == "header":
        for at in (30, indexes.HEADER_SLOT + 30):
            data[at] ^= 1
    elif damage == "slot":
        number, _ = slot_of(path, MID)
        data[indexes.HEADER + number * indexes.SLOT + 20] ^= 1
    elif damage == "empty":
        data = bytearray()
    else:
        data = bytearray(b"\xff" * len(data))
    path.write_bytes(bytes(data))
    assert n_of(store.latest_verdict(thread, MID)) == 3
    assert n_of(store.latest_verdict(thread, OTHER)) == 2
    store.append(thread, verdict("verify_pass", n=4))  # the next append rebuilds it
    assert indexes.read_header(path.read_bytes(), path.stem) is not None


def test_a_slot_zeroed_is_damage_not_absence(store: JsonlStore, thread: str) -> None:
    """Bytes a crash left as zeros never read as "no verdict" (a refused genuine pass)."""
    store.append(thread, verdict("verify_pass", n=1))
    path = index_file(store, thread)
    number, _ = slot_of(path, MID)
    data = bytearray(path.read_bytes())
    at = indexes.HEADER + number * indexes.SLOT
    data[at : at + indexes.SLOT] = bytes(indexes.SLOT)
    path.write_bytes(bytes(data))
    assert n_of(store.latest_verdict(thread, MID)) == 1


def test_another_traces_index_is_not_this_ones(store: JsonlStore, thread: str) -> None:
    three_verdicts(store, thread)
    other = thread + "-b"
    store.append(other, verdict("verify_pass", n=7))
    shutil.copy(index_file(store, other), index_file(store, thread))
    assert n_of(store.latest_verdict(thread, MID)) == 3


def test_a_truncated_or_replaced_trace_gives_the_scans_answer(
    store: JsonlStore, thread: str
) -> None:
    three_verdicts(store, thread)
    path = store.path(thread)
    data = path.read_bytes()
    path.write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 1])  # the fail cut
    assert n_of(store.latest_verdict(thread, MID)) == 1 == n_of(full_scan(store, thread))
    copy = path.with_name("copy.jsonl")
    copy.write_bytes(data)
    os.replace(copy, path)  # the whole file replaced: another inode, no index
    assert n_of(store.latest_verdict(thread, MID)) == 3 == n_of(full_scan(store, thread))


@pytest.mark.parametrize("kind", ["symlink", "fifo", "directory"])
def test_an_index_that_is_not_a_regular_file_is_not_read(
    store: JsonlStore, thread: str, tmp_path: Path, kind: str
) -> None:
    store.append(thread, verdict("verify_pass", n=1))
    path = index_file(store, thread)
    path.unlink()
    if kind == "symlink":
        target = tmp_path / "elsewhere.idx"
        target.write_bytes(b"x")
        path.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    store.append(thread, verdict("verify_fail", n=2))  # never blocks, never follows
    assert n_of(store.latest_verdict(thread, MID)) == 2


def test_an_unwritable_host_directory_leaves_appends_and_lookups_working(
    store: JsonlStore, thread: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(blocker))
    three_verdicts(store, thread)
    assert n_of(store.latest_verdict(thread, MID)) == 3
    assert not list(tmp_path.glob("**/*.tmp"))


def test_the_index_never_lives_in_the_project(store: JsonlStore, thread: str) -> None:
    """An agent can write any file of the project: the index is in the host's config
    directory, beside the trace heads and the keys (ADR 0022)."""
    three_verdicts(store, thread)
    path = index_file(store, thread)
    assert path.is_file()
    assert Path(store.root).resolve() not in path.resolve().parents
    assert path.parent.parent == Path(os.environ["XDG_CONFIG_HOME"]) / "eidolons"


def test_catching_up_finds_every_line_between_blank_ones(
    store: JsonlStore, thread: str, no_scan: None
) -> None:
    store.append(thread, verdict(mid="first"))
    for i in range(6):
        add_raw(store, thread, raw_verdict(mid=f"m-{i}", n=i, pad="q" * (i * 13)))
        add_raw(store, thread, b"   ")
    store.append(thread, verdict(mid="last"))
    for i in range(6):
        assert n_of(store.latest_verdict(thread, f"m-{i}")) == i


def test_the_table_grows_and_keeps_every_message(
    store: JsonlStore, thread: str, no_scan: None
) -> None:
    for i in range(1100):  # past half of the table several times: it grows each time
        store.append(thread, verdict(mid=f"m-{i}", n=i))
    store.append(thread, verdict("verify_fail", mid="m-3", n="late"))
    key = indexes.file_key(os.stat(store.path(thread)))
    header = indexes.read_header(index_file(store, thread).read_bytes(), key)
    assert header is not None and header.capacity >= 4096 and header.count == 1100
    assert [n_of(store.latest_verdict(thread, f"m-{i}")) for i in (0, 511, 512, 1099)] == [
        0,
        511,
        512,
        1099,
    ]
    assert n_of(store.latest_verdict(thread, "m-3")) == "late"


@pytest.mark.parametrize("seed", range(6))
def test_the_lookup_agrees_with_the_full_scan_on_mixed_traces(
    store: JsonlStore, thread: str, seed: int
) -> None:
    """Differential: gates' appends and other tools' lines, damage included, in a
    seeded random order; after each step every message's answer is the scan's."""
    import random

    rng = random.Random(seed)
    mids = [thread, MID, OTHER, "m-x"]
    for step in range(60):
        mid = rng.choice(mids)
        kind = rng.choice(["verify_pass", "verify_fail", "receive", "emit"])
        gate = rng.choice(["orchestrator", "orchestrator", "receiver", "sender"])
        roll = rng.random()
        if roll < 0.6:
            store.append(thread, verdict(kind, mid, gate=gate, n=step, thread_id=thread))
        elif roll < 0.7:
            add_raw(store, thread, raw_verdict(kind=kind, mid=mid, gate=gate, n=step))
        elif roll < 0.75:
            spelled = raw_verdict(kind=kind, mid=mid, n=step).replace(b'"gate"', b'"g\\u0061te"')
            add_raw(store, thread, spelled)  # the same event, another spelling of a key
        elif roll < 0.8:
            add_raw(store, thread, b'{"event":"verify_pass","message_id":"' + mid.encode())
        elif roll < 0.85:
            store.path(thread).parent.mkdir(parents=True, exist_ok=True)
            with store.path(thread).open("ab") as fh:  # torn: no newline
                fh.write(raw_verdict(kind=kind, mid=mid, n=step)[: rng.randrange(1, 40)])
        elif roll < 0.9:
            add_raw(store, thread, b"")
        else:
            add_raw(store, thread, raw_verdict(kind="verify_pass", mid=mid, n=step)[:-1] + b"}}")
        for m in [*mids, "absent"]:
            assert store.latest_verdict(thread, m) == full_scan(store, thread, m), (step, m)


def test_receptions_do_not_grow_the_payload_index(store: JsonlStore, thread: str) -> None:
    """What a reception writes is the same the 1st and the 1,000th time (ADR 0022): two
    trace lines, the heads, the verdict index's header; the payload index's entry only
    once (the host's index, ADR 0018: only its coverage of the trace moves)."""
    from eidolons.io.paths import entry, index_path, payload_index

    root = str(Path(store.root).resolve())
    index = Path(index_path(root))
    store.append(thread, verdict("emit", gate="sender", payload_path="out/a.md"))
    store.append(thread, verdict("verify_pass", payload_path="out/a.md"))
    assert payload_index(root) == b"\n" + entry("out/a.md")
    sizes = []
    for _ in range(50):
        for event in receipt_events():
            store.append(thread, dict(event, payload_path="out/a.md"))
        assert payload_index(root) == b"\n" + entry("out/a.md")
        sizes.append(index.stat().st_size)
        verdict_index = index_file(store, thread).stat().st_size
    assert max(sizes) - min(sizes) <= 4  # the trace's size and ctime, a few digits longer
    assert verdict_index == indexes.HEADER + indexes.MIN_CAPACITY * indexes.SLOT
    store.append(thread, verdict("verify_pass", payload_path="out/b.md"))  # a new path
    assert payload_index(root) == b"\n" + entry("out/a.md") + entry("out/b.md")
    index.write_bytes(b"")  # emptied by someone: the next append indexes the trace again
    store.append(thread, verdict("verify_pass", payload_path="out/a.md"))
    named = payload_index(root)
    assert named is not None and b"\n" + entry("out/a.md") in named


def _writer(root: str, thread: str, count: int, ready: Any) -> None:
    store = JsonlStore(Path(root))
    ready.wait()
    for i in range(count):  # the message's verdict moves on; other messages in between
        store.append(thread, verdict("verify_fail" if i % 2 else "verify_pass", n=i))
        store.append(thread, verdict(mid=f"other-{i}", n=i))
        for event in receipt_events():
            store.append(thread, event)


def test_a_reader_during_appends_never_sees_an_older_verdict(
    store: JsonlStore, thread: str
) -> None:
    """Readers take no lock: a header or slot read while it is written is either the old
    one (the newer lines are read as tail) or fails its checksum (the scan). One reader's
    answers never go back in time, and each is a verdict that was written."""
    import multiprocessing as mp

    count = 150
    store.append(thread, verdict(n=-1))
    ctx = mp.get_context("fork")
    ready = ctx.Event()
    proc = ctx.Process(target=_writer, args=(str(store.root), thread, count, ready))
    proc.start()
    seen: list[int] = []
    ready.set()
    while proc.is_alive() or not seen:
        record = store.latest_verdict(thread, MID)
        assert record is not None
        seen.append(record["n"])
    proc.join(timeout=30)
    assert proc.exitcode == 0
    seen.append(n_of(store.latest_verdict(thread, MID)))
    assert seen == sorted(seen) and seen[-1] == count - 1
    assert all(-1 <= n < count for n in seen)
    assert n_of(store.latest_verdict(thread, MID)) == n_of(full_scan(store, thread))


def test_an_index_update_that_fails_never_fails_the_append(
    store: JsonlStore, thread: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.append(thread, verdict("verify_pass", n=1))
    path = index_file(store, thread)
    assert path.exists()

    def broken(*a: Any, **k: Any) -> None:
        raise RuntimeError("a bug in the index")

    monkeypatch.setattr(indexes, "_update", broken)
    store.append(thread, verdict("verify_fail", n=2))  # appended all the same
    assert not path.exists()  # and the index that fell behind is gone
    assert n_of(store.latest_verdict(thread, MID)) == 2
