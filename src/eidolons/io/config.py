"""The configuration the environment and the project give the gates, in one place.

Every limit the gates enforce lives in :class:`Limits` and is passed explicitly; the
defaults are documented in the README. Environment variables read here:

- ``EIDOLONS_ROOT``: the project root (else the nearest ancestor with ``.eidolons/`` or
  ``.git/``, else the current directory).
- ``EIDOLONS_ECL_VERIFY_MODE``: ``block`` (default) or ``warn`` (an explicit opt-in).
  Anything else is a usage error, never a silent fallback.
- ``EIDOLONS_MAX_PAYLOAD_BYTES`` / ``EIDOLONS_MAX_ENVELOPE_BYTES``: override the caps.
- ``EIDOLONS_MAX_TRACE_SCAN_BYTES``, ``EIDOLONS_TRACE_TIMEOUT_S``: the bounds on reading
  and waiting for the trace.
- ``ECL_HMAC_KEY``: the HMAC key, used as raw UTF-8 bytes (as ``openssl -hmac``).

The state paths are spelled in :mod:`eidolons.io.paths` (ADR 0001), which the hot paths
import without this module.
"""

from __future__ import annotations

import os

from eidolons.ecl.grammar import DEFAULT_MAX_TRACE_SCAN_BYTES, MAX_PAYLOAD_CAP, Limits, _int_env
from eidolons.errors import UsageError
from eidolons.io import paths as pathstr
from eidolons.io.paths import (
    CONFIG_FILE,
    HANDOFF_DIR,
    HANDOFF_DIRS_ENV,
    SEALED_FILE,
    TRACE_DIR,
    TRACE_DSN_ENV,
    config_dir,
    found_root,
    realpath,
)

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from eidolons.io.paths import StrPath

__all__ = ["CONFIG_FILE", "HANDOFF_DIR", "TRACE_DIR", "Limits"]  # re-exported


def find_root(
    explicit: str | os.PathLike[str] | None = None,
    cwd: Path | None = None,
    *,
    notes: list[str] | None = None,
) -> Path:
    """:func:`root_dir` as a :class:`~pathlib.Path`."""
    from pathlib import Path

    return Path(root_dir(explicit, cwd, notes=notes))


def root_dir(
    explicit: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    *,
    notes: list[str] | None = None,
) -> str:
    """The project root, resolved: ``--root``, else ``EIDOLONS_ROOT``, else the nearest
    ancestor of the current directory holding ``.eidolons/`` or ``.git/``, else the
    current directory. Falling back to the current directory is added to ``notes`` (the
    gates, which write the trace, say it: two gates run from two directories would
    otherwise use two traces)."""
    found = found_root(explicit, None if cwd is None else os.fspath(cwd))  # the one rule
    if found is not None:
        return found
    here = pathstr.pure(realpath(os.getcwd() if cwd is None else cwd))
    if notes is not None:
        notes.append(
            f"note: no .eidolons/ or .git/ above {here}; using it as the project root (set --root "
            "or EIDOLONS_ROOT, or create .eidolons/)"
        )
    return here


HMAC_KEY_FILE = "hmac.key"


def hmac_key(env: Mapping[str, str] | None = None) -> bytes | None:
    """``ECL_HMAC_KEY`` as raw bytes; else the host's key file ``hmac.key`` in the signing
    keys' directory (``~/.config/eidolons/``, where no agent reads: one trailing newline
    dropped), so that a hook or an MCP server reads an HMAC hop with a key kept in no
    agent's environment; None when neither is there."""
    env = os.environ if env is None else env
    raw = env.get("ECL_HMAC_KEY")
    if raw:
        # fsencode gives back the exact bytes of the environment (surrogateescape)
        return os.fsencode(raw)
    path = os.path.join(config_dir(dict(env)), HMAC_KEY_FILE)
    try:
        with open(path, "rb") as fh:
            data = fh.read(64 * 1024)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:  # there but unreadable: never judged as if there were no key
        raise UsageError(f"the HMAC key {path} cannot be read: {exc.strerror}") from None
    data = data[:-1] if data.endswith(b"\n") else data
    return data or None


MIN_HMAC_KEY_BYTES = 32


def hmac_key_warning(key: bytes | None) -> str | None:
    """A warning for an HMAC key shorter than ECL section 6.4's 32 random bytes."""
    if key is None or len(key) >= MIN_HMAC_KEY_BYTES:
        return None
    from eidolons._text import plural

    return (
        f"warning: ECL_HMAC_KEY is {plural(len(key), 'byte')}; ECL 6.4 asks for at least "
        f"{MIN_HMAC_KEY_BYTES} random bytes (a short key can be guessed)"
    )


VERIFY_MODES = ("warn", "block")


def verify_mode(
    explicit: str | None,
    env: Mapping[str, str] | None = None,
    *,
    block: bool = False,
    flag: str = "--block",
) -> str:
    """The verify mode: block with the ``block`` flag (``flag``: its name; ``--mode`` may
    only agree), else ``--mode`` if given, else ``EIDOLONS_ECL_VERIFY_MODE``, else block.

    Block is the default of every gate (the seeds' posture change); warn is an opt-in."""
    if block:
        if explicit not in (None, "block"):
            raise UsageError(f"{flag} contradicts --mode {explicit}")
        return "block"
    if explicit is not None:
        if explicit not in VERIFY_MODES:
            raise UsageError(f"--mode must be warn or block, got {explicit!r}")
        return explicit
    env = os.environ if env is None else env
    raw = env.get("EIDOLONS_ECL_VERIFY_MODE")
    if not raw:  # unset or empty (as ${VAR:-block}); any other value must be valid
        return "block"
    if raw not in VERIFY_MODES:
        raise UsageError(f"EIDOLONS_ECL_VERIFY_MODE must be warn or block, got {raw!r}")
    return raw


# --------------------------------------------------------------------------- hand-offs


def handoff_dirs(root: StrPath, env: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """Every hand-off directory of the project: ``<root>/.eidolons/handoffs`` first and
    always, then ``[handoffs] dirs`` of ``<root>/.eidolons/config.toml``, then the
    ``os.pathsep``-separated ``EIDOLONS_HANDOFF_DIRS``. Relative entries are relative to
    the root. Configuration can only add directories, never remove the default: any
    project file can be written by an agent, so no project setting may loosen a gate.
    A configuration file that cannot be read or parsed is a :class:`UsageError`."""
    from pathlib import Path

    env = os.environ if env is None else env
    root = Path(root)
    dirs = [root / HANDOFF_DIR]
    for raw in [
        *_configured_handoff_dirs(root),
        *(env.get(HANDOFF_DIRS_ENV) or "").split(os.pathsep),
    ]:
        if raw.strip():
            dirs.append(root / raw)  # an absolute entry replaces root (Path semantics)
    return tuple(dict.fromkeys(dirs))


def sealed_handoff_dirs(root: StrPath) -> tuple[str, ...] | None:
    """The hand-off directories (resolved) of a sealed project, else None. A project is
    sealed when ``eidolons init`` wired it to a host that hides those directories from the
    agents' shells (``.eidolons/sealed``, ADR 0015): a hand-off is then received only
    from there, and ``emit`` places it there."""
    if not os.path.lexists(os.path.join(os.fspath(root), SEALED_FILE)):
        return None
    # the directories init wired into the host's sandbox: the default and the configured
    # ones, never the environment's (EIDOLONS_HANDOFF_DIRS adds protection elsewhere, but a
    # directory no sandbox hides must not count as sealed)
    return tuple(realpath(d) for d in handoff_dirs(root, env={}))


def outside_sealed(path: StrPath, root: StrPath) -> str | None:
    """Why ``path`` may not be received in this project (it lies outside every sealed
    hand-off directory), or None."""
    sealed = sealed_handoff_dirs(root)
    if sealed is None or in_sealed(path, sealed):
        return None
    return (
        f"{path} lies outside the sealed hand-off directories ({HANDOFF_DIR}/ and those "
        "configured): in a project wired to a host a hand-off is received only from there, "
        "where no agent's shell can change it; emit it again (emit places it there)"
    )


def in_sealed(path: StrPath, sealed: tuple[str, ...]) -> bool:
    """Whether ``path`` resolves into one of the ``sealed`` directories
    (:func:`sealed_handoff_dirs`)."""
    real = realpath(path)
    return any(pathstr.is_relative_to(real, d) for d in sealed)


#: the largest ``config.toml`` read (a few lines of TOML; a larger one is refused unread)
MAX_CONFIG_BYTES = 64 * 1024


def _configured_handoff_dirs(root: Path) -> list[str]:
    """``[handoffs] dirs`` of the configuration: a regular file, not a link, never
    blocked on (a FIFO), at most :data:`MAX_CONFIG_BYTES` read."""
    from eidolons.io.files import read_regular

    path = root / CONFIG_FILE
    try:
        data = read_regular(path, MAX_CONFIG_BYTES)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise UsageError(f"{path} is larger than {MAX_CONFIG_BYTES} bytes")
    import tomllib

    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    section = doc.get("handoffs", {})
    dirs = section.get("dirs", []) if isinstance(section, dict) else None
    if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
        raise UsageError(f"{path}: [handoffs] dirs must be a list of strings")
    return dirs


def payload_key(path: StrPath, root: StrPath) -> str | None:
    """How events name a payload (``payload_path``): its path relative to the resolved
    root, with its directory resolved, POSIX separators; outside the root, that path
    absolute (a hand-off outside the project, its envelope deleted, must stay known:
    ADR 0018). Never None for a path that has a name."""
    lexical = os.path.abspath(path)
    full = pathstr.join(realpath(pathstr.parent(lexical)), pathstr.name(lexical))
    real_root = pathstr.pure(realpath(root))
    if not pathstr.is_relative_to(full, real_root):
        return full
    return pathstr.relative_to(full, real_root)


#: Environment variables a gate's secrets live in: never handed to COMMAND (ADR 0009).
SECRET_ENV = (
    "ECL_HMAC_KEY",
    TRACE_DSN_ENV,
    "EIDOLONS_MEMORY_URL",
    "EIDOLONS_KEY_DIR",
    "EIDOLONS_SENDER_KEY_FILE",
    "EIDOLONS_SIGNING_KEY_FILE",
)


def is_secret_env(name: str) -> bool:
    """Whether ``name`` holds (or points at) one of this tool's secrets: the HMAC key and
    its rotated spellings (``ECL_HMAC_KEY_*``), key files and directories, the trace
    store's DSN (credentials), the memory server's URL, and any ``EIDOLONS_``/``ECL_``
    variable whose name says KEY, SECRET, TOKEN, PASSWORD or DSN."""
    if name in SECRET_ENV or name.startswith("ECL_HMAC_KEY"):
        return True
    if name.startswith(("EIDOLONS_", "ECL_")):
        return any(word in name for word in ("KEY", "SECRET", "TOKEN", "PASSWORD", "DSN"))
    return False


# --------------------------------------------------------------------------- the trace

TRACE_TIMEOUT_ENV = "EIDOLONS_TRACE_TIMEOUT_S"
DEFAULT_TRACE_TIMEOUT_S = 5.0  # well inside the hook's own 10-second budget
MAX_TRACE_TIMEOUT_S = 3600.0


def trace_scan_bound(env: Mapping[str, str] | None = None) -> int:
    """The most bytes one search of the trace reads (``EIDOLONS_MAX_TRACE_SCAN_BYTES``,
    default 256 MiB): a gate's backward scan for a record, the search of every thread
    for a payload, or a reader of one whole thread. A trace made huge (a sparse hole of a
    terabyte) then costs a bounded read, and past the bound the search fails with a reason
    (fail closed)."""
    env = os.environ if env is None else env
    return _int_env(
        env, "EIDOLONS_MAX_TRACE_SCAN_BYTES", DEFAULT_MAX_TRACE_SCAN_BYTES, MAX_PAYLOAD_CAP
    )


def trace_timeout_s(env: Mapping[str, str] | None = None) -> float:
    """``EIDOLONS_TRACE_TIMEOUT_S`` (default 5): the longest a gate waits for the trace,
    whichever the store: for a file lock (the JSONL trace's append lock, this host's
    payload index, the memory store's creation lock: :func:`eidolons.io.files.flock_until`), and for
    PostgreSQL's connection, locks and statements. Past it the operation fails (closed).
    Raises :class:`UsageError` for a value that is not a number of seconds in
    (0, 3600]."""
    env = os.environ if env is None else env
    raw = env.get(TRACE_TIMEOUT_ENV) or ""
    if not raw:
        return DEFAULT_TRACE_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= MAX_TRACE_TIMEOUT_S:  # NaN fails this too
        raise UsageError(f"{TRACE_TIMEOUT_ENV}={raw!r} must be a number of seconds in (0, 3600]")
    return value
