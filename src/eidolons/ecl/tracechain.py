"""The trace's hash chain, pure: each line of a thread carries ``seq`` (1-based) and
``prev`` (the SHA-256 of the previous line's exact bytes, 64 zeros for the first). The
JSONL writer and the PostgreSQL store both link with :func:`next_link` and :func:`chained`.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

GENESIS = "0" * 64


def line_hash(line: bytes) -> str:
    """The hex SHA-256 of a line's exact bytes; a trailing newline is not part of it."""
    if line.endswith(b"\n"):
        line = line[:-1]
    from eidolons.ecl.integrity import sha256_hex

    return sha256_hex(line)


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


class ChainReport:
    """What :func:`verify_chain` found. ``state``: ``intact`` (every line linked),
    ``unchained`` (no line carries a link: a trace written by an upstream tool),
    ``partial`` (an unchained prefix, then an intact chain: a trace continued by this
    tool), ``broken`` (``first_break`` says where and why), ``empty``."""

    __slots__ = ("chained", "first_break", "lines", "state", "unchained_prefix")

    def __init__(self) -> None:
        self.lines = 0
        self.chained = 0
        self.unchained_prefix = 0
        self.first_break: tuple[int, str] | None = None
        self.state = "empty"

    @property
    def ok(self) -> bool:
        return self.first_break is None

    def to_dict(self) -> dict[str, Any]:
        brk = self.first_break
        return {
            "state": self.state,
            "lines": self.lines,
            "chained": self.chained,
            "unchained_prefix": self.unchained_prefix,
            "first_break": {"line": brk[0], "reason": brk[1]} if brk else None,
        }


def _link_of(raw: bytes) -> tuple[bool, object, object]:
    """(is a JSON object, seq, prev) of one line; absent fields are None."""
    import json

    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return False, None, None
    if not isinstance(value, dict):
        return False, None, None
    return True, value.get("seq"), value.get("prev")


def verify_chain(lines: Iterable[bytes]) -> ChainReport:
    """The first break in a thread's non-blank lines: line ``n`` must carry ``seq == n``
    and ``prev`` the hash of line ``n-1``. Lines before the first linked one are an
    unchained prefix; after it, any unlinked or damaged line is a break. A rewritten last
    line goes unnoticed here: the signed receipts cover it (ADR 0012)."""
    report = ChainReport()
    previous: bytes | None = None
    started = False
    for n, raw in enumerate(lines, start=1):
        report.lines = n
        is_obj, seq, prev = _link_of(raw)
        linked = is_obj and (seq is not None or prev is not None)
        if report.first_break is None:
            if not linked:
                if started:
                    why = "damaged line" if not is_obj else "line carries no seq/prev"
                    report.first_break = (n, f"{why} inside the chain (inserted or rewritten)")
                else:
                    report.unchained_prefix += 1
            else:
                started = True
                expected = GENESIS if previous is None else line_hash(previous)
                if seq != n or isinstance(seq, bool):
                    report.first_break = (
                        n,
                        f"seq {seq!r} at line {n} (a line was removed, inserted or reordered)",
                    )
                elif prev != expected:
                    report.first_break = (
                        n,
                        f"prev does not match line {n - 1} (line {n - 1} was edited, or a "
                        "line was removed)"
                        if n > 1
                        else "prev of line 1 is not 64 zeros",
                    )
                else:
                    report.chained += 1
        previous = raw
    if report.first_break is not None:
        report.state = "broken"
    elif report.lines == 0:
        report.state = "empty"
    elif report.chained == 0:
        report.state = "unchained"
    elif report.unchained_prefix:
        report.state = "partial"
    else:
        report.state = "intact"
    return report
