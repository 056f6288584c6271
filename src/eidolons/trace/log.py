"""The thread trace: ``<root>/.eidolons/.trace/<thread_id>.jsonl``, one JSON event per line,
and the default trace store over those files (:class:`JsonlStore`).

Append-only: each line is one ``write`` under an exclusive ``flock`` (waited for until the
trace timeout) on an ``O_APPEND`` descriptor, after a newline if a writer died mid-line.
An unsafe thread id is traced under ``unknown``. Readers report damage, never raise on it;
:func:`iter_reverse` reads from the end in blocks, so a recent event costs the same on any
trace length (old ones: the verdict index, :mod:`eidolons.trace.indexes`).
"""

from __future__ import annotations

import fcntl
import os
import stat

from eidolons.ecl.events import UNKNOWN as UNKNOWN_THREAD
from eidolons.ecl.grammar import dumps as dumps_json
from eidolons.ecl.grammar import is_safe_file_name
from eidolons.ecl.grammar import loads as loads_json
from eidolons.errors import InputError, TraceWriteError, UsageError
from eidolons.io import paths as pathstr
from eidolons.io.config import TRACE_DIR, trace_scan_bound
from eidolons.io.files import BeneathError, deadline, flock_until, open_state_path
from eidolons.trace.store import (
    Appended,
    TraceReadError,
    TraceStore,
    first_payload_event,
    is_payload_event,
    judged_line,
    latest_counted,
    verdict_needle,
)

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    import pathlib
    from collections.abc import Callable, Iterator, Mapping, Sequence
    from typing import Any, BinaryIO

    from eidolons.io.paths import StrPath

    Decode = Callable[[bytes, int], "TraceLine"]
    Path = StrPath  # a trace path: a str or any os.PathLike

MAX_LINE_BYTES = 1024 * 1024  # a longer line is damage (our events are well under 4 KiB)


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
    """Where the link-free part of a trace path starts: the project root for a path
    through ``.eidolons/.trace/``, else the file's directory."""
    parts = pathstr.parts(path)
    for i in range(len(parts) - 3, -1, -1):
        if parts[i : i + 2] == _TRACE_PARTS:
            return pathstr.join(*parts[:i]) if i else ".", parts[i:]
    return pathstr.parent(path), (pathstr.name(path),)


def open_trace_fd(path: Path, flags: int, *, create: bool) -> int:
    """A trace file's descriptor, no link followed below the project root (only the final
    component for a ``--trace FILE``); ``create`` makes what is missing. Raises
    :class:`BeneathError` or :class:`OSError`."""
    anchor, parts = _state_parts(path)
    if create and len(parts) == 1:
        os.makedirs(anchor, exist_ok=True)
    return open_state_path(anchor, parts, flags | os.O_NONBLOCK, create=create)


def append_event(path: Path, event: Mapping[str, Any]) -> bytes:
    """Append one event as one line linked into the thread's hash chain
    (:mod:`eidolons.ecl.events`); returns the line's bytes (no newline). Raises
    :class:`TraceWriteError`."""
    return append_events(path, [event])[0]


def append_events(
    path: Path,
    events: Sequence[Mapping[str, Any]],
    after: Callable[[int, int, bytes, os.stat_result], None] | None = None,
    until: float | None = None,
) -> list[bytes]:
    """:func:`append_event` for several events, each linked to the one before, in one
    ``write`` under one lock (all of them or none). Under the lock,
    ``after(fd, start, last line, fstat before)`` runs after the write (the indexes);
    ``until``: the lock's deadline."""
    from eidolons.ecl.events import chained, next_link

    written: list[bytes] = []
    links: list[tuple[int, str]] = []
    fds: list[int] = []
    states: list[os.stat_result] = []

    def link(fd: int, size: int) -> list[bytes]:
        fds.append(fd)
        states.append(os.fstat(fd))
        last, last_seq = _last_link(fd, size)
        for event in events:
            seq, prev = next_link(last, last_seq)
            links.append((seq, prev))
            last, last_seq = encode_event(chained(event, seq, prev))[:-1], seq
            written.append(last)
        return written

    def anchor() -> None:  # still under the lock: the head moves with the file (ADR 0012)
        for link_, line in zip(links, written, strict=True):  # each moves it from the last
            _record_head(path, link_, line)
        if after is not None:  # the lines are the file's last bytes (O_APPEND, locked)
            start = os.fstat(fds[0]).st_size - len(written[-1]) - 1
            after(fds[0], start, written[-1], states[0])

    append_lines(path, [], under_lock=link, after_write=anchor, until=until)
    return written


def _record_head(path: Path, link: tuple[int, str], line: bytes) -> None:
    """Record the thread's new head on this host (ADR 0012); silent when it cannot (the
    gates' stderr is a contract): ``trace verify`` reports a head left behind."""
    from eidolons.ecl.events import line_hash
    from eidolons.keys.host import record

    try:
        record(path, link[0], line_hash(line), link[1])
    except OSError:
        pass


def _last_link(fd: int, size: int) -> tuple[bytes | None, int]:
    """The file's last non-blank line (exact bytes) and its position: its ``seq`` when
    chained, else the count of non-blank lines. An overlong last line, or an unchained one
    in a file past the scan bound, gives position 0 (a new segment: a reported break)."""
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
    """Append exact line bytes (no newlines) in one ``write`` under the lock, or the lines
    ``under_lock(fd, size)`` returns while it is held; ``after_write()`` runs before it is
    released. The lock is waited for until ``until`` (default: the trace timeout). Raises
    :class:`TraceWriteError` on any failure."""
    line = b"\n".join(lines) + b"\n" if lines else b""
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
                more = under_lock(fd, size)
                line = b"\n".join(more) + b"\n" if more else b""
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
    """One line of a trace; ``event`` None when damaged (``error`` says why). ``lineno``:
    1-based forwards, -1 for the last line in reverse."""

    __slots__ = ("error", "event", "lineno")

    def __init__(self, lineno: int, event: dict[str, Any] | None, error: str | None = None) -> None:
        self.lineno = lineno
        self.event = event
        self.error = error

    def __repr__(self) -> str:
        return f"TraceLine({self.lineno}, {self.event!r}, {self.error!r})"


def decode_line(raw: bytes, lineno: int) -> TraceLine:
    """One line's bytes (no newline) as a :class:`TraceLine`, damage reported; longer than
    :data:`MAX_LINE_BYTES` is damage, for every reader."""
    if len(raw) > MAX_LINE_BYTES:
        return TraceLine(lineno, None, f"line longer than {MAX_LINE_BYTES} bytes")
    try:
        value = loads_json(raw)
    except (ValueError, RecursionError) as exc:
        return TraceLine(lineno, None, f"not JSON ({exc.__class__.__name__})")
    if not isinstance(value, dict):
        return TraceLine(lineno, None, "not a JSON object")
    # a lone surrogate (from a \\u escape or bytes beyond ASCII) crashes a printer
    if b"\\u" in raw or not raw.isascii():
        import json

        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            return TraceLine(lineno, None, "holds a lone surrogate escape")
    return TraceLine(lineno, value)


def open_trace(path: Path) -> int:
    """A trace opened for reading (a regular file, no link followed). Raises
    :class:`FileNotFoundError` when there is none, :class:`InputError` else."""
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


def open_whole_trace(path: Path, offset: int = 0) -> int:
    """:func:`open_trace` for a reader of the whole thread from byte ``offset``: what lies
    past it must be within the scan bound (:func:`eidolons.io.config.trace_scan_bound`),
    as for the gates' scans; a trace made huge (a sparse hole is one truncate) raises
    :class:`InputError` unread, never read to its end or held whole."""
    fd = open_trace(path)
    size, bound = os.fstat(fd).st_size, trace_scan_bound()
    if size - offset > bound:
        os.close(fd)
        raise InputError(
            f"trace {path} holds {size - offset} bytes to read, past the {bound}-byte scan "
            "bound (EIDOLONS_MAX_TRACE_SCAN_BYTES): refusing rather than reading on"
        )
    return fd


def read_events(path: Path, decode: Decode | None = None) -> Iterator[TraceLine]:
    """Every line of the trace in order (none for a missing file), an overlong one
    reported without being held; ``decode``: :func:`decode_line` or the store's
    :func:`~eidolons.trace.store.judged_line`. Past the scan bound, :class:`InputError`."""
    try:
        fd = open_whole_trace(path)
    except FileNotFoundError:
        return
    with os.fdopen(fd, "rb") as fh:
        yield from _events_of(fh, decode or decode_line)


def _events_of(fh: BinaryIO, decode: Decode, follow: bool = False) -> Iterator[TraceLine]:
    """The lines of ``fh`` from its position; ``follow``: numbered 0, and a last line
    without its newline yet is left unread (``fh`` is put back at its start)."""
    lineno = 0
    while raw := fh.readline(MAX_LINE_BYTES + 1):
        lineno += 0 if follow else 1
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):  # skip the rest of the long line
                raw = fh.readline(MAX_LINE_BYTES)
            yield TraceLine(lineno, None, f"line longer than {MAX_LINE_BYTES} bytes")
        elif not raw.endswith(b"\n"):
            if follow:  # a line not finished yet: read it next time
                fh.seek(-len(raw), os.SEEK_CUR)
            else:
                yield TraceLine(lineno, None, "torn line (no newline at end of file)")
            return
        elif raw.strip():
            yield decode(raw[:-1], lineno)  # the limit does not count the newline


def read_raw_lines(path: Path) -> Iterator[bytes]:
    """Every non-blank line's exact bytes (no newline), damaged ones included, in order.
    Past the scan bound, :class:`InputError`."""
    try:
        fd = open_whole_trace(path)
    except FileNotFoundError:
        return
    with os.fdopen(fd, "rb") as fh:
        yield from (raw.removesuffix(b"\n") for raw in fh if raw.strip())


def read_snapshot(path: Path, decode: Decode | None = None) -> tuple[list[bytes], list[TraceLine]]:
    """The trace read once: its raw lines (:func:`read_raw_lines`) and the same bytes
    decoded (:func:`read_events`), so the chain and the events are of one version.
    Raises :class:`InputError`."""
    import io

    try:
        fd = open_whole_trace(path)
    except FileNotFoundError:
        return [], []
    bound = trace_scan_bound()
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(bound + 1)
    if len(data) > bound:  # grown past the bound since it was measured: never a prefix
        raise InputError(
            f"trace {path} grew past the {bound}-byte scan bound while it was read "
            "(EIDOLONS_MAX_TRACE_SCAN_BYTES): refusing rather than judging part of it"
        )
    raw = [line for line in data.split(b"\n") if line.strip()]
    return raw, list(_events_of(io.BytesIO(data), decode or decode_line))


def iter_reverse(
    path: Path,
    block: int = 64 * 1024,
    contains: bytes | None = None,
    max_bytes: int | None = None,
    decode: Decode = decode_line,
) -> Iterator[TraceLine]:
    """The trace's lines from last to first, read backwards in blocks. ``contains``: lines
    lacking those bytes are skipped undecoded; ``max_bytes``: reading further back raises
    :class:`InputError`."""
    try:
        fd = open_trace(path)
    except FileNotFoundError:
        return
    try:
        size = os.fstat(fd).st_size
        yield from reverse_lines(
            fd, size, block=block, contains=contains, max_bytes=max_bytes, name=path, decode=decode
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
    decode: Decode = decode_line,
) -> Iterator[TraceLine]:
    """:func:`iter_reverse` over the bytes ``[start, size)`` of an open trace (``start`` a
    line start); ``name`` is for the error; ``decode`` as :func:`read_events`'."""
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
        return decode(raw, lineno)

    while pos > start:
        if pos <= floor and max_bytes is not None:  # only a bound makes floor pass start
            from eidolons._text import plural

            raise InputError(
                f"trace {name}: nothing found in its last {plural(max_bytes, 'byte')} (the scan "
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
                    yield decode(raw, lineno)
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
    """The complete lines at or after byte ``offset`` and the offset to read from next
    (``--follow``); a last line without its newline yet is left for the next call."""
    try:
        fd = open_whole_trace(path, offset)
    except FileNotFoundError:
        return [], offset
    with os.fdopen(fd, "rb") as fh:
        fh.seek(offset)
        out = list(_events_of(fh, decode or decode_line, follow=True))
        return out, fh.tell()


#: what every line a payload search can match holds (the needle's key, compact JSON)
PAYLOAD_FIELD = b'"payload_path":'


def payload_search_lines(root: Path) -> Iterator[bytes]:
    """What the payload search reads, in order: :func:`search_pieces` of every ``*.jsonl``
    of the trace directory, each file's size checked against the scan bound first (past
    it raises :class:`InputError`). The payload index reads the same pieces."""
    try:
        from pathlib import Path as _Path

        files = sorted((_Path(root) / TRACE_DIR).glob("*.jsonl"))
    except OSError:
        return
    bound = trace_scan_bound()
    budget = bound
    for path in files:
        try:
            fd = open_trace(path)
        except FileNotFoundError:
            continue
        with os.fdopen(fd, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > budget:
                raise InputError(f"the traces exceed the {bound}-byte scan bound")
            budget -= size
            yield from search_pieces(fh)


def search_pieces(fh: BinaryIO) -> Iterator[bytes]:
    """``fh``'s lines from its position, by ``readline`` of at most :data:`MAX_LINE_BYTES`
    + 1 bytes (an overlong line is several pieces), a torn last line included."""
    while raw := fh.readline(MAX_LINE_BYTES + 1):
        yield raw


class JsonlStore(TraceStore):
    """``<root>/.eidolons/.trace/<thread>.jsonl``; with ``file``, every thread is that one
    file (``--trace FILE``)."""

    kind = "jsonl"

    def __init__(self, root: StrPath, file: StrPath | None = None) -> None:
        self.root = root
        self.file = file

    def path(self, thread_id: str | None) -> pathlib.Path:
        """The thread's file (:meth:`location` as a :class:`~pathlib.Path`)."""
        import pathlib

        return pathlib.Path(self.location(thread_id))

    def describe(self) -> str:
        return str(self.file if self.file is not None else pathstr.join(self.root, TRACE_DIR))

    def location(self, thread_id: str | None) -> str:
        return str(self.file if self.file is not None else thread_trace_path(self.root, thread_id))

    def append(self, thread_id: str | None, event: Mapping[str, Any]) -> Appended:
        return self.append_all(thread_id, [event])[0]

    def append_all(
        self, thread_id: str | None, events: Sequence[Mapping[str, Any]]
    ) -> list[Appended]:
        path = self.location(thread_id)
        from eidolons.trace.indexes import update

        # the keys of the payload events appended: the index names them even when the full
        # search would not read the line back (``--trace FILE``, a trace past the scan bound)
        extra = [
            key
            for event in events
            if isinstance(key := event.get("payload_path"), str) and is_payload_event(event, [key])
        ]
        try:  # one deadline for the trace's lock and then the payload index's
            until = deadline()
        except UsageError as exc:
            raise TraceWriteError(f"cannot append to trace {path}: {exc}") from None

        def after(fd: int, start: int, line: bytes, before: os.stat_result) -> None:
            update(fd, start, line)  # never raises; indexes the lines before it too
            self.index_payloads(extra, before, until)

        lines = append_events(path, events, after=after, until=until)
        return [Appended(loads_json(line), line, str(path)) for line in lines]

    def index_payloads(
        self,
        extra: list[str] | None = None,
        appended: os.stat_result | None = None,
        until: float | None = None,
    ) -> None:
        """Bring this host's payload index (ADR 0018) up to the project's trace files, under the
        trace's append lock (``appended``: the trace's ``fstat`` before the line; ``until``: the
        lock deadline it shares). Never raises: an index left behind covers less, and its
        readers take the full rule."""
        from eidolons.trace.indexes import refresh

        try:
            refresh(str(self.root), is_payload_event, extra or (), appended, until)
        except Exception:  # a hint: what it does not cover is read in full
            pass

    def latest_verdict(self, thread_id: str | None, message_id: str) -> dict[str, Any] | None:
        # the verdict index answers in O(1) when it checks out (ADR 0022), else the scan
        from eidolons.trace.indexes import lookup

        path = self.location(thread_id)
        try:
            bound = trace_scan_bound()  # a trace made huge must not stall a gate (ADR 0007)
            try:
                fd = open_trace(path)
            except FileNotFoundError:
                return None
            try:
                st = os.fstat(fd)
                found = lookup(fd, st, message_id, bound, path)
                if found is not None:
                    return found.event
                needle = verdict_needle(message_id)
                lines = reverse_lines(
                    fd, st.st_size, contains=needle, max_bytes=bound, name=path, decode=judged_line
                )
                return latest_counted(lines, message_id)
            finally:
                os.close(fd)
        except InputError as exc:
            raise TraceReadError(str(exc)) from None

    def iter_thread(self, thread_id: str | None) -> Iterator[TraceLine]:
        try:
            yield from read_events(self.location(thread_id), judged_line)
        except InputError as exc:
            raise TraceReadError(str(exc)) from None

    def iter_raw(self, thread_id: str | None) -> Iterator[bytes]:
        try:
            yield from read_raw_lines(self.location(thread_id))
        except InputError as exc:
            raise TraceReadError(str(exc)) from None

    def read_new(self, thread_id: str | None, cursor: int) -> tuple[list[TraceLine], int]:
        try:
            return read_new_events(self.location(thread_id), cursor, judged_line)
        except InputError as exc:
            raise TraceReadError(str(exc)) from None

    def has_thread(self, thread_id: str) -> bool:
        return os.path.isfile(self.location(thread_id))

    def find_payload(self, keys: list[str]) -> dict[str, Any] | None:
        try:  # checks each file's size before reading it: a sparse hole is never read
            return first_payload_event(payload_search_lines(self.root), keys)
        except InputError as exc:
            raise TraceReadError(str(exc)) from None

    def threads(self) -> list[str]:
        if self.file is not None:
            return [pathstr.stem(self.file)]
        try:
            names = os.listdir(pathstr.join(self.root, TRACE_DIR))
        except FileNotFoundError:
            return []
        except OSError as exc:
            where = pathstr.join(self.root, TRACE_DIR)
            raise TraceReadError(f"cannot list {where}: {exc.strerror}") from None
        ids = [n[: -len(".jsonl")] for n in names if n.endswith(".jsonl")]
        return sorted(i for i in ids if thread_file_name(i) == i)
