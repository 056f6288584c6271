"""What this host keeps in its own directory, beside the keys: the private key files and
the projects each orchestrator key signs for (ADR 0011), and the trace heads (ADR 0012).
No cryptography.

A key lives in ``${XDG_CONFIG_HOME:-~/.config}/eidolons/keys/<keyid>.pem`` (0600, directory
0700), or the role's ``EIDOLONS_SIGNING_KEY_FILE`` / ``EIDOLONS_SENDER_KEY_FILE``. A key file
is refused (:class:`KeyFileError`) unless it is a regular file of this user with no group or
other permission, outside the project tree.

A key signs only for a project its operator registered (``keys init``, ``keys register``,
``keys rotate``: :func:`register`, the one rule) at exactly this root's real path, recorded
in the host's ``projects.json`` (mode 0600). :func:`signing_refusal` is the gate's one
check before it signs; a registry that cannot be read fails closed.

Each trace append records the thread's ``seq`` and line hash in ``heads/``
(:func:`record`); ``trace verify`` reports a trace shorter than its head, or other bytes
at that ``seq``, as a break, and a trace with no head as unanchored (:func:`check_head`).
"""

from __future__ import annotations

import os
import stat

from eidolons.ecl.integrity import sha256_hex
from eidolons.errors import EidolonsError
from eidolons.io import paths as pathstr
from eidolons.io.paths import config_dir, realpath

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path
    from typing import Any

    from eidolons.io.paths import StrPath
    from eidolons.keys.store import TrustStore

SIGNING_KEY_ENV = "EIDOLONS_SIGNING_KEY_FILE"
SENDER_KEY_ENV = "EIDOLONS_SENDER_KEY_FILE"


class KeyFileError(EidolonsError):
    """A private key file that must not be used (unsafe mode, owner or location)."""

    code = "KEY_FILE"
    exit_code = 3  # a key that must not be used: refused


#: what names this host's key material: the config directory and the key files
HOST_VARIABLES = ("XDG_CONFIG_HOME", "EIDOLONS_KEY_DIR", SIGNING_KEY_ENV, SENDER_KEY_ENV)


class ScratchHost:
    """``with ScratchHost(directory):`` this process is, for the block, a host whose
    config directory (:func:`config_dir`: keys, pins, project registrations, trace heads,
    indexes) is ``directory`` and whose environment names no key file. ``eidolons demo``
    runs in one, so it never reads or writes the user's keys, whatever a copied
    ``trust.json`` lists. The variables are restored on the way out."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.saved: dict[str, str | None] = {}

    def __enter__(self) -> ScratchHost:
        self.saved = {name: os.environ.get(name) for name in HOST_VARIABLES}
        for name in HOST_VARIABLES:
            os.environ.pop(name, None)
        os.environ["XDG_CONFIG_HOME"] = os.path.abspath(self.directory)
        return self

    def __exit__(self, *exc: object) -> None:
        for name, value in self.saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def key_dir(env: dict[str, str] | None = None) -> Path:
    from pathlib import Path

    return Path(config_dir(env)) / "keys"


def env_key_file(role: str) -> Path | None:
    """The key file named by the environment for this role, if any."""
    name = SIGNING_KEY_ENV if role == "orchestrator" else SENDER_KEY_ENV
    raw = os.environ.get(name)
    if not raw:
        return None
    from pathlib import Path

    return Path(raw)


def default_key_file(keyid: str) -> Path:
    from pathlib import Path

    return Path(key_file(keyid))


def key_file(keyid: str) -> str:
    """Where the key ``keyid`` lives by default: ``<key_dir>/<keyid>.pem``."""
    return pathstr.join(config_dir(), "keys", f"{keyid}.pem")


def inside(path: StrPath, root: StrPath) -> bool:
    real = pathstr.pure(realpath(path))
    return pathstr.is_relative_to(real, pathstr.pure(realpath(root)))


def check_location(path: StrPath, root: StrPath) -> None:
    """Refuse a key path inside the project tree (checked before creating a key, too)."""
    if inside(path, root) or inside(pathstr.parent(path), root):
        raise KeyFileError(
            f"refusing key file {path}: it lies inside the project {root}, where any agent "
            "can read it (keep keys under ~/.config/eidolons/keys or set "
            f"{SIGNING_KEY_ENV} to a file outside the project)"
        )


def read_key_file(path: StrPath, root: StrPath) -> bytes:
    """The bytes of a private key file that passes every rule above."""
    check_location(path, root)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise KeyFileError(f"cannot read key file {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise KeyFileError(f"refusing key file {path}: not a regular file")
        if st.st_mode & 0o077:
            raise KeyFileError(
                f"refusing key file {path}: mode {stat.S_IMODE(st.st_mode):04o} lets group or "
                f"others read it (chmod 600 {path})"
            )
        if st.st_uid != os.geteuid():
            raise KeyFileError(f"refusing key file {path}: owned by another user")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(64 * 1024)
    finally:
        os.close(fd)


def write_key_file(path: Path, data: bytes, root: Path) -> None:
    """Create a new key file, mode 0600, in a 0700 directory; never overwrite one."""
    check_location(path, root)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        raise KeyFileError(f"key file {path} already exists") from None
    except OSError as exc:
        raise KeyFileError(f"cannot create key file {path}: {exc.strerror or exc}") from None
    try:
        os.fchmod(fd, 0o600)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def read_host_json(path: str, error: type[Exception], what: str) -> object:
    """The JSON document in the host's file ``path`` (pins, registrations), None when
    there is none; one that cannot be read or parsed raises ``error`` (fail closed)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror}") from None
    from eidolons.ecl.grammar import loads

    try:
        return loads(raw)
    except ValueError:
        raise error(f"{what} {path} are not JSON") from None


def write_host_json(path: str, doc: object) -> None:
    """Write the host's JSON file ``path`` (pins, registrations) atomically, mode 0600 in
    a 0700 directory."""
    import json

    from eidolons.io.files import atomic_write

    os.makedirs(pathstr.parent(path), mode=0o700, exist_ok=True)
    body = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    atomic_write(path, body.encode("utf-8"), 0o600)


# --------------------------------------------------------------------------- projects

REGISTRY_FILE = "projects.json"
REGISTER = "run `eidolons keys register` here, as the operator"


class RegistryError(EidolonsError):
    """This host's project registrations exist but cannot be read: fail closed."""

    code = "REGISTRY"


def registry_path() -> str:
    return pathstr.join(config_dir(), REGISTRY_FILE)


def read_registry() -> dict[str, dict[str, Any]]:
    """keyid -> project id -> ``{root, registered}``; ``{}`` when there is no file."""
    path = registry_path()
    doc = read_host_json(path, RegistryError, "the project registrations")
    if doc is None:
        return {}
    keys = doc.get("keys") if isinstance(doc, dict) and doc.get("version") == 1 else None
    if not isinstance(keys, dict) or not all(isinstance(v, dict) for v in keys.values()):
        raise RegistryError(f"{path} is not a registry of projects (version 1, keys)")
    return keys


def registered_root(keyid: str, project: str) -> str | None:
    """The real root this host registered ``project`` at for ``keyid``, if any."""
    entry = read_registry().get(keyid, {}).get(project)
    if entry is None:
        return None
    root = entry.get("root") if isinstance(entry, dict) else None
    if not isinstance(root, str):
        raise RegistryError(f"the registration of {project} in {registry_path()} is malformed")
    return root


def register(
    keyid: str, project: str, root: StrPath, now: str, *, move: bool = True
) -> dict[str, Any]:
    """The one registration rule: register ``project`` at ``root``'s real path for
    ``keyid``. A registration at another path is moved with ``move`` (``keys register``,
    ``keys rotate``), else kept (``keys init``: ``registered`` False and a ``note``).
    Returns ``{registered, root, moved_from, registry[, note]}``."""
    here, before, path = realpath(root), registered_root(keyid, project), registry_path()
    doc: dict[str, Any] = {"registered": True, "root": here, "moved_from": None, "registry": path}
    if before not in (None, here):
        if not move:
            note = (
                f"this project ({project}) is registered for key {keyid[:16]} at {before}; "
                f"if it moved here, {REGISTER}"
            )
            return {**doc, "registered": False, "note": note}
        doc["moved_from"] = before
    elif before == here and not move:
        return doc
    keys = dict(read_registry())
    keys[keyid] = {**keys.get(keyid, {}), project: {"root": here, "registered": now}}
    write_host_json(path, {"version": 1, "keys": keys})
    return doc


def signing_refusal(store: TrustStore, keyid: str, root: StrPath) -> str | None:
    """Why orchestrator key ``keyid`` must not sign for the project at ``root`` (one line
    naming the command that fixes it), or None when it may."""
    from eidolons.keys.store import UPGRADE

    project = store.project
    if project is None:
        return f"the trust store {store.path} names no project (an older store): {UPGRADE}"
    key = store.get(keyid)
    if key is None or store.project_refusal(key, project) is not None:
        return (
            f"the trust store does not pin orchestrator key {keyid[:16]} for this project "
            f"({project}), so receivers would refuse its receipts (`eidolons keys add "
            "PUBLIC_KEY --role orchestrator` pins it, as the operator)"
        )
    try:
        where = registered_root(keyid, project)
    except RegistryError as exc:
        return f"the project registrations cannot be read: {exc}"
    here = realpath(root)
    if where is None:
        return (
            f"this project ({project}) is not registered for orchestrator key {keyid[:16]} "
            f"on this host, which signs only for registered roots: {REGISTER}"
        )
    if where != here:
        return (
            f"this project ({project}) is not registered here ({here}) for orchestrator key "
            f"{keyid[:16]} but at {where}: a moved or copied project signs only once "
            f"registered: {REGISTER}"
        )
    return None


def root_refusal(root: StrPath, now: str) -> str | None:
    """Why the orchestrator key this host holds for the project at ``root`` would not
    sign there (``eidolons doctor``); None when it would, when the project has no usable
    trust store (reported on its own), or when this host holds no key of it (a
    receiver's host)."""
    from eidolons.keys.receipts import NoSigner, find_signer
    from eidolons.keys.store import ORCHESTRATOR, load_trust_store

    try:
        store = load_trust_store(root)
        if store is None:
            return None
        signer = find_signer(store, ORCHESTRATOR, root, now)
    except (NoSigner, EidolonsError):
        return None
    return signing_refusal(store, signer.keyid, root)


# --------------------------------------------------------------------------- trace heads

HEADS_DIR = "heads"


class HeadError(Exception):
    """A head file that exists but cannot be read or is malformed (fails closed)."""


def heads_dir() -> str:
    return pathstr.join(config_dir(), HEADS_DIR)


def _trace_key(trace: StrPath) -> str:
    return realpath(trace)


def _head_file(trace: StrPath, key: str | None = None) -> str:
    name = (key if key is not None else _trace_key(trace)).encode("utf-8", "surrogateescape")
    return pathstr.join(heads_dir(), f"{sha256_hex(name)}.head")


def head_path(trace: StrPath, key: str | None = None) -> Path:
    """Where this host keeps the head of ``trace``."""
    from pathlib import Path

    return Path(_head_file(trace, key))


SLOT = 128  # bytes per slot; two slots, the head at seq n is written in slot n % 2


def _slot(key: str, seq: int, sha256: str) -> bytes:
    check = sha256_hex(f"{key}\n{seq}\n{sha256}".encode("utf-8", "surrogateescape"))
    return f"{seq:020d} {sha256} {check[:32]}\n".encode().ljust(SLOT, b" ")


def record(trace: StrPath, seq: int, sha256: str, prev: str) -> bool:
    """Record ``(seq, sha256)`` as the head of ``trace`` on this host (under the trace's
    append lock): two checksummed slots, slot ``seq % 2`` overwritten by one ``pwrite``, so
    a torn write leaves the previous head valid (ADR 0012). The head moves only from the
    line this append follows, or when there is none: a tail cut or rewritten before keeps
    the old head (returns False). Raises ``OSError``."""
    key = _trace_key(trace)
    path = _head_file(trace, key)
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except FileNotFoundError:  # the first head on this host
        os.makedirs(pathstr.parent(path), mode=0o700, exist_ok=True)
        fd = os.open(path, flags, 0o600)
    try:
        old = _best(key, os.pread(fd, 2 * SLOT, 0))
        if old is not None and old != (seq - 1, prev):
            return False
        os.pwrite(fd, _slot(key, seq, sha256), (seq % 2) * SLOT)
        if os.environ.get("EIDOLONS_TRACE_FSYNC") == "1":
            os.fsync(fd)
    finally:
        os.close(fd)
    return True


def _best(key: str, raw: bytes) -> tuple[int, str] | None:
    """The valid slot with the higher ``seq``; None when neither slot is valid."""
    best: tuple[int, str] | None = None
    for at in (0, SLOT):
        fields = raw[at : at + SLOT].split()
        if len(fields) != 3 or not fields[0].isdigit():
            continue
        seq, sha = int(fields[0]), fields[1].decode("ascii", "replace")
        if seq >= 1 and _slot(key, seq, sha) == raw[at : at + SLOT]:
            best = (seq, sha) if best is None or seq > best[0] else best
    return best


def recorded(trace: StrPath) -> tuple[int, str] | None:
    """The head this host recorded for ``trace`` (the valid slot with the higher
    ``seq``), None when there is none; raises :class:`HeadError` for a head file that is
    unreadable or holds no valid slot."""
    key = _trace_key(trace)
    path = head_path(trace, key)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise HeadError(f"cannot read the trace head {path}: {exc.strerror}") from None
    best = _best(key, raw)
    if best is None:
        raise HeadError(f"the trace head {path} is malformed")
    return best


def check_head(lines: Sequence[bytes], head: tuple[int, str] | None) -> dict[str, Any]:
    """Pure: the trace's non-blank lines against the head recorded on this host.
    ``state``: ``anchored`` (the line at the head's ``seq`` is the recorded one; ``after``
    lines were appended after it without a head, e.g. by another tool), ``none`` (no
    head on this host), ``cut`` or ``rewritten`` (both a break, ``reason`` says which)."""
    from eidolons.ecl.events import line_hash

    if head is None:
        return {"state": "none", "ok": True, "reason": "no head anchor on this host"}
    seq, sha = head
    out: dict[str, Any] = {"seq": seq, "sha256": sha}
    if len(lines) < seq:
        return {
            **out,
            "state": "cut",
            "ok": False,
            "reason": f"tail cut or rewritten after seq {len(lines)}: this host recorded "
            f"the head at seq {seq}",
        }
    if line_hash(lines[seq - 1]) != sha:
        return {
            **out,
            "state": "rewritten",
            "ok": False,
            "reason": f"tail cut or rewritten: the line at seq {seq} is not the head this "
            "host recorded",
        }
    after = len(lines) - seq
    return {**out, "state": "anchored", "ok": True, "after": after}
