"""Bringing this host's payload index (:mod:`eidolons.io.payloadindex`, ADR 0018) up to the
project's trace files: called by the JSONL store after each append and by ``trace
import``. Under the index's lock it reads what the index does not cover, by the full
search's rule on the same pieces, and writes the new entries in place; what it records as
covered is what ``fstat`` said before the read.
"""

from __future__ import annotations

import os
from _json import encode_basestring_ascii

from eidolons.io.payloadindex import (
    COVERS,
    ENTRIES,
    HEAD_BYTES,
    MAX_EVIDENCE_BYTES,
    Index,
    entry,
    frozen,
    head,
    index_file,
    parse,
    read_head,
    read_recovered,
    root_line,
    snapshot,
)

TAIL = 64  # bytes before the point a file was read to, re-checked before reading on
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any

    IsPayload = Callable[[Mapping[str, Any] | None, list[str]], bool]


def refresh(
    root: str,
    is_payload: IsPayload,
    extra: Iterable[str] = (),
    appended: os.stat_result | None = None,
    until: float | None = None,
) -> None:
    """Bring the index of the project at ``root`` up to every trace file on disk, adding the
    keys of ``extra`` (a payload event appended outside the trace directory). ``is_payload``:
    the store's rule, passed in. ``appended``: the ``fstat``, before its line, of the trace
    this process just appended to, the one file read on from where the index stopped (ADR
    0138). A file past the scan bound is left uncovered. The lock is waited for until
    ``until``. Raises :class:`OSError` when the index cannot be written."""
    from eidolons.io.files import deadline, flock_until

    until = deadline() if until is None else until
    root_st = os.stat(root)
    path = index_file(root_st)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(path, flags, 0o600)
    try:
        if os.fstat(fd).st_mode & 0o170000 != 0o100000:
            raise OSError(f"{path} is not a regular file")
        flock_until(fd, until, path)
        if frozen(fd):  # its entries cannot all be read back: it stays, naming every path
            return
        found = snapshot(fd, MAX_EVIDENCE_BYTES)
        gen = _generation(fd)
        old = parse(found[1], root_st) if found is not None else None
        # an index a writer left half-way: its entries are evidence still (ADR 0018)
        keys = _Keys(old.entries if old else b"\n" + b"".join(read_recovered(fd, root_st)))
        cover = _cover(root, old, keys, is_payload, appended)
        extra = list(extra)
        if cover is None:
            if not extra:
                return
            # the payload of a --trace FILE (which the full search does not read) is
            # recorded still, with nothing covered: readers then take the full rule
            cover = b""
        for key in extra:
            keys.add(entry(key))
        tail = b"".join(keys.new) + COVERS + cover
        if old is not None:  # the entries it has stay where they are: only the tail is written
            at = len(root_line(root_st) + ENTRIES) - 1 + len(old.entries)  # its covers line
            if old.raw[at:] == tail:
                return
            body_length = at + len(tail)
        else:
            tail = root_line(root_st) + ENTRIES + keys.old[1:] + tail
            at, body_length = 0, len(tail)
        # written whatever its size (the entries are evidence); past MAX_INDEX_BYTES the
        # hook no longer reads it (the full rule), past MAX_EVIDENCE_BYTES it is frozen
        os.pwrite(fd, head(gen + 1, 0), 0)  # odd: readers take the full rule meanwhile
        os.pwrite(fd, tail, HEAD_BYTES + at)
        os.ftruncate(fd, HEAD_BYTES + body_length)
        if os.environ.get("EIDOLONS_TRACE_FSYNC") == "1":
            os.fsync(fd)
        os.pwrite(fd, head(gen + 2, body_length), 0)
    finally:
        os.close(fd)


def _generation(fd: int) -> int:
    """The file's generation made even (a writer that died half-way left it odd; a new
    or damaged file is 0), so that the next one differs from every earlier one."""
    found = read_head(os.pread(fd, HEAD_BYTES, 0))
    return 0 if found is None else found[0] + found[0] % 2


class _Keys:
    """The index's entry lines: ``old``, the block it has (preceded by a newline, as
    :attr:`eidolons.io.payloadindex.Index.entries`), and ``new``, the lines found since, in
    order. A few lookups search the block itself; past :data:`_SEARCHES` (a first fill,
    a file read again) it is split into a set once, so that an append costs what it
    reads, not what the index holds."""

    __slots__ = ("_searches", "_set", "new", "old")

    def __init__(self, old: bytes) -> None:
        self.old = old
        self.new: dict[bytes, None] = {}
        self._searches = 0
        self._set: set[bytes] | None = None

    def add(self, line: bytes) -> None:
        if line in self.new:
            return
        if self._set is None:
            self._searches += 1
            if self._searches > _SEARCHES:
                self._set = set(self.old[1:].splitlines(keepends=True))
            elif b"\n" + line in self.old:
                return
        if self._set is None or line not in self._set:
            self.new[line] = None


_SEARCHES = 32


def _cover(
    root: str,
    old: Index | None,
    keys: _Keys,
    is_payload: IsPayload,
    appended: os.stat_result | None = None,
) -> bytes | None:
    """The coverage lines of the trace files on disk, their payload keys added to
    ``keys`` (entries are never removed); None when the trace directory cannot be read
    as the full search reads it (a link, not listable): the old index then stays as it
    is, unless it must record an appended payload's key (:func:`refresh`'s ``extra``)."""
    from eidolons.io.config import TRACE_DIR, trace_scan_bound

    trace_dir = os.path.join(root, TRACE_DIR)
    for d in (os.path.dirname(trace_dir), trace_dir):
        try:
            if os.lstat(d).st_mode & 0o170000 != 0o040000:
                return None
        except FileNotFoundError:
            break
    try:
        listed = sorted([n for n in os.listdir(trace_dir) if n.endswith(".jsonl")])
    except FileNotFoundError:
        listed = []
    except OSError:
        return None
    cover: list[bytes] = []
    budget = trace_scan_bound()
    for name in listed:
        encoded = encode_basestring_ascii(name).encode("ascii")
        prev = old.cover.get(encoded) if old is not None else None
        path = os.path.join(trace_dir, name)
        line, used = _cover_file(path, prev, budget, keys, is_payload, appended)
        budget -= used
        if line is not None:
            cover.append(b"trace " + line + b" " + encoded + b"\n")
    return b"".join(cover)


def _cover_file(
    path: str,
    prev: list[bytes] | None,
    budget: int,
    keys: _Keys,
    is_payload: IsPayload,
    appended: os.stat_result | None = None,
) -> tuple[bytes | None, int]:
    """(the file's coverage fields, bytes read): its payload keys added to ``keys``; None
    when it is not a regular file opened without a link, or past ``budget``. A file as
    the index covers it already (``lstat``, as readers see it) is not opened."""
    try:
        seen = os.lstat(path)
    except OSError:
        return None, 0
    if prev is not None and seen.st_mode & 0o170000 == 0o100000 and prev[:4] == _state(seen):
        return b" ".join(prev[:6]), 0  # unchanged since it was read
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None, 0
    try:
        st = os.fstat(fd)
        if st.st_mode & 0o170000 != 0o100000:
            return None, 0
        state = _state(st)
        start = _resume(fd, st, prev, appended)
        if st.st_size - start > budget:
            return None, 0
        clean = _scan(fd, start, st.st_size, keys, is_payload)
        fields = [*state, b"%d" % clean, _tail(fd, clean).encode("ascii")]
        return b" ".join(fields), st.st_size - start
    except OSError:
        return None, 0
    finally:
        os.close(fd)


def _state(st: os.stat_result) -> list[bytes]:
    """A file's coverage as readers compare it: device, inode, size, ctime."""
    return (b"%d %d %d %d" % (st.st_dev, st.st_ino, st.st_size, st.st_ctime_ns)).split()


def _resume(
    fd: int, st: os.stat_result, prev: list[bytes] | None, appended: os.stat_result | None
) -> int:
    """Where to read the file from: where the index stopped when it is the file this process
    just appended to, as the index covered it (``appended``: ctime cannot be set back), and
    the bytes before that point are unchanged; else 0: read whole again (ADR 0018)."""
    if prev is None or prev[:2] != [b"%d" % st.st_dev, b"%d" % st.st_ino]:
        return 0
    if appended is None or _state(appended) != prev[:4]:
        return 0
    try:
        size, clean = int(prev[2]), int(prev[4])
    except ValueError:
        return 0
    if clean > size or size > st.st_size or _tail(fd, clean).encode("ascii") != prev[5]:
        return 0
    return clean


def _tail(fd: int, clean: int) -> str:
    from eidolons.ecl.integrity import sha256_hex

    start = max(0, clean - TAIL)
    return sha256_hex(os.pread(fd, clean - start, start))


def _scan(fd: int, start: int, size: int, keys: _Keys, is_payload: IsPayload) -> int:
    """Add the payload keys of ``[start, size)`` (``start`` a line start) to ``keys``, by
    the full search's rule on the same pieces (:func:`eidolons.trace.log.payload_search_lines`
    reads lines of at most :data:`~eidolons.trace.log.MAX_LINE_BYTES` + 1 bytes from a line
    start); returns the end of the last whole line read (where a later scan resumes)."""
    from eidolons.trace.log import PAYLOAD_FIELD, decode_line, search_pieces

    clean = pos = start
    if start >= size:
        return clean
    with open(os.dup(fd), "rb") as fh:
        fh.seek(start)
        for raw in search_pieces(fh):
            pos += len(raw)
            if raw.endswith(b"\n") and pos <= size:
                clean = pos
            if PAYLOAD_FIELD in raw:
                event = decode_line(raw.rstrip(b"\n"), 0).event
                key = event.get("payload_path") if event else None
                if isinstance(key, str) and is_payload(event, [key]):
                    keys.add(entry(key))
            if pos >= size:
                break
    return clean
