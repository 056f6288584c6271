"""One line-length rule for every reader of a trace : a line is at most
``MAX_LINE_BYTES`` bytes, its newline not counted. A line of exactly 1 MiB was evidence
for the receiver (read backwards) but "damaged" for ``trace show`` (read forwards)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eidolons.trace.log import MAX_LINE_BYTES, iter_reverse, read_events


def line_of(size: int) -> bytes:
    head = b'{"event":"verify_pass","pad":"'
    tail = b'"}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


@pytest.mark.parametrize(
    "size, damaged",
    [(MAX_LINE_BYTES - 1, False), (MAX_LINE_BYTES, False), (MAX_LINE_BYTES + 1, True)],
)
def test_forward_and_reverse_readers_agree_at_the_limit(
    tmp_path: Path, size: int, damaged: bool
) -> None:
    trace = tmp_path / "t.jsonl"
    body = line_of(size)
    assert len(body) == size
    trace.write_bytes(b'{"event":"emit"}\n' + body + b"\n" + b'{"event":"receive"}\n')
    forward = [line.event is None for line in read_events(trace)]
    backward = [line.event is None for line in iter_reverse(trace)][::-1]
    assert forward == backward == [False, damaged, False]
    if not damaged:
        event = next(iter(read_events(trace))).event
        assert event == {"event": "emit"}
        assert json.loads(body)["event"] == "verify_pass"
