"""Paths as ``str``, ``os`` only: the hot paths (a per-read gate, the hook) avoid importing
:mod:`pathlib` (ADRs 0001, 0022). The path functions are spelled exactly as :mod:`pathlib`
spells them (``tests/test_pathstr.py`` checks each against :class:`pathlib.PurePosixPath`);
then the project's state paths, whether a path is a hand-off it knows, and the host's
index of the payload paths the trace names (ADR 0018).

:func:`found_root` is the one root rule; :func:`envelope_candidates` the receiver gate's
trigger; :func:`rules_out` the exact, cheap "no" of
:func:`eidolons.gates.trigger.find_handoff` (True only when that function would certainly
answer None; every case this module cannot settle answers False, and the caller takes the
full rule).
"""

from __future__ import annotations

import os
from _json import encode_basestring_ascii

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    StrPath = str | os.PathLike[str]


def pure(path: StrPath) -> str:
    """``str(PurePosixPath(path))``: empty and ``.`` components dropped, a trailing
    slash dropped, exactly two leading slashes kept (POSIX leaves ``//`` to the system),
    ``.`` for nothing. ``..`` is kept (it is not lexical)."""
    text = os.fspath(path)
    if (  # already in that spelling (the common case): nothing to drop
        text
        and "//" not in text
        and "/./" not in text
        and text[-1] != "/"
        and not text.endswith("/.")
        and not text.startswith("./")
        and text != "."
    ):
        return text
    if text[:1] == "/":
        root = "//" if text[:2] == "//" and text[:3] != "///" else "/"
    else:
        root = ""
    kept = []  # a loop, not a generator: one profiler call per path, not per component
    for part in text.split("/"):
        if part and part != ".":
            kept.append(part)
    body = "/".join(kept)
    return root + body if root or body else "."


def join(*parts: StrPath) -> str:
    """``str(PurePosixPath(*parts))``: a later absolute part replaces what precedes it."""
    return pure(os.path.join(*parts) if parts else "")


def name(path: StrPath) -> str:
    """``PurePosixPath(path).name`` (empty for a root or ``.``)."""
    text = pure(path)
    return "" if text in ("/", "//", ".") else text.rpartition("/")[2]


def stem(path: StrPath) -> str:
    """``PurePosixPath(path).stem``: the name without its suffix (a last dot that is
    neither the name's first nor its last character)."""
    base = name(path)
    dot = base.rfind(".")
    return base[:dot] if 0 < dot < len(base) - 1 else base


def parent(path: StrPath) -> str:
    """``str(PurePosixPath(path).parent)``."""
    text = pure(path)
    root = "//" if text[:2] == "//" else text[:1] if text[:1] == "/" else ""
    rest = text[len(root) :]
    if "/" not in rest:
        return root or "."
    return root + rest.rpartition("/")[0]


def parts(path: StrPath) -> tuple[str, ...]:
    """``PurePosixPath(path).parts``: the root (``/`` or ``//``) if any, then each
    component."""
    text = pure(path)
    root = "//" if text[:2] == "//" else text[:1] if text[:1] == "/" else ""
    rest = text[len(root) :]
    comps = tuple(rest.split("/")) if rest and rest != "." else ()  # pure() dropped the rest
    return (root, *comps) if root else comps


#: how many times a path is resolved again when a link changed while it was resolved
REALPATH_TRIES = 40


def realpath(path: StrPath) -> str:
    """``os.path.realpath(path)``, which before Python 3.13 raises ``OSError`` when a link
    it found by ``lstat`` is swapped (for a file, a directory, or nothing) before its
    ``readlink`` (CPython gh-97566): the path is then resolved again, as it is now. Every
    resolution of a path an agent can change goes through here; a resolution that a
    swapper keeps losing :data:`REALPATH_TRIES` times raises the last ``OSError``."""
    for _ in range(REALPATH_TRIES - 1):
        try:
            return os.path.realpath(path)
        except OSError:
            continue
    return os.path.realpath(path)


def is_relative_to(path: str, base: str) -> bool:
    """:meth:`pathlib.PurePosixPath.is_relative_to` for absolute, normalised paths (as
    :func:`os.path.abspath` and :func:`os.path.realpath` give them)."""
    # POSIX keeps exactly two leading slashes (``//x``) as a root of their own
    anchor = "//" if path[:2] == "//" and path[:3] != "///" else "/"
    if anchor != ("//" if base[:2] == "//" and base[:3] != "///" else "/"):
        return False
    rest, base_rest = path[len(anchor) :], base[len(anchor) :]
    return not base_rest or rest == base_rest or rest.startswith(base_rest + "/")


def relative_to(path: str, base: str) -> str:
    """``str(PurePosixPath(path).relative_to(base))`` for absolute, normalised paths with
    :func:`is_relative_to` true."""
    path, base = pure(path), pure(base)
    if path == base:
        return "."
    if base in ("/", "//"):
        return path[len(base) :]
    return path[len(base) + 1 :]


# --------------------------------------------------------------------------- project

# The project's state paths, each spelled once (ADR 0001): this module is on every path
# that needs one (the early SKIP, the hook, the gates, the stores), and imports only os.
ENVELOPE_SUFFIX = ".envelope.json"  # as eidolons.io.payload (importing it costs pathlib)
STATE_DIR = ".eidolons"
HANDOFF_DIR = os.path.join(STATE_DIR, "handoffs")
CONFIG_FILE = os.path.join(STATE_DIR, "config.toml")
STORE_FILE = os.path.join(STATE_DIR, "trace-store.json")
TRACE_DIR = os.path.join(STATE_DIR, ".trace")
#: what ``eidolons init`` writes there: the state no search may walk into (the hook's
#: searches read it back)
IGNORE_FILE = os.path.join(STATE_DIR, ".ignore")
IGNORE_LINES = ("handoffs/", "keys/", "memory/", "verified/")
#: git's ignore file for the same directories: a project checked in as a whole (``git add
#: -A``) stores no hand-off, key or memory in ``.git``, which every shell can read
GITIGNORE_FILE = os.path.join(STATE_DIR, ".gitignore")
#: the gate's copies of the bytes it verified, which a host's Read is pointed at (ADR 0015)
COPIES_DIR = os.path.join(STATE_DIR, "verified")
#: written by ``eidolons init`` for a host: every hand-off lives in a hand-off directory
SEALED_FILE = os.path.join(STATE_DIR, "sealed")
#: extra hand-off directories (``os.pathsep``-separated; :func:`eidolons.io.config.handoff_dirs`)
HANDOFF_DIRS_ENV = "EIDOLONS_HANDOFF_DIRS"
#: a PostgreSQL trace store (:func:`eidolons.trace.store.open_store`)
TRACE_DSN_ENV = "EIDOLONS_TRACE_DSN"
#: the environment that changes what :func:`eidolons.gates.trigger.find_handoff` reads
ENV_DOUBTS = (HANDOFF_DIRS_ENV, TRACE_DSN_ENV, "EIDOLONS_MAX_TRACE_SCAN_BYTES")

_S_IFMT = 0o170000
_S_IFDIR = 0o040000
_S_IFREG = 0o100000


def marked_root(cwd: str) -> str | None:
    """The nearest ancestor of ``cwd`` (resolved, itself included) holding a ``.eidolons``
    directory or a ``.git`` entry; None when there is none."""
    probe = realpath(cwd)
    while True:
        if os.path.isdir(os.path.join(probe, STATE_DIR)) or os.path.exists(
            os.path.join(probe, ".git")
        ):
            return probe
        parent = os.path.dirname(probe)
        if parent == probe:
            return None
        probe = parent


def found_root(explicit: str | os.PathLike[str] | None, cwd: str | None = None) -> str | None:
    """The project root, resolved, by the one rule: ``explicit`` (``--root``), else
    ``EIDOLONS_ROOT``, else the nearest marked ancestor of ``cwd`` (default: the current
    directory; :func:`marked_root`). None when none of them names it (the caller falls
    back, or takes the full path). A named root that is not a directory raises
    :class:`~eidolons.errors.UsageError`; a current directory that is gone, OSError."""
    given = explicit or os.environ.get("EIDOLONS_ROOT")
    if given:
        if not os.path.isdir(given):
            from eidolons.errors import UsageError

            if explicit:
                raise UsageError(f"--root {pure(explicit)!r} is not a directory")
            raise UsageError(f"EIDOLONS_ROOT={given!r} is not a directory")
        return pure(realpath(given))
    found = marked_root(os.getcwd() if cwd is None else cwd)
    return None if found is None else pure(found)


def envelope_candidates(path: str) -> tuple[str, str]:
    """``(${PATH%.*}.envelope.json, PATH.envelope.json)`` beside ``path``, where ``%.*``
    removes the suffix as :attr:`pathlib.PurePath.suffix` defines it (a last dot that is
    neither the name's first nor its last character). Equal when ``path`` has no suffix."""
    head, name = os.path.split(path)
    dot = name.rfind(".")
    stem = name[:dot] if 0 < dot < len(name) - 1 else name
    return os.path.join(head, stem + ENVELOPE_SUFFIX), path + ENVELOPE_SUFFIX


def lies_under(path: str, directory: str) -> bool:
    """Whether any spelling of ``path`` (:func:`spellings`) lies
    under ``directory`` as written (absolute) or resolved."""
    bases = dict.fromkeys([os.path.abspath(directory), realpath(directory)])
    return any(is_relative_to(p, base) for base in bases for p in spellings(path))


def _kind(path: str) -> int | None:
    """The file type of ``path`` itself (a link is a link), 0 when it does not exist, None
    when it cannot be told (any other error)."""
    try:
        return os.lstat(path).st_mode & _S_IFMT
    except FileNotFoundError:
        return 0
    except OSError:
        return None


def trace_states(root: str, bound: int | None) -> list[tuple[str, int, int, int, int]] | None:
    """``(name, dev, ino, size, ctime_ns)`` of each ``*.jsonl`` of the trace directory
    (``lstat``), or None when the full payload search would refuse to read them (a
    directory that is not a real one or cannot be listed, a file that is not regular, past
    ``bound``): what the payload index must cover exactly to say "not named"."""
    trace_dir = os.path.join(root, TRACE_DIR)
    for directory in (os.path.join(root, STATE_DIR), trace_dir):
        kind = _kind(directory)
        if kind == 0:
            return []
        if kind != _S_IFDIR:
            return None
    states = []
    total = 0
    try:
        with os.scandir(trace_dir) as entries:
            for item in entries:
                name = item.name
                if not name.endswith(".jsonl"):
                    continue
                st = item.stat(follow_symlinks=False)
                if st.st_mode & _S_IFMT != _S_IFREG:
                    return None
                total += st.st_size
                if bound is not None and total > bound:
                    return None
                states.append((name, st.st_dev, st.st_ino, st.st_size, st.st_ctime_ns))
    except OSError:
        return None
    return states


def foreign_projects(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> list[str]:
    """The projects other than ``root`` that hold ``path``: every ancestor of its resolved
    directory with a ``.eidolons/`` directory, but the (resolved) root, nearest first. A
    hand-off is judged by the project that holds it, with that project's rules, trust
    store and trace: pointing the gates at another root must not judge it under rules of
    one's own."""
    real_root = realpath(root)
    here = realpath(os.path.dirname(os.path.abspath(path)))
    found = []
    while True:  # here, then each parent (as Path.parents walks them)
        if here != real_root and os.path.isdir(os.path.join(here, STATE_DIR)):
            found.append(here)
        parent = os.path.dirname(here)
        if parent == here:
            return found
        here = parent


def rules_out(path: str, root: str) -> bool:
    """True only when :func:`eidolons.gates.trigger.find_handoff` ``(path, root)`` would
    certainly answer None (ADR 0022): no configured hand-off directory, ``path`` under
    ``.eidolons/handoffs/`` in no spelling, the JSONL store, and the host's payload index
    covering every trace file and not naming ``path``; a project holding ``path``
    (:func:`foreign_projects`) must rule it out too. ``root`` is resolved. False: cannot
    tell."""

    if any(os.environ.get(name) for name in ENV_DOUBTS):
        return False
    return all(_rules_out_in(path, r) for r in (root, *foreign_projects(path, root)))


def _rules_out_in(path: str, root: str) -> bool:
    """:func:`rules_out` by the rules of the one project ``root``."""
    from eidolons.ecl.grammar import DEFAULT_MAX_TRACE_SCAN_BYTES

    state = _kind(os.path.join(root, STATE_DIR))
    if state not in (0, _S_IFDIR):  # a link or a file: the stores refuse to read through it
        return False
    if _kind(os.path.join(root, CONFIG_FILE)) != 0 or _kind(os.path.join(root, STORE_FILE)) != 0:
        return False
    if lies_under(path, os.path.join(root, HANDOFF_DIR)):
        return False
    # the host's payload index, covering every trace file within the full search's bound
    # (no state directory: no trace, but the index may still name the path, ADR 0018)
    index = payload_index(root, DEFAULT_MAX_TRACE_SCAN_BYTES)
    return index is not None and not names(index, path, root)


def payload_index(root: str, bound: int | None = None) -> bytes | None:
    """The host's payload index of the project at ``root`` (resolved) when it can say "not
    named": its entries (:func:`covered_entries`), ``b""`` for
    neither index nor trace; None (cannot tell) with a PostgreSQL store, trace files the full
    search would not read within ``bound``, or an index that does not cover them."""
    if os.environ.get(TRACE_DSN_ENV) or _kind(os.path.join(root, STORE_FILE)) != 0:
        return None
    states = trace_states(root, bound)
    if states is None:
        return None
    return covered_entries(root, states)


def config_dir(env: dict[str, str] | None = None) -> str:
    """This host's own directory of the tool: ``${XDG_CONFIG_HOME:-~/.config}/eidolons``
    (the keys, the trust-store pins, the trace heads and indexes live there); a relative
    ``XDG_CONFIG_HOME`` is ignored, as the XDG spec says."""
    environ = os.environ if env is None else env
    base = environ.get("XDG_CONFIG_HOME", "")
    if not os.path.isabs(base):  # unset, empty or relative: the XDG spec ignores it (a
        # relative one would put the host's keys, heads and indexes in the project)
        base = os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "eidolons")


# --------------------------------------------------------------------------- payload index

# The index of payload paths the trace names, held on the host (ADR 0018): its entries
# are evidence in the refusing direction (never removed); it says "not named" only for
# the trace files it covers exactly (device, inode, size, ctime), else "cannot tell".
# Written in place by :mod:`eidolons.trace.indexes`; readers take no lock. Format::
#
#     eidolons-payload-index v3 <gen> <length>        (padded to 64 bytes)
#     root <dev> <ino>
#     entries
#     "<payload_path>"                                                    (one per path)
#     covers
#     trace <dev> <ino> <size> <ctime_ns> <clean> <tail-sha256> <"name">   (one per file)
#
# A writer writes the header with an odd generation, the body, then the next even one; a
# reader takes the body only between two equal even headers (:func:`snapshot`). Entries
# come first, old ones first, so a writer that stops half-way leaves them whole
# (:func:`recovered_entries`). ADRs 0012, 0022.

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
    parent = os.path.join(realpath(os.path.dirname(lexical)), os.path.basename(lexical))
    return list(dict.fromkeys([lexical, parent, realpath(lexical)]))


def payload_keys(path: str, root: str) -> list[str]:
    """The keys a path may be named by (``payload_path``): relative to the resolved root,
    for the path as written, with its directory resolved, and fully resolved; a spelling
    outside the root as it is, absolute (:func:`eidolons.io.config.payload_key` names a
    payload outside the project so, ADR 0018). The one rule;
    :func:`eidolons.gates.trigger.find_handoff` calls it."""
    real_root = realpath(root)
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
    return os.path.join(config_dir(), INDEX_DIR, f"{st.st_dev:x}-{st.st_ino:x}.idx")


def index_path(root: str) -> str:
    """The index file of the project at ``root`` (raises :class:`OSError` when the root
    cannot be stat'ed)."""
    return index_file(os.stat(root))


class PayloadIndex:
    """A parsed index file: ``cover`` maps each covered trace file's encoded name to its
    fields (dev, ino, size, ctime_ns, clean, tail-sha256); ``entries`` is the entry block
    preceded by a newline (what :func:`names` searches)."""

    __slots__ = ("cover", "entries", "raw")

    def __init__(self, cover: dict[bytes, list[bytes]], entries: bytes, raw: bytes) -> None:
        self.cover = cover
        self.entries = entries
        self.raw = raw


def load_index(root_st: os.stat_result) -> PayloadIndex | None:
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
    return None if found is None else parse_index(found[1], root_st)


def parse_index(body: bytes, root_st: os.stat_result) -> PayloadIndex | None:
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
    return PayloadIndex(cover, body[len(first) - 1 : entries_end + 1], body)


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
    trace file of ``states`` (:func:`trace_states`, the files on
    disk now), ``b""`` when there is neither an index nor a trace (nothing is named),
    or None: cannot tell (no index while traces exist, an index that is not one, or
    that does not cover a trace file as it is now). The caller
    (:func:`payload_index`) settles the store first."""
    try:
        index = load_index(os.stat(root))
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
    """Whether an index file exists for ``root`` (that :func:`load_index` refused): then it
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
