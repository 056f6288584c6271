"""This host's indexes of the JSONL trace, brought up under its append lock: hints, never
evidence (what they do not cover is read in full).

The verdict index (ADRs 0012, 0022): where each message's latest orchestrator verdict sits
in a trace, so the record lookup costs the same on any trace length. The line it points to
is re-read, must match byte for byte and is judged by the store's rule; lines past what it
covers are scanned; any damage answers "cannot tell" (the caller scans). It lives in the
host's config directory (``verdicts/<dev>-<ino>.idx``): two checksummed header slots, then
an open-addressing table of checksummed 64-byte slots, rebuilt twice as large when half
full.

The payload index's fill (:mod:`eidolons.io.paths`, ADR 0018), after each append
and by ``trace import``: under the index's lock it reads what the index does not cover, by
the full search's rule on the same pieces, and writes the new entries in place; what it
records as covered is what ``fstat`` said before the read.
"""

from __future__ import annotations

import os
from _json import encode_basestring_ascii

from eidolons.ecl.integrity import sha256 as _sha256
from eidolons.ecl.integrity import sha256_hex
from eidolons.io.config import TRACE_DIR, trace_scan_bound
from eidolons.io.files import deadline, flock_until
from eidolons.io.paths import (
    COVERS,
    ENTRIES,
    HEAD_BYTES,
    MAX_EVIDENCE_BYTES,
    PayloadIndex,
    entry,
    frozen,
    head,
    index_file,
    parse_index,
    read_head,
    read_recovered,
    root_line,
    snapshot,
)
from eidolons.trace.log import (
    MAX_LINE_BYTES,
    PAYLOAD_FIELD,
    decode_line,
    reverse_lines,
    search_pieces,
)
from eidolons.trace.store import (
    counted_for,
    judged_line,
    latest_counted,
    record_from_line,
    verdict_needle,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any

    IsPayload = Callable[[Mapping[str, Any] | None, list[str]], bool]

INDEX_DIR = "verdicts"
MAGIC = "evidx1"
MAGIC_BYTES = MAGIC.encode("ascii")
HEADER_SLOT = 256
HEADER = 2 * HEADER_SLOT
SLOT = 64
NO_ID = bytes(16)  # the id hash field of an empty slot
MIN_CAPACITY = 64  # 4 KiB: a file per trace on the host, most threads hold few messages
MAX_CAPACITY = 1 << 30
RUN = 4  # slots read per probe step (a table at most half full: most probes end in one)
NO_LINE = "-"


class Corrupt(ValueError):
    """A slot of the index fails its checksum."""


class Found:
    """The index's answer: ``event`` is the latest verdict, or None (there is none)."""

    __slots__ = ("event",)

    def __init__(self, event: dict[str, Any] | None) -> None:
        self.event = event


class Header:
    __slots__ = ("capacity", "count", "covered", "gen", "last_sha", "last_start")

    def __init__(
        self, gen: int, capacity: int, count: int, covered: int, last_start: int, last_sha: str
    ) -> None:
        self.gen = gen
        self.capacity = capacity
        self.count = count
        self.covered = covered
        self.last_start = last_start
        self.last_sha = last_sha

    def fields(self) -> str:
        return (
            f"{MAGIC} {self.gen} {self.capacity} {self.count} {self.covered} "
            f"{self.last_start} {self.last_sha}"
        )


_DIRS: dict[tuple[str | None, str | None], str] = {}


def index_dir() -> str:
    """``verdicts/`` beside the key directory (:func:`eidolons.keys.host.key_dir`, the
    one rule; remembered per ``XDG_CONFIG_HOME`` and ``HOME``)."""
    env = (os.environ.get("XDG_CONFIG_HOME"), os.environ.get("HOME"))
    found = _DIRS.get(env)
    if found is None:
        from eidolons.io.paths import config_dir

        found = _DIRS[env] = os.path.join(config_dir(), INDEX_DIR)
    return found


def file_key(st: os.stat_result) -> str:
    return f"{st.st_dev:x}-{st.st_ino:x}"


def index_path(st: os.stat_result) -> str:
    return os.path.join(index_dir(), file_key(st) + ".idx")


def id_hash(needle: bytes) -> bytes:
    """16 bytes naming the message (its id as this tool writes it: one spelling)."""
    return _sha256(b"eidolons-verdict-index\0" + needle).digest()[:16]


def _check(key: str, text: str) -> str:
    return _sha256(f"{key}\n{text}".encode()).hexdigest()[:32]


def header_slot(key: str, header: Header) -> bytes:
    text = header.fields()
    raw = f"{text} {_check(key, text)}\n".encode("ascii")
    return raw[:-1].ljust(HEADER_SLOT - 1, b" ") + b"\n"


def read_header(raw: bytes, key: str) -> Header | None:
    """The valid header slot with the higher ``gen`` of ``raw`` (the first 512 bytes)."""
    candidates: list[tuple[int, list[bytes], bytes]] = []
    for at in (0, HEADER_SLOT):
        slot = raw[at : at + HEADER_SLOT]
        fields = slot.split()
        if len(fields) == 8 and fields[0] == MAGIC_BYTES and fields[1].isdigit():
            candidates.append((int(fields[1]), fields, slot))
    if len(candidates) == 2 and candidates[1][0] > candidates[0][0]:
        candidates.reverse()  # the newer first
    for _, fields, slot in candidates:
        if not b"".join(fields[2:6]).isdigit() or not fields[6].isascii():
            continue
        text = b" ".join(fields[:7]).decode("ascii")
        if slot != f"{text} {_check(key, text)}".encode().ljust(HEADER_SLOT - 1) + b"\n":
            continue
        gen, cap, count, covered, last_start = map(int, fields[1:6])
        if cap < MIN_CAPACITY or cap > MAX_CAPACITY or cap & (cap - 1) or count > cap // 2:
            continue
        return Header(gen, cap, count, covered, last_start, fields[6].decode("ascii"))
    return None


def slot_bytes(key: str, number: int, idh: bytes, off: int, length: int, sha: bytes) -> bytes:
    body = idh + off.to_bytes(8, "big") + length.to_bytes(4, "big") + sha
    check = _sha256(f"{key}\n{number}\n".encode() + body).digest()[:4]
    return body + check


def empty_slot(key: str, number: int) -> bytes:
    """An empty slot is checksummed too: bytes a crash left as zeros are damage, never
    "no verdict"."""
    return slot_bytes(key, number, NO_ID, 0, 0, bytes(32))


def _slot_ok(key: str, number: int, raw: bytes) -> bool:
    check = _sha256(f"{key}\n{number}\n".encode() + raw[:60]).digest()[:4]
    return len(raw) == SLOT and check == raw[60:]


def _home(idh: bytes, capacity: int) -> int:
    return int.from_bytes(idh[:8], "big") & (capacity - 1)


def probe(ifd: int, key: str, capacity: int, idh: bytes) -> tuple[int, bytes] | None:
    """(slot number, its bytes): the message's slot, or the empty one where it would go;
    None when a slot on the way fails its checksum (cannot tell)."""
    number = _home(idh, capacity)
    for _ in range(0, capacity, RUN):
        count = min(RUN, capacity - number)
        run = os.pread(ifd, count * SLOT, HEADER + number * SLOT)
        if len(run) != count * SLOT:
            return None
        for i in range(count):
            raw = run[i * SLOT : (i + 1) * SLOT]
            if not _slot_ok(key, number + i, raw):
                return None
            if raw[:16] == NO_ID or raw[:16] == idh:
                return number + i, raw
        number = (number + count) & (capacity - 1)
    return None  # a full table is not one this module writes


def _line_at(fd: int, off: int, length: int, sha: bytes | str) -> bytes | None:
    """The line's bytes when ``[off, off + length)`` is a whole line (a line start, a
    newline after it) hashing to ``sha`` (bytes or hex), else None."""
    if off < 0 or length < 1 or length > MAX_LINE_BYTES:
        return None
    lead = 1 if off > 0 else 0
    raw = os.pread(fd, length + 1 + lead, off - lead)
    if len(raw) != length + 1 + lead or raw[-1:] != b"\n" or (lead and raw[:1] != b"\n"):
        return None
    line = raw[lead:-1]
    digest = _sha256(line)
    if (digest.digest() if isinstance(sha, bytes) else digest.hexdigest()) != sha:
        return None
    return line


def _covers(fd: int, size: int, header: Header) -> bool:
    """Whether the trace still holds, where the header says, the last line it covers."""
    if header.covered == 0:
        return header.last_start == 0 and header.last_sha == NO_LINE
    if header.covered > size or header.last_start >= header.covered:
        return False
    length = header.covered - header.last_start - 1
    return _line_at(fd, header.last_start, length, header.last_sha) is not None


def _open_index(st: os.stat_result, flags: int) -> tuple[int, int] | None:
    """(descriptor, size) of the trace's index when it is a regular file."""
    try:
        ifd = os.open(index_path(st), flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    ist = os.fstat(ifd)
    if ist.st_mode & 0o170000 != 0o100000:
        os.close(ifd)
        return None
    return ifd, ist.st_size


def lookup(
    fd: int, st: os.stat_result, message_id: str, bound: int, name: object = ""
) -> Found | None:
    """The latest orchestrator verdict for ``message_id`` in the open trace ``fd`` as the
    index and the uncovered tail tell it, or None: cannot tell (the caller scans). Raises
    :class:`~eidolons.errors.InputError` for a tail past ``bound`` with no verdict."""
    opened = _open_index(st, os.O_RDONLY)
    if opened is None:
        return None
    ifd, isize = opened
    try:
        key = file_key(st)
        header = read_header(os.pread(ifd, HEADER, 0), key)
        if header is None or isize != HEADER + header.capacity * SLOT:
            return None
        if not _covers(fd, st.st_size, header):
            return None
        needle = verdict_needle(message_id)
        if st.st_size > header.covered:  # past the index: the full scan's rule, latest first
            tail = reverse_lines(
                fd,
                st.st_size,
                header.covered,
                contains=needle,
                max_bytes=bound,
                name=name,
                decode=judged_line,
            )
            event = latest_counted(tail, message_id)
            if event is not None:
                return Found(event)
        slot = probe(ifd, key, header.capacity, id_hash(needle))
        if slot is None:
            return None
        if slot[1][:16] == NO_ID:
            return Found(None)
        raw = slot[1]
        off, length = int.from_bytes(raw[16:24], "big"), int.from_bytes(raw[24:28], "big")
        if off + length + 1 > header.covered:
            return None
        line_bytes = _line_at(fd, off, length, raw[28:60])
        if line_bytes is None:
            return None
        event = record_from_line(line_bytes, message_id)
        return Found(event) if event is not None else None
    except OSError:
        return None
    finally:
        os.close(ifd)


def judge(raw: bytes) -> bytes | None:
    """The id hash of the message ``raw`` is a counted verdict for (the lookup's rule), or
    None: a line is indexed under a message exactly when the full scan would accept it."""
    mid = counted_for(judged_line(raw, 0))
    return None if mid is None else id_hash(verdict_needle(mid))


Entry = tuple[bytes, int, int, bytes]  # id hash, offset, length, line SHA-256


def scan_forward(fd: int, start: int, end: int) -> list[Entry]:
    """The verdict lines among the whole lines of ``[start, end)``, in order; an overlong
    line is damage (never held whole, never indexed), as for every reader."""
    out: list[Entry] = []
    at, overlong = start, False
    with open(os.dup(fd), "rb") as fh:
        fh.seek(start)
        while at < end:
            raw = fh.readline(min(MAX_LINE_BYTES + 1, end - at))
            if not raw:
                raise OSError("the trace is shorter than it was")
            whole = raw.endswith(b"\n")
            if whole and not overlong and (idh := judge(raw[:-1])) is not None:
                out.append((idh, at, len(raw) - 1, _sha256(raw[:-1]).digest()))
            overlong, at = not whole, at + len(raw)  # a piece of a longer line
    return out


def update(fd: int, start: int, line: bytes) -> None:
    """Bring the index of the open trace ``fd`` up to the line just written at ``start``
    (under the append lock). Never raises: an index it cannot update is removed."""
    try:
        _update(fd, os.fstat(fd), start, line)
    except Exception:  # whatever went wrong, the append stands (the line is the record)
        try:
            os.unlink(index_path(os.fstat(fd)))
        except OSError:
            pass


def _update(fd: int, st: os.stat_result, start: int, line: bytes) -> None:
    key = file_key(st)
    opened = _open_index(st, os.O_RDWR)
    ifd = opened[0] if opened is not None else None
    try:
        header = None
        if opened is not None:
            header = read_header(os.pread(opened[0], HEADER, 0), key)
            if header is not None and (
                opened[1] != HEADER + header.capacity * SLOT
                or header.covered > start
                or not _covers(fd, start, header)
            ):
                header = None
        if ifd is not None and header is not None:
            new = _entries(fd, header.covered, start, line)
            try:
                if header.count + len(new) <= header.capacity // 2:
                    _write_in_place(ifd, key, header, new, start + len(line) + 1, start, line)
                    return
                _rebuild(fd, st, key, _read_entries(ifd, key, header) + new, start, line)
                return
            except Corrupt:  # a slot the index cannot trust: index the whole trace anew
                pass
    finally:
        if ifd is not None:
            os.close(ifd)
    _rebuild(fd, st, key, None, start, line)


def _entries(fd: int, covered: int, start: int, line: bytes) -> list[Entry]:
    """The verdicts of the uncovered lines before ``start``, then of ``line``."""
    if start - covered > trace_scan_bound():
        raise ValueError("too much of the trace to index")
    new = scan_forward(fd, covered, start) if start > covered else []
    idh = judge(line)
    if idh is not None:
        new.append((idh, start, len(line), _sha256(line).digest()))
    return new


def _write_in_place(
    ifd: int, key: str, header: Header, new: list[Entry], end: int, start: int, line: bytes
) -> None:
    for idh, off, length, sha in new:  # slots first, then the header that covers them
        found = probe(ifd, key, header.capacity, idh)
        if found is None:
            raise Corrupt("a corrupt slot")
        number, raw = found
        header.count += raw[:16] == NO_ID
        os.pwrite(ifd, slot_bytes(key, number, idh, off, length, sha), HEADER + number * SLOT)
    header.gen += 1
    header.covered, header.last_start = end, start
    header.last_sha = _sha256(line).hexdigest()
    os.pwrite(ifd, header_slot(key, header), (header.gen % 2) * HEADER_SLOT)


def _read_entries(ifd: int, key: str, header: Header) -> list[Entry]:
    table = os.pread(ifd, header.capacity * SLOT, HEADER)
    out: list[Entry] = []
    for number in range(header.capacity):
        raw = table[number * SLOT : (number + 1) * SLOT]
        if not _slot_ok(key, number, raw):
            raise Corrupt("a corrupt slot")
        if raw[:16] == NO_ID:
            continue
        off, length = int.from_bytes(raw[16:24], "big"), int.from_bytes(raw[24:28], "big")
        out.append((raw[:16], off, length, raw[28:60]))
    return sorted(out, key=lambda e: e[1])  # trace order: a later verdict overwrites


def _rebuild(
    fd: int, st: os.stat_result, key: str, entries: list[Entry] | None, start: int, line: bytes
) -> None:
    """A fresh table of the latest of ``entries`` per message (None: the whole trace),
    renamed over the index; created before the trace is read (an unwritable host
    directory costs no scan)."""
    path = index_path(st)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    fd_tmp = os.open(tmp, flags, 0o600)
    try:
        if entries is None:
            entries = _entries(fd, 0, start, line)
        latest = {entry[0]: entry for entry in entries}  # a later verdict overwrites
        capacity = MIN_CAPACITY
        while len(latest) > capacity // 2:
            capacity *= 2
        if capacity > MAX_CAPACITY:
            raise ValueError("too many messages to index")
        table: list[bytes | None] = [None] * capacity
        for idh, off, length, sha in latest.values():
            number = _home(idh, capacity)
            while table[number] is not None:
                number = (number + 1) & (capacity - 1)
            table[number] = slot_bytes(key, number, idh, off, length, sha)
        body = b"".join(empty_slot(key, i) if raw is None else raw for i, raw in enumerate(table))
        end = start + len(line) + 1
        header = Header(1, capacity, len(latest), end, start, _sha256(line).hexdigest())
        head = header_slot(key, header) + b" " * (HEADER_SLOT - 1) + b"\n"
        head = head[HEADER_SLOT:] + head[:HEADER_SLOT]  # gen 1 is slot 1
        view = memoryview(head + body)
        while view:
            view = view[os.write(fd_tmp, view) :]
        os.close(fd_tmp)
        fd_tmp = -1
        os.replace(tmp, path)
    except BaseException:
        if fd_tmp >= 0:
            os.close(fd_tmp)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


TAIL = 64  # bytes before the point a file was read to, re-checked before reading on


def refresh(
    root: str,
    is_payload: IsPayload,
    extra: Iterable[str] = (),
    appended: os.stat_result | None = None,
    until: float | None = None,
) -> None:
    """Bring the payload index of ``root`` up to every trace file on disk, adding the keys
    of ``extra`` (appended outside the trace directory). ``is_payload``: the store's rule;
    ``appended``: the ``fstat``, before its line, of the trace just appended to, the one
    file read on from where the index stopped (ADR 0018). Raises :class:`OSError`."""
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
        old = parse_index(found[1], root_st) if found is not None else None
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
    """The index's entry lines: ``old``, the block it has (after a newline, as
    ``PayloadIndex.entries``), and ``new``, found since. Past :data:`_SEARCHES` lookups the block
    is split into a set once: an append costs what it reads, not what the index holds."""

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
    old: PayloadIndex | None,
    keys: _Keys,
    is_payload: IsPayload,
    appended: os.stat_result | None = None,
) -> bytes | None:
    """The coverage lines of the trace files on disk, their payload keys added to ``keys``;
    None when the trace directory cannot be read as the full search reads it."""
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
    start = max(0, clean - TAIL)
    return sha256_hex(os.pread(fd, clean - start, start))


def _scan(fd: int, start: int, size: int, keys: _Keys, is_payload: IsPayload) -> int:
    """Add the payload keys of ``[start, size)`` to ``keys`` by the full search's rule on
    the same pieces; returns the end of the last whole line read (a later scan's start)."""
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
