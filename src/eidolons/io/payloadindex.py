"""The index of payload paths the trace names, held on the host (ADR 0018): its entries
are evidence in the refusing direction (never removed); it says "not named" only for the
trace files it covers exactly (device, inode, size, ctime), else "cannot tell". Written
in place by :mod:`eidolons.trace.indexes`; readers take no lock. Format::

    eidolons-payload-index v3 <gen> <length>        (padded to 64 bytes)
    root <dev> <ino>
    entries
    "<payload_path>"                                                    (one per path)
    covers
    trace <dev> <ino> <size> <ctime_ns> <clean> <tail-sha256> <"name">   (one per file)

A writer writes the header with an odd generation, the body, then the next even one; a
reader takes the body only between two equal even headers (:func:`snapshot`). Entries
come first, old ones first, so a writer that stops half-way leaves them whole
(:func:`recovered_entries`). Imports only ``os`` and ``_json`` (the hook's fast path).

See ADRs 0012, 0022.
"""

from __future__ import annotations

import os
from _json import encode_basestring_ascii

INDEX_DIR = "payloads"
HEADER = b"eidolons-payload-index v3 "
HEAD_BYTES = 64  # the header line: HEADER, the generation and the body's length, padded
ENTRIES = b"entries\n"
COVERS = b"covers\n"
MAX_INDEX_BYTES = 8 * 1024 * 1024  # the most the allowing direction reads (the hook)
#: the most the evidence direction reads (the full rule, the writer); past it the index
#: is frozen and names every path (ADR 0018): an agent that forges emit lines by the
#: million must not stop new entries from being recorded
MAX_EVIDENCE_BYTES = 64 * 1024 * 1024


def entry(key: str) -> bytes:
    """The index line for a payload key."""
    return encode_basestring_ascii(key).encode("ascii") + b"\n"


def spellings(path: str) -> list[str]:
    """``path`` as written (made absolute, ``..`` folded), with its directory resolved, and
    fully resolved: a link swapped in for the file or a directory must not move a hand-off
    out of protection, so every spelling is checked."""
    lexical = os.path.abspath(path)
    parent = os.path.join(os.path.realpath(os.path.dirname(lexical)), os.path.basename(lexical))
    return list(dict.fromkeys([lexical, parent, os.path.realpath(lexical)]))


def payload_keys(path: str, root: str) -> list[str]:
    """The keys a path may be named by (``payload_path``): relative to the resolved root,
    for the path as written, with its directory resolved, and fully resolved; a spelling
    outside the root as it is, absolute (:func:`eidolons.io.config.payload_key` names a
    payload outside the project so, ADR 0018). The one rule;
    :func:`eidolons.gates.trigger.find_handoff` calls it."""
    real_root = os.path.realpath(root)
    prefix = real_root if real_root.endswith(os.sep) else real_root + os.sep
    keys = []
    for p in spellings(path):
        if p == real_root:
            keys.append(".")
        elif p.startswith(prefix):
            keys.append(p[len(prefix) :])
        else:
            keys.append(p)
    return list(dict.fromkeys(keys))


def root_line(st: os.stat_result) -> bytes:
    return b"root %d %d\n" % (st.st_dev, st.st_ino)


def head(gen: int, length: int) -> bytes:
    """The header line: ``gen`` odd while a writer rewrites the body in place, even once
    the body of ``length`` bytes after it is whole."""
    return (HEADER + b"%d %d" % (gen, length)).ljust(HEAD_BYTES - 1) + b"\n"


def read_head(raw: bytes) -> tuple[int, int] | None:
    """(generation, body length) of a header line, None when it is not one."""
    fields = raw[len(HEADER) :].split()
    if (
        len(raw) != HEAD_BYTES
        or not raw.startswith(HEADER)
        or raw[-1:] != b"\n"
        or len(fields) != 2
        or not all(f.isdigit() for f in fields)
    ):
        return None
    return int(fields[0]), int(fields[1])


def snapshot(fd: int, limit: int = MAX_INDEX_BYTES) -> tuple[int, bytes] | None:
    """(generation, body) of the open index file, as one writer left it whole: the header
    is read again after the body, so a body read while a writer rewrote it (the header
    then says another generation, or an odd one) is None, as is any damage."""
    st = os.fstat(fd)
    if st.st_mode & 0o170000 != 0o100000 or st.st_size > limit:
        return None
    data = os.pread(fd, st.st_size + 1, 0)  # not an 8 MiB buffer for a small index
    found = read_head(data[:HEAD_BYTES])
    if found is None or found[0] % 2 or len(data) < HEAD_BYTES + found[1]:
        return None
    if os.pread(fd, HEAD_BYTES, 0) != data[:HEAD_BYTES]:
        return None  # a writer began meanwhile
    return found[0], data[HEAD_BYTES : HEAD_BYTES + found[1]]


def index_file(st: os.stat_result) -> str:
    from eidolons.io.paths import config_dir  # the one rule (a relative XDG is ignored)

    return os.path.join(config_dir(), INDEX_DIR, f"{st.st_dev:x}-{st.st_ino:x}.idx")


def index_path(root: str) -> str:
    """The index file of the project at ``root`` (raises :class:`OSError` when the root
    cannot be stat'ed)."""
    return index_file(os.stat(root))


class Index:
    """A parsed index file: ``cover`` maps each covered trace file's encoded name to its
    fields (dev, ino, size, ctime_ns, clean, tail-sha256); ``entries`` is the entry block
    preceded by a newline (what :func:`names` searches)."""

    __slots__ = ("cover", "entries", "raw")

    def __init__(self, cover: dict[bytes, list[bytes]], entries: bytes, raw: bytes) -> None:
        self.cover = cover
        self.entries = entries
        self.raw = raw


def load(root_st: os.stat_result) -> Index | None:
    """The project's index file, parsed; None when there is none or it is not one this
    tool wrote whole for this root (not a regular file, too large, truncated, being
    rewritten, another root's)."""
    try:
        fd = os.open(
            index_file(root_st), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        )
    except OSError:
        return None
    try:
        found = snapshot(fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    return None if found is None else parse(found[1], root_st)


def parse(body: bytes, root_st: os.stat_result) -> Index | None:
    """An index body (after the header line) of the root ``root_st``, or None."""
    first = root_line(root_st) + ENTRIES
    if not body.startswith(first) or not body.endswith(b"\n"):
        return None
    entries_end = body.find(b"\n" + COVERS, len(first) - 1)
    if entries_end < 0:
        return None
    cover: dict[bytes, list[bytes]] = {}
    for line in body[entries_end + len(COVERS) + 1 :].splitlines():
        fields = line.split(b" ", 7)
        if len(fields) != 8 or fields[0] != b"trace":
            return None
        cover[fields[7]] = fields[1:7]
    return Index(cover, body[len(first) - 1 : entries_end + 1], body)


def recovered_entries(data: bytes, root_st: os.stat_result) -> list[bytes]:
    """The entry lines of an index file's bytes ``data`` of the root ``root_st``, whole or
    not (a writer that stopped half-way, its header odd or its body short): every line
    of the body that is an entry as :func:`entry` writes it. A rewrite writes the entries
    it had where they were (they come first), so none of them is ever missing here; a
    line a torn write made up only names one more path (the refusing direction)."""
    from _json import scanstring

    body = data[HEAD_BYTES:]
    if len(data) < HEAD_BYTES or not body.startswith(root_line(root_st)):
        return []
    found = []
    for line in body.splitlines(keepends=True):
        if not (line.startswith(b'"') and line.endswith(b'"\n')):
            continue
        try:
            text = line[:-1].decode("ascii")
            value, end = scanstring(text, 1, True)
        except (UnicodeDecodeError, ValueError):
            continue
        if end == len(text) and entry(value) == line:
            found.append(line)
    return list(dict.fromkeys(found))


def read_recovered(fd: int, root_st: os.stat_result) -> list[bytes]:
    """:func:`recovered_entries` of the open index file (at most
    :data:`MAX_EVIDENCE_BYTES`: the caller checks the size first)."""
    st = os.fstat(fd)
    if st.st_mode & 0o170000 != 0o100000:
        return []
    return recovered_entries(os.pread(fd, min(st.st_size, MAX_EVIDENCE_BYTES), 0), root_st)


def frozen(fd: int) -> bool:
    """Whether the open index file is past :data:`MAX_EVIDENCE_BYTES`: it is then never
    rewritten (its entries could not all be read back) and names every path."""
    return os.fstat(fd).st_size > MAX_EVIDENCE_BYTES


def covered_entries(root: str, states: list[tuple[str, int, int, int, int]]) -> bytes | None:
    """The index's entries (each preceded by a newline) when the index covers exactly each
    trace file of ``states`` (:func:`eidolons.io.paths.trace_states`, the files on
    disk now), ``b""`` when there is neither an index nor a trace (nothing is named),
    or None: cannot tell (no index while traces exist, an index that is not one, or
    that does not cover a trace file as it is now). The caller
    (:func:`eidolons.io.paths.payload_index`) settles the store first."""
    try:
        index = load(os.stat(root))
    except OSError:
        return None
    if index is None:
        return b"" if not states and not _maybe_index(root) else None
    cover = index.cover
    for name, dev, ino, size, ctime in states:
        fields = cover.get(encode_basestring_ascii(name).encode("ascii"))
        if fields is None or fields[:4] != [b"%d" % dev, b"%d" % ino, b"%d" % size, b"%d" % ctime]:
            return None
    return index.entries


def _maybe_index(root: str) -> bool:
    """Whether an index file exists for ``root`` (that :func:`load` refused): then it
    cannot tell, even with no trace on disk."""
    try:
        return os.path.lexists(index_path(root))
    except OSError:
        return True


def names(index: bytes, path: str, root: str) -> bool:
    """Whether ``index`` (from :func:`covered_entries`) names ``path``."""
    return any(b"\n" + entry(k) in index for k in payload_keys(path, root))


def named_on_host(path: str, root: str) -> str | None:
    """The index file when this host's index of the project names ``path`` (whatever the
    traces hold now), else None: evidence that a trace named it (ADR 0018). Read as the
    next writer reads it (:func:`recovered_entries`): an index a writer left half-way
    still holds every entry it had."""
    try:
        st = os.stat(root)
        fd = os.open(index_file(st), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if frozen(fd):  # fail closed: what it names cannot be read back
            return f"{index_file(st)}, past {MAX_EVIDENCE_BYTES} bytes: it names every path"
        found = read_recovered(fd, st)
    except OSError:
        return None
    finally:
        os.close(fd)
    if not names(b"\n" + b"".join(found), path, root):
        return None
    return index_file(st)
