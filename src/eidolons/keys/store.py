"""The trust store: ``<root>/.eidolons/trust.json`` (ADR 0011), public keys only.

Only keys listed count, for their role (``orchestrator`` signs receipts, ``sender:<eidolon>``
that eidolon's envelopes), from ``created`` until ``not_after`` or ``revoked``. Parsed
strictly: a store that does not parse is :class:`TrustStoreError` and every gate fails
closed. An orchestrator key counts only for the ``projects`` pinned for it
(:meth:`TrustStore.project_refusal`, the one rule). Saved atomically.

Host pins (ADR 0011): deleting or rewriting ``trust.json`` must not downgrade a signed
project. Every change by ``eidolons keys`` (or ``keys pin``) records the store's SHA-256 in
the host's ``pins.json``; with a pin, a missing store or one of other bytes is refused, and
so is a pins file that cannot be read.
"""

from __future__ import annotations

import binascii
import os

from eidolons.ecl.grammar import is_project_id, is_trust_edge, is_trust_role, is_utc_timestamp
from eidolons.errors import EidolonsError
from eidolons.io import paths as pathstr
from eidolons.io.files import atomic_write
from eidolons.io.paths import config_dir, realpath
from eidolons.keys.host import read_host_json, write_host_json

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path
    from typing import Any

    from eidolons.io.paths import StrPath

TRUST_FILE = os.path.join(".eidolons", "trust.json")
ALGORITHM = "ed25519"
ORCHESTRATOR = "orchestrator"
SENDER_PREFIX = "sender:"
VERSION = 2  # the store names its project and pins projects per orchestrator key
OLDER_VERSION = 1  # before projects: read, refused as evidence until `keys init` upgrades it
MAX_TRUST_BYTES = 1024 * 1024
_KEY_FIELDS = {"keyid", "algorithm", "public_key", "role", "created", "not_after", "revoked"}
_OPTIONAL_FIELDS = {"revoked_reason", "comment"}
PROJECTS = "projects"  # on orchestrator keys of a version-2 store
UPGRADE = "run `eidolons keys init` to upgrade it"


class Signed:
    """A signed document checked against the trust store: ``body`` (the bytes verified),
    ``key`` (an active key that signed it, else None) and, when no signing key is active,
    ``inactive`` (a trusted key that signed it but is revoked, expired or not yet valid).
    Both None: no key of the role signed it (self-minted or forged)."""

    __slots__ = ("body", "inactive", "key")

    def __init__(self, body: bytes, key: TrustedKey | None, inactive: TrustedKey | None) -> None:
        self.body = body
        self.key = key
        self.inactive = inactive


class TrustStoreError(EidolonsError):
    """The trust store exists but cannot be read or does not parse: fail closed."""

    code = "TRUST_STORE"


def key_id(public_raw: bytes) -> str:
    """A key's id: the hex SHA-256 of its raw 32-byte public key."""
    from eidolons.ecl.integrity import sha256_hex

    return sha256_hex(public_raw)


def valid_role(role: str) -> bool:
    return is_trust_role(role)


def new_project_id() -> str:
    """A project's id: 128 random bits, made once, when its trust store is created."""
    return os.urandom(16).hex()


def valid_project(value: object) -> bool:
    return is_project_id(value)


def sender_role(eidolon: str) -> str:
    return SENDER_PREFIX + eidolon


def _ts_ok(value: object) -> bool:
    return is_utc_timestamp(value)


def ts_key(value: str) -> str:
    """Timestamps compare as strings once the fraction is padded (all are UTC ``Z``)."""
    head, _, frac = value[:-1].partition(".")
    return f"{head}.{frac.ljust(6, '0')}Z"


class TrustedKey:
    """One entry of the trust store."""

    __slots__ = (
        "created",
        "extra",
        "keyid",
        "not_after",
        "projects",
        "public_raw",
        "revoked",
        "role",
    )

    def __init__(
        self,
        public_raw: bytes,
        role: str,
        created: str,
        not_after: str | None = None,
        revoked: str | None = None,
        extra: dict[str, Any] | None = None,
        projects: Iterable[str] | None = None,
    ) -> None:
        self.public_raw = public_raw
        self.keyid = key_id(public_raw)
        self.role = role
        self.created = created
        self.not_after = not_after
        self.revoked = revoked
        self.extra = extra or {}
        # the projects whose receipts this orchestrator key vouches for (None: a sender's
        # key, or an orchestrator key of an older store, which pins none)
        self.projects = None if projects is None else list(dict.fromkeys(projects))

    def __repr__(self) -> str:
        return f"TrustedKey({self.keyid[:16]}, {self.role})"

    def status(self, now: str) -> str:
        """``active``, ``revoked``, ``expired`` or ``not-yet-valid`` at time ``now``."""
        n = ts_key(now)
        if self.revoked is not None and ts_key(self.revoked) <= n:
            return "revoked"
        if self.not_after is not None and ts_key(self.not_after) <= n:
            return "expired"
        if ts_key(self.created) > n:
            return "not-yet-valid"
        return "active"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "keyid": self.keyid,
            "algorithm": ALGORITHM,
            "public_key": b64encode(self.public_raw),
            "role": self.role,
            "created": self.created,
            "not_after": self.not_after,
            "revoked": self.revoked,
        }
        if self.projects is not None:
            out[PROJECTS] = list(self.projects)
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, raw: object, where: str, version: int = VERSION) -> TrustedKey:
        if not isinstance(raw, dict):
            raise TrustStoreError(f"{where}: not an object")
        pins = version == VERSION and raw.get("role") == ORCHESTRATOR
        if pins and PROJECTS not in raw:
            raise TrustStoreError(f"{where}: missing 'projects' (an orchestrator key)")
        unknown = set(raw) - _KEY_FIELDS - _OPTIONAL_FIELDS - ({PROJECTS} if pins else set())
        missing = _KEY_FIELDS - set(raw)
        if unknown or missing:
            raise TrustStoreError(
                f"{where}: "
                + "; ".join(
                    [
                        *(f"unknown field {k!r}" for k in sorted(unknown)),
                        *(f"missing {k!r}" for k in sorted(missing)),
                    ]
                )
            )
        if raw["algorithm"] != ALGORITHM:
            raise TrustStoreError(f"{where}: algorithm {raw['algorithm']!r} is not ed25519")
        try:
            public = _b64decode(str(raw["public_key"]))
        except ValueError:
            raise TrustStoreError(f"{where}: public_key is not base64") from None
        if len(public) != 32:
            raise TrustStoreError(f"{where}: public_key is not a 32-byte Ed25519 key")
        if raw["keyid"] != key_id(public):
            raise TrustStoreError(f"{where}: keyid does not match public_key")
        if not isinstance(raw["role"], str) or not valid_role(raw["role"]):
            raise TrustStoreError(f"{where}: role {raw['role']!r} is not orchestrator/sender:X")
        if not _ts_ok(raw["created"]):
            raise TrustStoreError(f"{where}: created is not an RFC 3339 UTC time")
        for name in ("not_after", "revoked"):
            if raw[name] is not None and not _ts_ok(raw[name]):
                raise TrustStoreError(f"{where}: {name} is not null or an RFC 3339 UTC time")
        extra = {k: raw[k] for k in _OPTIONAL_FIELDS if k in raw}
        for k, v in extra.items():
            if not isinstance(v, str):
                raise TrustStoreError(f"{where}: {k} is not a string")
        projects = raw.get(PROJECTS) if pins else None
        if pins and (
            not isinstance(projects, list)
            or not all(valid_project(p) for p in projects)
            or len(set(projects)) != len(projects)
        ):
            raise TrustStoreError(f"{where}: projects is not a list of distinct project ids")
        return cls(
            public, raw["role"], raw["created"], raw["not_after"], raw["revoked"], extra, projects
        )


class TrustStore:
    """The parsed trust store. ``path`` is where it was read from (or will be saved)."""

    __slots__ = ("keys", "path", "project", "require_sender_signature")

    def __init__(
        self,
        path: StrPath,
        keys: Iterable[TrustedKey] = (),
        require_sender_signature: Iterable[str] = (),
        project: str | None = None,
    ) -> None:
        self.path = path
        self.keys = list(keys)
        self.require_sender_signature = sorted(set(require_sender_signature))
        self.project = project  # None: an older (version-1) store, which names none

    @classmethod
    def parse(cls, data: bytes, path: StrPath) -> TrustStore:
        from eidolons.ecl.grammar import loads_strict
        from eidolons.errors import EnvelopeError

        try:
            doc = loads_strict(data)
        except EnvelopeError as exc:
            raise TrustStoreError(f"{path}: {exc}") from None
        if not isinstance(doc, dict):
            raise TrustStoreError(f"{path}: not a JSON object")
        version = doc.get("version")
        if version not in (VERSION, OLDER_VERSION) or isinstance(version, bool):
            raise TrustStoreError(f"{path}: version must be {VERSION} (or {OLDER_VERSION})")
        fields = {"version", "keys", "require_sender_signature"}
        unknown = set(doc) - fields - ({"project"} if version == VERSION else set())
        if unknown:
            raise TrustStoreError(f"{path}: unknown field(s) {', '.join(sorted(unknown))}")
        project = doc.get("project")
        if version == VERSION and not valid_project(project):
            raise TrustStoreError(f"{path}: project is not a project id (32 hex digits)")
        raw_keys = doc.get("keys", [])
        edges = doc.get("require_sender_signature", [])
        if not isinstance(raw_keys, list) or not isinstance(edges, list):
            raise TrustStoreError(f"{path}: keys and require_sender_signature must be lists")
        keys = [
            TrustedKey.from_dict(k, f"{path}: keys[{i}]", version) for i, k in enumerate(raw_keys)
        ]
        ids = [k.keyid for k in keys]
        if len(set(ids)) != len(ids):
            raise TrustStoreError(f"{path}: a key is listed twice")
        for edge in edges:
            if not is_trust_edge(edge):
                raise TrustStoreError(f"{path}: edge {edge!r} is not FROM->TO")
        return cls(path, keys, edges, project)

    def to_bytes(self) -> bytes:
        """Version 2 when the store names its project, else the older form unchanged."""
        doc: dict[str, Any] = {"version": VERSION if self.project else OLDER_VERSION}
        if self.project:
            doc["project"] = self.project
        doc.update(
            keys=[k.to_dict() for k in self.keys],
            require_sender_signature=self.require_sender_signature,
        )
        from eidolons.ecl.grammar import dumps

        return (dumps(doc, indent=2) + "\n").encode("ascii")

    def save(self, root: Path | None = None, now: str | None = None) -> None:
        """Write the store; with ``root``, pin it on this host (ADR 0011): every change
        made through ``eidolons keys`` is pinned, any other change is refused."""
        data = self.to_bytes()
        if root is not None:
            from eidolons.ecl.events import utc_now

            pin(root, data, now or utc_now())
        atomic_write(self.path, data, 0o644)

    def get(self, keyid: str) -> TrustedKey | None:
        for k in self.keys:
            if k.keyid == keyid:
                return k
        return None

    def find(self, prefix: str) -> TrustedKey:
        """The one key whose id starts with ``prefix`` (at least 8 hex digits)."""
        from eidolons.errors import UsageError

        if len(prefix) < 8:
            raise UsageError(f"key id {prefix!r}: give at least 8 hex digits")
        found = [k for k in self.keys if k.keyid.startswith(prefix.lower())]
        if len(found) != 1:
            what = "no key" if not found else f"{len(found)} keys"
            raise UsageError(f"{what} in {self.path} match {prefix!r}")
        return found[0]

    def add(self, key: TrustedKey) -> None:
        from eidolons.errors import UsageError

        if self.get(key.keyid) is not None:
            raise UsageError(f"key {key.keyid[:16]} is already in {self.path}")
        self.keys.append(key)

    def active(self, role: str, now: str) -> list[TrustedKey]:
        """The keys of ``role`` that count at ``now``, newest first."""
        found = [k for k in self.keys if k.role == role and k.status(now) == "active"]
        return sorted(found, key=lambda k: ts_key(k.created), reverse=True)

    def verify_signed(self, doc: object, role: str, payload_type: str, now: str) -> Signed:
        """The one key-validity rule for signed documents (receipts, sender signatures):
        verify ``doc`` (DSSE) under this store's keys of ``role`` and keep only those
        active at ``now``. Raises :class:`eidolons.keys.receipts.DsseError` when malformed."""
        from eidolons.keys.receipts import verify_envelope

        known = {k.keyid: k.public_raw for k in self.keys if k.role == role}
        body, accepted = verify_envelope(doc, known, [payload_type])
        keys = [k for a in accepted for k in self.keys if k.keyid == a]
        live = [k for k in keys if k.status(now) == "active"]
        return Signed(body, live[0] if live else None, keys[0] if keys and not live else None)

    def upgrade(self, project: str) -> None:
        """Make an older store name ``project`` and pin it for every orchestrator key it
        lists (they were trusted for this project already); a no-op on a current one."""
        if self.project is not None:
            return
        self.project = project
        for key in self.keys:
            if key.role == ORCHESTRATOR and key.projects is None:
                key.projects = [project]

    def project_refusal(self, key: TrustedKey, project: object) -> str | None:
        """The one (key, project) rule: why a receipt that orchestrator ``key`` signed,
        naming ``project``, does not count in this store (a clause after "the receipt"),
        or None when the pair is pinned here."""
        if self.project is None:
            return (
                f"is judged against an older trust store ({self.path}), which pins no "
                f"project per orchestrator key: {UPGRADE}"
            )
        if not valid_project(project):
            return (
                "names no project (signed before receipts named their project): run "
                "`eidolons verify-envelope` again to re-sign it"
            )
        if project not in (key.projects or ()):
            return (
                f"is for project {project}, which the trust store does not pin for "
                f"orchestrator key {key.keyid[:16]} (minted in another project; the operator "
                f"pins it with `eidolons keys add PUBLIC_KEY --role orchestrator --project "
                f"{project}`)"
            )
        return None

    def has_role(self, role: str) -> bool:
        return any(k.role == role for k in self.keys)

    def requires_sender_signature(self, sender: str, receiver: str) -> bool:
        return any(
            edge in self.require_sender_signature
            for edge in (f"{sender}->{receiver}", f"{sender}->*", f"*->{receiver}", "*->*")
        )


def trust_store_path(root: StrPath) -> str:
    return pathstr.join(root, TRUST_FILE)


def load_trust_store(root: StrPath) -> TrustStore | None:
    """The project's trust store, or None when the project has none. Anything else that
    goes wrong (unreadable, not a regular file, too large, does not parse) raises
    :class:`TrustStoreError`: a broken trust store must never read as "unsigned mode"."""
    from eidolons.io.files import BeneathError, read_state_file

    path = trust_store_path(root)
    try:  # beneath the root, no link followed: a swapped .eidolons/ never redirects it
        data = read_state_file(root, TRUST_FILE, MAX_TRUST_BYTES + 1, name=path)
    except FileNotFoundError:
        problem = pin_refusal(root, None)  # a signed project is never downgraded by a delete
        if problem is not None:
            raise TrustStoreError(problem) from None
        return None
    except BeneathError as exc:
        raise TrustStoreError(str(exc)) from None
    except OSError as exc:
        raise TrustStoreError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_TRUST_BYTES:
        raise TrustStoreError(f"{path} is larger than {MAX_TRUST_BYTES} bytes")
    problem = pin_refusal(root, data)
    if problem is not None:
        raise TrustStoreError(problem)
    return TrustStore.parse(data, path)


def b64encode(raw: bytes) -> str:
    """``base64.b64encode(raw).decode("ascii")``, without importing ``base64`` (which
    imports ``re``; every signed gate writes these)."""
    return binascii.b2a_base64(raw, newline=False).decode("ascii")


def _b64decode(text: str) -> bytes:
    """``base64.b64decode(text, validate=True)`` as Python 3.11+ defines it (ASCII, then
    ``binascii.a2b_base64(..., strict_mode=True)``), without importing ``base64`` (which
    imports ``re``)."""
    try:
        data = text.encode("ascii")
    except UnicodeEncodeError:
        raise ValueError("string argument should contain only ASCII characters") from None
    return binascii.a2b_base64(data, strict_mode=True)


# --------------------------------------------------------------------------- pins

PINS_FILE = "pins.json"


def pins_path(env: dict[str, str] | None = None) -> str:
    return pathstr.join(config_dir(env), PINS_FILE)


def _project_key(root: StrPath) -> str:
    return realpath(root)


def read_pins() -> dict[str, Any]:
    """The pins, ``{}`` when there is no pins file; raises :class:`TrustStoreError` when
    it cannot be read."""
    path = pins_path()
    doc = read_host_json(path, TrustStoreError, "the trust pins")
    if doc is None:
        return {}
    projects = doc.get("projects") if isinstance(doc, dict) else None
    if not isinstance(projects, dict):
        raise TrustStoreError(f"the trust pins {path} have no projects table")
    return projects


def pinned(root: StrPath) -> str | None:
    """The pinned SHA-256 of this project's trust store on this host, if any."""
    entry = read_pins().get(_project_key(root))
    if entry is None:
        return None
    value = entry.get("trust_sha256") if isinstance(entry, dict) else None
    if not isinstance(value, str):
        raise TrustStoreError(f"the trust pin of {root} in {pins_path()} is malformed")
    return value


def pin(root: StrPath, data: bytes, now: str) -> str:
    """Record ``data`` (the trust store's exact bytes) as this project's trust store."""
    from eidolons.ecl.integrity import sha256_hex

    projects = dict(read_pins())
    projects[_project_key(root)] = {"trust_sha256": sha256_hex(data), "pinned": now}
    write_host_json(path := pins_path(), {"version": 1, "projects": projects})
    return path


def pin_refusal(root: StrPath, data: bytes | None) -> str | None:
    """Why the trust store (``data``, None when absent) is refused by this host's pin, or
    None."""
    expected = pinned(root)
    if expected is None:
        return None
    if data is None:
        return (
            f"this host pinned a trust store for {root} ({pins_path()}) and it is gone: a "
            "signed project is never downgraded to unsigned (restore it, or `eidolons keys "
            "unpin` as the operator)"
        )
    from eidolons.ecl.integrity import sha256_hex

    if sha256_hex(data) != expected:
        return (
            f"the trust store of {root} differs from the one this host pinned: changed "
            "outside `eidolons keys` (run `eidolons keys pin` as the operator to accept it)"
        )
    return None
