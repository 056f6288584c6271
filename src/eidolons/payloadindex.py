"""The index of payload paths the trace names: a hint for the hook's fast path.

``<root>/.eidolons/payloads.idx`` holds a header line, then one line per payload path an
``emit`` or verification event names (``payload_path``, project-relative, as
:func:`eidolons.config.payload_key` spells it), JSON-string encoded. It is append-only
and written by the gates under the trace's append lock, before the trace line (a crash
between the two leaves an extra entry, never a missing one). When the index is first
created it is filled from the traces already on disk; the header is written only after
that succeeded, so an index without its header is "cannot tell".

The hook (ADR 0049) and the early SKIP of ``verify-incoming`` (ADR 0084) use it both
ways: a path in the index goes to the full receiver gate, which decides; a path missing
from an index with its header is taken as named by no trace, and is not a hand-off (so a
writer of ``.eidolons/`` who truncates the index hides entries, as ADR 0049 says). An
index that is missing while traces exist, or cannot be read, or is past
:data:`MAX_INDEX_BYTES`, cannot tell: the caller falls back to the full rule
(:func:`eidolons.config.find_handoff`). This module imports only ``os``
and ``_json`` (the hook's fast path reads it).
"""

from __future__ import annotations

import os
from _json import encode_basestring_ascii

INDEX_PARTS = (".eidolons", "payloads.idx")
HEADER = b"eidolons-payload-index v1\n"
MAX_INDEX_BYTES = 8 * 1024 * 1024
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

TRACE_PARTS = (".eidolons", ".trace")
STORE_FILE_PARTS = (".eidolons", "trace-store.json")
DSN_ENV = "EIDOLONS_TRACE_DSN"


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
    for the path as written, with its directory resolved, and fully resolved (the one
    rule; :func:`eidolons.config.find_handoff` calls it)."""
    real_root = os.path.realpath(root)
    prefix = real_root if real_root.endswith(os.sep) else real_root + os.sep
    keys = []
    for p in spellings(path):
        if p == real_root:
            keys.append(".")
        elif p.startswith(prefix):
            keys.append(p[len(prefix) :])
    return list(dict.fromkeys(keys))


def _traces_exist(root: str) -> bool:
    if os.environ.get(DSN_ENV) or os.path.lexists(os.path.join(root, *STORE_FILE_PARTS)):
        return True
    try:
        names = os.listdir(os.path.join(root, *TRACE_PARTS))
    except FileNotFoundError:
        return False
    except OSError:
        return True  # cannot list: cannot rule out
    return any(n.endswith(".jsonl") for n in names)


def read_index(root: str) -> bytes | None:
    """The index's bytes after the header (each entry preceded by a newline), ``b""``
    when there is no index and no trace (nothing is named), or None: cannot tell."""
    path = os.path.join(root, *INDEX_PARTS)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None if _traces_exist(root) else b""
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_mode & 0o170000 != 0o100000 or st.st_size > MAX_INDEX_BYTES:
            return None
        data = os.read(fd, st.st_size + 1)  # not an 8 MiB buffer for a small index
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > MAX_INDEX_BYTES or not data.startswith(HEADER):
        return None
    return b"\n" + data[len(HEADER) :]


def names(index: bytes, path: str, root: str) -> bool:
    """Whether ``index`` (from :func:`read_index`) names ``path``."""
    return any(b"\n" + entry(k) in index for k in payload_keys(path, root))


def record(root: str, key: str, known: Callable[[], list[str] | None]) -> None:
    """Add ``key`` to the index; the first time, create it filled with ``known()`` (every
    payload path the traces on disk name; None when they cannot be read, and then the
    index stays headerless: "cannot tell").
    Raises :class:`OSError` or :class:`eidolons.beneath.BeneathError`; the caller fails
    the trace append (no trace line without its index entry)."""
    import fcntl

    from eidolons.beneath import open_state_path

    fd = open_state_path(root, INDEX_PARTS, os.O_RDWR | os.O_APPEND | os.O_NONBLOCK, create=True)
    try:
        if os.fstat(fd).st_mode & 0o170000 != 0o100000:
            raise OSError(f"{os.path.join(*INDEX_PARTS)} is not a regular file")
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            out = b""
            if os.fstat(fd).st_size == 0:
                paths = known()
                if paths is not None:  # else headerless: readers fall back to the full rule
                    out = HEADER + b"".join(entry(k) for k in paths)
            out += entry(key)
            view = memoryview(out)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
