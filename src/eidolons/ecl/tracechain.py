"""The trace's hash chain, pure: every line of a thread carries ``seq`` (1-based, per
thread) and ``prev`` (the hex SHA-256 of the previous line's exact bytes, without its
newline; 64 zeros for the first line).

One rule, written once: the JSONL writer (under its ``flock``) and the PostgreSQL store
(inside its inserting transaction, under a per-thread advisory lock) both call
:func:`next_link` on the thread's last line and :func:`chained` to place the link in the
event.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

GENESIS = "0" * 64


def line_hash(line: bytes) -> str:
    """The hex SHA-256 of a line's exact bytes; a trailing newline is not part of it."""
    if line.endswith(b"\n"):
        line = line[:-1]
    return hashlib.sha256(line).hexdigest()


def next_link(last_line: bytes | None, last_seq: int) -> tuple[int, str]:
    """``(seq, prev)`` for the line that follows ``last_line`` (the thread's ``last_seq``-th
    line), or for a thread's first line when ``last_line`` is None."""
    if last_line is None:
        return 1, GENESIS
    return last_seq + 1, line_hash(last_line)


def chained(event: Mapping[str, Any], seq: int, prev: str) -> dict[str, Any]:
    """A copy of ``event`` carrying its link (any ``seq``/``prev`` it held is replaced)."""
    out = {k: v for k, v in event.items() if k not in ("seq", "prev")}
    out["seq"] = seq
    out["prev"] = prev
    return out
