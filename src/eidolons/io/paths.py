"""Paths as ``str``, ``os`` only: the hot paths (a per-read gate, the hook) avoid importing
:mod:`pathlib` (ADRs 0001, 0022). The path functions are spelled exactly as :mod:`pathlib`
spells them (``tests/test_pathstr.py`` checks each against :class:`pathlib.PurePosixPath`);
then the project's state paths and whether a path is a hand-off it knows.

:func:`found_root` is the one root rule; :func:`envelope_candidates` the receiver gate's
trigger; :func:`rules_out` the exact, cheap "no" of
:func:`eidolons.gates.trigger.find_handoff` (True only when that function would certainly
answer None; every case this module cannot settle answers False, and the caller takes the
full rule).
"""

from __future__ import annotations

import os

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
    probe = os.path.realpath(cwd)
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
        return pure(os.path.realpath(given))
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
    """Whether any spelling of ``path`` (:func:`eidolons.io.payloadindex.spellings`) lies
    under ``directory`` as written (absolute) or resolved."""
    from eidolons.io.payloadindex import spellings

    bases = dict.fromkeys([os.path.abspath(directory), os.path.realpath(directory)])
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
    real_root = os.path.realpath(root)
    here = os.path.realpath(os.path.dirname(os.path.abspath(path)))
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
    from eidolons.io.payloadindex import names

    index = payload_index(root, DEFAULT_MAX_TRACE_SCAN_BYTES)
    return index is not None and not names(index, path, root)


def payload_index(root: str, bound: int | None = None) -> bytes | None:
    """The host's payload index of the project at ``root`` (resolved) when it can say "not
    named": its entries (:func:`eidolons.io.payloadindex.covered_entries`), ``b""`` for
    neither index nor trace; None (cannot tell) with a PostgreSQL store, trace files the full
    search would not read within ``bound``, or an index that does not cover them."""
    if os.environ.get(TRACE_DSN_ENV) or _kind(os.path.join(root, STORE_FILE)) != 0:
        return None
    states = trace_states(root, bound)
    if states is None:
        return None
    from eidolons.io.payloadindex import covered_entries

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
