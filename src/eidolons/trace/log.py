"""The thread trace: ``<root>/.eidolons/.trace/<thread_id>.jsonl``, one JSON event per line.

Rules:

- Append-only. A line is written with one ``write`` of the whole line under an exclusive
  ``flock`` on an ``O_APPEND`` descriptor, so concurrent writers (several agents and
  gates on one thread) never interleave, tear or lose lines. The file is never rewritten
  or truncated. The lock is waited for until a deadline (:mod:`eidolons.io.filelock`, the
  trace timeout): a lock an agent keeps fails the append, it never holds the gate. If
  the file does not end in a newline (a writer died mid-line), the new line is preceded
  by one, so it is never glued to the torn one.
- A thread id becomes a file name only if it is a safe name (letters, digits, ``.``,
  ``_``, ``-``; not starting with ``.``; at most 200 characters); any other id, or none,
  is traced under ``unknown``, which no honest envelope's thread can reach.
- Reading tolerates damage: a line that is not a JSON object is reported and skipped.
- :func:`iter_reverse` reads from the end in blocks, so finding a recent event costs the
  same on a 10-line trace and a 1,000,000-line one; the record lookup of the store finds
  an old or absent one through the verdict index (:mod:`eidolons.trace.verdictindex`,
  which ``append_event``'s ``after`` keeps under the lock) and reads only the lines past
  what it covers with :func:`reverse_lines`.
"""

from __future__ import annotations

import fcntl
import os
import stat

from eidolons.ecl.events import TOOL, agent_label, utc_now
from eidolons.ecl.events import UNKNOWN as UNKNOWN_THREAD
from eidolons.ecl.grammar import is_safe_file_name
from eidolons.ecl.jsontext import dumps as dumps_json
from eidolons.ecl.jsontext import loads as loads_json
from eidolons.errors import InputError, TraceWriteError, UsageError
from eidolons.io import paths as pathstr
from eidolons.io.beneath import BeneathError, open_state_path
from eidolons.io.filelock import deadline, flock_until
from eidolons.io.settings import TRACE_DIR, trace_scan_bound

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

    Decode = Callable[[bytes, int], "TraceLine"]
    from typing import Any, BinaryIO

    from eidolons.io.paths import StrPath

    Path = StrPath  # a trace path: a str or any os.PathLike

MAX_LINE_BYTES = 1024 * 1024  # a longer line is damage (our events are well under 4 KiB)
__all__ = [
    "MAX_LINE_BYTES",
    "TOOL",
    "UNKNOWN_THREAD",
    "TraceLine",
    "agent_label",
    "append_event",
    "encode_event",
    "find_payload_event",
    "iter_reverse",
    "read_events",
    "thread_file_name",
    "thread_trace_path",
    "utc_now",
]


def thread_file_name(thread_id: str | None) -> str:
    if thread_id and is_safe_file_name(thread_id):
        return thread_id
    return UNKNOWN_THREAD


def thread_trace_path(root: StrPath, thread_id: str | None) -> str:
    return pathstr.join(root, TRACE_DIR, f"{thread_file_name(thread_id)}.jsonl")


def encode_event(event: Mapping[str, Any]) -> bytes:
    return (dumps_json(event, compact=True) + "\n").encode("ascii")


_TRACE_PARTS = pathstr.parts(TRACE_DIR)


def _state_parts(path: StrPath) -> tuple[str, tuple[str, ...]]:
    """Where the link-free part of a trace path starts: below the project root for a path
    through ``.eidolons/.trace/`` (the default), else only the file itself."""
    parts = pathstr.parts(path)
    for i in range(len(parts) - 3, -1, -1):
        if parts[i : i + 2] == _TRACE_PARTS:
            return pathstr.join(*parts[:i]) if i else ".", parts[i:]
    return pathstr.parent(path), (pathstr.name(path),)


def open_trace_fd(path: Path, flags: int, *, create: bool) -> int:
    """Open a trace file by descriptor: a path through ``<root>/.eidolons/.trace/`` is
    opened component by component below the root with no link followed (a symlinked
    ``.eidolons/``, trace directory or trace file is refused, never followed out of the
    project); an explicit ``--trace FILE`` is opened without following a final link.
    ``create`` makes missing directories and the file. Raises :class:`BeneathError` or
    :class:`OSError`."""
    anchor, parts = _state_parts(path)
    if create and len(parts) == 1:
        os.makedirs(anchor, exist_ok=True)
    return open_state_path(anchor, parts, flags | os.O_NONBLOCK, create=create)


def append_event(
    path: Path,
    event: Mapping[str, Any],
    before: Callable[[], None] | None = None,
    after: Callable[[int, int, bytes, os.stat_result], None] | None = None,
    until: float | None = None,
) -> bytes:
    """Append one event as one line, linked into the thread's hash chain (``seq``,
    ``prev``: :mod:`eidolons.ecl.tracechain`) under the append lock; returns the line's
    bytes (without the newline). ``before`` runs under the lock before the line is written;
    ``after(fd, start, line, before_st)`` runs under the lock once it is written, with the
    trace's descriptor, the byte offset the line starts at and the file's ``fstat`` just
    before it was written (the verdict index,
    :mod:`eidolons.trace.verdictindex`, then the payload index,
    :mod:`eidolons.trace.payloadfill`). ``until``: the monotonic deadline of the
    wait for the lock (:func:`append_lines`).
    Raises :class:`TraceWriteError` on any failure."""
    from eidolons.ecl.tracechain import chained, next_link

    written: list[bytes] = []
    links: list[tuple[int, str]] = []
    fds: list[int] = []
    states: list[os.stat_result] = []

    def link(fd: int, size: int) -> list[bytes]:
        fds.append(fd)
        states.append(os.fstat(fd))
        last, last_seq = _last_link(fd, size)
        seq, prev = next_link(last, last_seq)
        if before is not None:
            before()
        links.append((seq, prev))
        written.append(encode_event(chained(event, seq, prev))[:-1])
        return written

    def anchor() -> None:  # still under the lock: the head moves with the file (ADR 0037)
        _record_head(path, links[0], written[0])
        if after is not None:  # the line is the file's last bytes (O_APPEND, locked)
            after(fds[0], os.fstat(fds[0]).st_size - len(written[0]) - 1, written[0], states[0])

    append_lines(path, [], under_lock=link, after_write=anchor, until=until)
    return written[0]


def _record_head(path: Path, link: tuple[int, str], line: bytes) -> None:
    """Record the thread's new head on this host (ADR 0037). Silent on purpose: the gates'
    stderr is a contract (the refusal line comes first). A head that cannot be written (a
    sandbox without the config directory) leaves the line appended and the head behind,
    and a tail cut before this append keeps the old head: ``trace verify`` reports both."""
    from eidolons.ecl.tracechain import line_hash
    from eidolons.keys.heads import record

    try:
        record(path, link[0], line_hash(line), link[1])
    except OSError:
        pass


def _last_link(fd: int, size: int) -> tuple[bytes | None, int]:
    """The file's last non-blank line (exact bytes, no newline) and its position: the
    ``seq`` it carries when it is a chained line of ours, else the count of non-blank
    lines (a trace begun by an upstream tool, or a torn or hand-written last line).

    Bounded: at most one line's worth is read back; a last line longer than
    :data:`MAX_LINE_BYTES` is damage, and so is a file past the trace scan bound whose
    last line is unchained: the new line then starts a new segment (``seq`` 1), which
    ``trace verify`` reports as the break it is."""
    end, block, limit = size, 64 * 1024, MAX_LINE_BYTES + 64 * 1024
    tail = b""
    last: bytes | None = None
    while True:  # read back until the last non-blank line is whole (or the bound is hit)
        segments = tail.split(b"\n")
        found = [i for i, seg in enumerate(segments) if seg.strip()]
        if found and (found[-1] > 0 or end == 0):
            last = segments[found[-1]]  # exact bytes: a line's own spaces are kept
            break
        if end == 0:
            return None, 0  # only blank lines
        if len(tail) > limit:
            return b"", 0  # no line start within the bound: an overlong last line
        start = max(0, end - block)
        tail = os.pread(fd, end - start, start) + tail
        end = start
    if len(last) <= MAX_LINE_BYTES:
        try:
            seq = loads_json(last).get("seq")
        except (ValueError, RecursionError, AttributeError):
            seq = None
        if isinstance(seq, int) and not isinstance(seq, bool) and seq >= 1:
            return last, seq
    if size > trace_scan_bound():
        return last, 0
    count, pos, carry = 0, 0, b""
    while pos < size:  # unchained last line: its position is the count of non-blank lines
        chunk = os.pread(fd, min(1024 * 1024, size - pos), pos)
        pos += len(chunk)
        *whole, carry = (carry + chunk).split(b"\n")
        count += sum(1 for x in whole if x.strip())
        carry = carry[-MAX_LINE_BYTES:] if carry.strip() else b""  # only blank-ness matters
    return last, count + (1 if carry.strip() else 0)


def append_lines(
    path: Path,
    lines: Sequence[bytes],
    under_lock: Callable[[int, int], Sequence[bytes]] | None = None,
    after_write: Callable[[], None] | None = None,
    until: float | None = None,
) -> None:
    """Append exact line bytes (each without its newline) in one ``write`` under the lock;
    with ``under_lock(fd, size)``, the lines it returns, computed while the lock is held;
    ``after_write()`` runs once they are written, before the lock is released. The lock
    is waited for until the monotonic time ``until`` (default: the trace timeout from
    now, :mod:`eidolons.io.filelock`). Raises :class:`TraceWriteError` on any failure,
    a lock held past the deadline included."""
    line = b"".join(raw + b"\n" for raw in lines)
    try:
        until = deadline() if until is None else until
    except UsageError as exc:  # a bad EIDOLONS_TRACE_TIMEOUT_S: nothing is written
        raise TraceWriteError(f"cannot append to trace {path}: {exc}") from None
    try:
        fd = open_trace_fd(path, os.O_RDWR | os.O_APPEND, create=True)
    except BeneathError as exc:
        raise TraceWriteError(f"cannot open trace: {exc}") from None
    except OSError as exc:
        raise TraceWriteError(f"cannot open trace {path}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise TraceWriteError(f"trace {path} is not a regular file")
        flock_until(fd, until, "the trace")
        try:
            size = os.fstat(fd).st_size
            if under_lock is not None:
                line = b"".join(raw + b"\n" for raw in under_lock(fd, size))
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line
            view = memoryview(line)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if os.environ.get("EIDOLONS_TRACE_FSYNC") == "1":
                os.fsync(fd)
            if after_write is not None:
                after_write()
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    except OSError as exc:
        raise TraceWriteError(f"cannot append to trace {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


class TraceLine:
    """One line of a trace. ``event`` is None when the line is damaged (``error`` says why).
    ``lineno`` is 1-based when reading forwards, and counts back from the end (-1 is the
    last line) when reading in reverse."""

    __slots__ = ("error", "event", "lineno")

    def __init__(self, lineno: int, event: dict[str, Any] | None, error: str | None = None) -> None:
        self.lineno = lineno
        self.event = event
        self.error = error

    def __repr__(self) -> str:
        return f"TraceLine({self.lineno}, {self.event!r}, {self.error!r})"


def decode_line(raw: bytes, lineno: int) -> TraceLine:
    """One line's bytes, without its newline, as a :class:`TraceLine` (damage reported,
    never raised). At most :data:`MAX_LINE_BYTES` bytes: the one length rule of every
    reader, forwards and backwards."""
    if len(raw) > MAX_LINE_BYTES:
        return TraceLine(lineno, None, f"line longer than {MAX_LINE_BYTES} bytes")
    try:
        value = loads_json(raw)
    except (ValueError, RecursionError) as exc:
        return TraceLine(lineno, None, f"not JSON ({exc.__class__.__name__})")
    if not isinstance(value, dict):
        return TraceLine(lineno, None, "not a JSON object")
    # a lone surrogate would crash whoever prints or re-encodes the event; it can only
    # come from a \\u escape or from bytes beyond ASCII
    if b"\\u" in raw or not raw.isascii():
        import json

        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            return TraceLine(lineno, None, "holds a lone surrogate escape")
    return TraceLine(lineno, value)


def open_trace(path: Path) -> int:
    """A trace opened for reading (a regular file, no link followed: :func:`open_trace_fd`).
    Raises :class:`FileNotFoundError` when there is none, :class:`InputError` else."""
    return _open_trace(path)


def _open_trace(path: Path) -> int:
    try:
        fd = open_trace_fd(path, os.O_RDONLY, create=False)
    except FileNotFoundError:
        raise
    except BeneathError as exc:
        raise InputError(f"cannot read trace: {exc}") from None
    except OSError as exc:
        raise InputError(f"cannot read trace {path}: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(f"trace {path} is not a regular file")
    return fd


def read_events(path: Path, decode: Decode | None = None) -> Iterator[TraceLine]:
    """Every line of the trace, in order. A missing file yields nothing. A line longer than
    :data:`MAX_LINE_BYTES` is reported as damaged without being held in memory. ``decode``
    (default :func:`decode_line`): how a line becomes a :class:`TraceLine` (the store's
    views pass :func:`eidolons.trace.store.judged_line`)."""
    try:
        fd = _open_trace(path)
    except FileNotFoundError:
        return
    with os.fdopen(fd, "rb") as fh:
        yield from _events_of(fh, decode or decode_line)


def _events_of(fh: BinaryIO, decode: Decode) -> Iterator[TraceLine]:
    lineno = 0
    while True:
        raw = fh.readline(MAX_LINE_BYTES + 1)
        if not raw:
            break
        lineno += 1
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):  # skip the rest of the long line
                raw = fh.readline(MAX_LINE_BYTES)
            yield TraceLine(lineno, None, f"line longer than {MAX_LINE_BYTES} bytes")
            continue
        if not raw.endswith(b"\n"):
            yield TraceLine(lineno, None, "torn line (no newline at end of file)")
            break
        if raw.strip():
            yield decode(raw[:-1], lineno)  # the limit does not count the newline


def read_raw_lines(path: Path) -> Iterator[bytes]:
    """Every non-blank line's exact bytes (without the newline), damaged lines included,
    in order: what an export moves. A missing file yields nothing."""
    try:
        fd = _open_trace(path)
    except FileNotFoundError:
        return
    with os.fdopen(fd, "rb") as fh:
        yield from _raw_of(fh)


def _raw_of(fh: Iterable[bytes]) -> Iterator[bytes]:
    for raw in fh:
        line = raw[:-1] if raw.endswith(b"\n") else raw
        if line.strip():
            yield line


def read_snapshot(path: Path, decode: Decode | None = None) -> tuple[list[bytes], list[TraceLine]]:
    """The trace read once: its raw lines (as :func:`read_raw_lines`: what the hash chain
    covers) and its lines decoded (as :func:`read_events`: what readers judge), both from
    the same bytes, so a writer swapping the file between two reads cannot pair the events
    of one version with the chain of another. A missing file is empty. Raises
    :class:`InputError` when it cannot be read."""
    import io

    try:
        fd = _open_trace(path)
    except FileNotFoundError:
        return [], []
    with os.fdopen(fd, "rb") as fh:
        data = fh.read()
    return list(_raw_of(io.BytesIO(data))), list(
        _events_of(io.BytesIO(data), decode or decode_line)
    )


def iter_reverse(
    path: Path,
    block: int = 64 * 1024,
    contains: bytes | None = None,
    max_bytes: int | None = None,
) -> Iterator[TraceLine]:
    """The trace's lines from last to first, reading backwards in blocks. With
    ``contains``, lines whose raw bytes lack it are skipped without being decoded (and
    are not reported even if damaged): a cheap filter for a search by id. The cost is
    linear in the bytes read; a line longer than :data:`MAX_LINE_BYTES` is reported as
    damaged and its bytes are not accumulated. With ``max_bytes``, reading further back
    than that raises :class:`InputError` instead of going on."""
    try:
        fd = _open_trace(path)
    except FileNotFoundError:
        return
    try:
        size = os.fstat(fd).st_size
        yield from reverse_lines(
            fd, size, block=block, contains=contains, max_bytes=max_bytes, name=path
        )
    finally:
        os.close(fd)


def reverse_lines(
    fd: int,
    size: int,
    start: int = 0,
    *,
    block: int = 64 * 1024,
    contains: bytes | None = None,
    max_bytes: int | None = None,
    name: object = "",
) -> Iterator[TraceLine]:
    """:func:`iter_reverse` over the bytes ``[start, size)`` of an open trace (``start``
    is a line start: the verdict index reads only the tail it does not cover this way).
    ``max_bytes`` bounds the bytes read back from ``size``; ``name`` is for the error."""
    pos = size
    floor = start if max_bytes is None else max(start, pos - max_bytes)
    parts: list[bytes] = []  # pieces of the current (partial) line, last piece first
    held = 0  # bytes in parts
    overlong = False
    at_end = True  # the current line is the file's last segment
    lineno = 0

    def finish(first_piece: bytes) -> TraceLine | None:
        nonlocal parts, held, overlong, at_end, lineno
        raw = b"" if overlong else first_piece + b"".join(reversed(parts))
        was_end, was_long = at_end, overlong
        parts, held, overlong, at_end = [], 0, False, False
        if was_end and not was_long and not raw:
            return None  # the file ends with a newline
        if not was_long and not raw.strip():
            return None
        lineno -= 1
        if was_long:
            return TraceLine(lineno, None, f"line longer than {MAX_LINE_BYTES} bytes")
        if was_end:
            return TraceLine(lineno, None, "torn line (no newline at end of file)")
        if contains is not None and contains not in raw:
            return None
        return decode_line(raw, lineno)

    while pos > start:
        if pos <= floor:
            raise InputError(
                f"trace {name}: nothing found in its last {max_bytes} bytes (the scan "
                "bound); refusing rather than reading on"
            )
        step = min(block, pos - floor)
        pos -= step
        chunk = os.pread(fd, step, pos)
        pieces = chunk.split(b"\n")
        # pieces[-1] completes the line held in parts; pieces[1:-1] are whole lines
        if len(pieces) > 1:
            line = finish(pieces[-1])
            if line is not None:
                yield line
            for raw in reversed(pieces[1:-1]):  # the hot loop: no call per line
                if not raw or (contains is not None and contains not in raw):
                    lineno -= 1 if raw else 0
                    continue
                if raw.strip():
                    lineno -= 1
                    yield decode_line(raw, lineno)
        head = pieces[0]
        if not overlong:
            parts.append(head)
            held += len(head)
            if held > MAX_LINE_BYTES:
                overlong, parts, held = True, [], 0
    line = finish(b"")
    if line is not None:
        yield line


def read_new_events(
    path: Path, offset: int, decode: Decode | None = None
) -> tuple[list[TraceLine], int]:
    """The complete lines appended at or after byte ``offset``, and the offset to read
    from next time (``trace show --follow``). A last line still being written (no newline
    yet) is left for the next call; a missing file yields nothing."""
    try:
        fd = _open_trace(path)
    except FileNotFoundError:
        return [], offset
    out: list[TraceLine] = []
    with os.fdopen(fd, "rb") as fh:
        fh.seek(offset)
        while True:
            raw = fh.readline(MAX_LINE_BYTES + 1)
            if not raw.endswith(b"\n"):
                if len(raw) <= MAX_LINE_BYTES:
                    break  # nothing more, or a line not finished yet: read it next time
                while raw and not raw.endswith(b"\n"):
                    raw = fh.readline(MAX_LINE_BYTES)
                offset = fh.tell()
                out.append(TraceLine(0, None, f"line longer than {MAX_LINE_BYTES} bytes"))
                continue
            offset += len(raw)
            if raw.strip():
                out.append((decode or decode_line)(raw[:-1], 0))
    return out, offset


def find_payload_event(
    root: Path,
    keys: list[str],
    payload_needle: Callable[[str], bytes],
    is_payload_event: Callable[[dict[str, Any] | None, list[str]], bool],
) -> dict[str, Any] | None:
    """The JSONL search behind :meth:`TraceStore.find_payload`: every thread file of
    ``root``, each file's size checked before it is read, at most
    :func:`eidolons.io.config.trace_scan_bound` bytes in all; past that raises
    :class:`InputError`. The store passes its two matching rules (this module never
    imports the stores: no import cycle)."""

    if not keys:
        return None
    needles = [payload_needle(k) for k in keys]
    for raw in payload_search_lines(root):
        if any(n in raw for n in needles):
            event = decode_line(raw, 0).event
            if is_payload_event(event, keys):
                return event
    return None


#: what every line a payload search can match holds (the needle's key, compact JSON)
PAYLOAD_FIELD = b'"payload_path":'


def payload_search_lines(root: Path) -> Iterator[bytes]:
    """The raw pieces the payload search (:func:`find_payload_event`) judges, in its
    order: every ``*.jsonl`` of the trace directory (whatever its name), read by
    ``readline`` of at most :data:`MAX_LINE_BYTES` + 1 bytes, a torn last line included,
    each file's size checked against the scan bound before it is read (past it raises
    :class:`InputError`). The one list of what the search reads; the host's payload
    index reads the same pieces (:func:`search_pieces`, from a line start:
    :mod:`eidolons.trace.payloadfill`), so that it can never lack a payload the
    search would find."""
    try:
        from pathlib import Path as _Path

        files = sorted((_Path(root) / TRACE_DIR).glob("*.jsonl"))
    except OSError:
        return
    bound = trace_scan_bound()
    budget = bound
    for path in files:
        try:
            fd = _open_trace(path)
        except FileNotFoundError:
            continue
        with os.fdopen(fd, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > budget:
                raise InputError(f"the traces exceed the {bound}-byte scan bound")
            budget -= size
            yield from search_pieces(fh)


def search_pieces(fh: BinaryIO) -> Iterator[bytes]:
    """The pieces the payload search judges, from ``fh``'s position on: lines read by
    ``readline`` of at most :data:`MAX_LINE_BYTES` + 1 bytes (an overlong line is cut
    into pieces, each judged on its own), a torn last line included. From a line start,
    the pieces are those a read from the file's start makes there."""
    while raw := fh.readline(MAX_LINE_BYTES + 1):
        yield raw
