"""Signatures (ADR 0011): Ed25519 and DSSE, the signer a role signs with, the gate's
receipts and the senders' signatures, and what a receiver decides on. The receipt
statement itself is :mod:`eidolons.ecl.events` (pure).

``cryptography`` is imported here only, where a signature is made or checked (a test checks
other commands never load it). DSSE (protocol v1.0.0): a signature is over
``PAE(payloadType, body)`` (:func:`pae`, the one encoder; the spec's vectors are pinned in
the tests); ``keyid`` is a hint, every trusted key is tried; the body handed back is the
exact bytes verified. Rules:

- A role signs with the key file its environment names, else that of the newest active key
  of the role in the trust store (:func:`find_signer`); a key not active signs nothing.
- The orchestrator gate signs each verdict only for a project this host registered for
  its key at this root (:func:`eidolons.keys.host.signing_refusal`); the statement names
  the project. The receipt goes into the trace event and beside the envelope,
  ``<stem>.receipt.json`` (the latest verdict), written atomically.
- A receipt is trusted (:func:`trust_receipt`, the one rule) when its signature verifies
  under an orchestrator key of the trust store active *now*, it holds an eidolons
  statement, and the store pins the pair (that key, the statement's project).
- A receiver with a trust store accepts as evidence only a trusted receipt vouching for
  this envelope's exact bytes and this payload's digest
  (:func:`eidolons.ecl.events.judge_statement`): of the sidecar receipt and the receipt on
  record, among those naming these envelope bytes, the one signed latest decides.
- A sender signature, ``<stem>.envelope.sig``, is a DSSE envelope over the envelope's exact
  bytes, needed when the trust store holds a key for the sender (whatever its status) or
  requires one on the edge; none, or one by no trusted key, is UNVERIFIED; a trusted
  signature over other bytes is INTEGRITY_MISMATCH.
"""

from __future__ import annotations

import binascii
import os

from eidolons.ecl.events import (
    PAYLOAD_TYPE,
    RECEIPT_GATE,
    judge_names,
    judge_statement,
    parse_statement,
    statement,
    statement_bytes,
)
from eidolons.ecl.integrity import UNSIGNED_PASS, RefusalCode
from eidolons.errors import EidolonsError
from eidolons.io import paths as pathstr
from eidolons.io.files import atomic_write, readable_mode
from eidolons.keys.host import (
    SENDER_KEY_ENV,
    SIGNING_KEY_ENV,
    KeyFileError,
    env_key_file,
    key_file,
    read_key_file,
)
from eidolons.keys.store import ORCHESTRATOR, TrustStore, b64encode, key_id, sender_role, ts_key

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from pathlib import Path
    from typing import Any

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from eidolons.io.paths import StrPath
    from eidolons.io.payload import Sidecars

RECEIPT_SUFFIX = ".receipt.json"
MAX_RECEIPT_BYTES = 256 * 1024
UNVERIFIED = RefusalCode.UNVERIFIED  # the one enumeration of the codes (ecl.integrity)
INTEGRITY_MISMATCH = RefusalCode.INTEGRITY_MISMATCH


_ED25519: list[Any] = []  # (from_public, from_private, generate), bound on first use


def _ed25519() -> list[Any]:
    """cryptography's Ed25519 constructors, on first use: the Rust classes (ADR 0022)."""
    if not _ED25519:
        try:
            from cryptography.hazmat.bindings._rust import openssl

            ed = openssl.ed25519
            _ED25519.extend((ed.from_public_bytes, ed.from_private_bytes, ed.generate_key))
        except (ImportError, AttributeError):  # another layout of cryptography
            from cryptography.hazmat.primitives.asymmetric import ed25519

            private = ed25519.Ed25519PrivateKey
            public = ed25519.Ed25519PublicKey.from_public_bytes
            _ED25519.extend((public, private.from_private_bytes, private.generate))
    return _ED25519


def _from_public(raw: bytes) -> Any:
    return _ed25519()[0](raw)


def _from_private(seed: bytes) -> Any:
    return _ed25519()[1](seed)


class KeyFormatError(EidolonsError):
    code = "KEY_FORMAT"


class Signer:
    """A private Ed25519 key and its id."""

    __slots__ = ("_key", "keyid", "public_raw")

    def __init__(self, key: Ed25519PrivateKey) -> None:
        self._key = key
        self.public_raw = key.public_key().public_bytes_raw()  # no serialization import
        self.keyid = key_id(self.public_raw)

    def sign(self, message: bytes) -> bytes:
        return self._key.sign(message)

    @classmethod
    def generate(cls) -> Signer:
        return cls(_ed25519()[2]())

    @classmethod
    def from_pem(cls, data: bytes) -> Signer:
        seed = _pkcs8_ed25519_seed(data)
        if seed is not None:  # the one form this tool writes: no serialization import
            return cls(_from_private(seed))
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        try:
            key = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError) as exc:
            raise KeyFormatError(f"not an unencrypted PEM private key ({exc})") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise KeyFormatError("not an Ed25519 private key")
        return cls(key)

    def to_pem(self) -> bytes:
        from cryptography.hazmat.primitives import serialization

        return self._key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )


#: the DER of an unencrypted PKCS #8 Ed25519 private key (RFC 8410), before its 32-byte seed
_PKCS8_ED25519 = bytes.fromhex("302e020100300506032b657004220420")
_PEM_HEAD, _PEM_TAIL = b"-----BEGIN PRIVATE KEY-----", b"-----END PRIVATE KEY-----"


def _pkcs8_ed25519_seed(data: bytes) -> bytes | None:
    """The seed of exactly the PEM :meth:`Signer.to_pem` writes, else None: any other form
    is read by ``cryptography``'s loader (``serialization``, ~13 ms to import);
    ``tests/test_keys_fast_pem.py`` checks both give the same key."""
    lines = data.strip().split(b"\n")
    if len(lines) != 3 or lines[0] != _PEM_HEAD or lines[2] != _PEM_TAIL:
        return None
    try:
        der = binascii.a2b_base64(lines[1], strict_mode=True)
    except binascii.Error:
        return None
    if len(der) != 48 or not der.startswith(_PKCS8_ED25519):
        return None
    if binascii.b2a_base64(der, newline=False) != lines[1]:  # the canonical spelling only
        return None
    return der[16:]


def verify(public_raw: bytes, signature: bytes, message: bytes) -> bool:
    """True only if ``signature`` is a valid Ed25519 signature of ``message``."""
    try:
        _from_public(public_raw).verify(signature, message)
    except ValueError:  # not a 32-byte public key
        return False
    except Exception as exc:  # cryptography.exceptions imports typing: only on a failure
        from cryptography.exceptions import InvalidSignature

        if isinstance(exc, InvalidSignature):
            return False
        raise
    return True


def public_from_pem(data: bytes) -> bytes:
    """The raw 32 bytes of a PEM Ed25519 public key."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise KeyFormatError(f"not a PEM public key ({exc})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFormatError("not an Ed25519 public key")
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


MAX_SIGNATURES = 8  # per DSSE envelope


class DsseError(EidolonsError):
    """The DSSE envelope is malformed (not a signature failure: that is a False verdict)."""

    code = "DSSE"


def pae(payload_type: bytes, body: bytes) -> bytes:
    """The DSSE pre-authentication encoding."""
    return b"DSSEv1 %d %s %d %s" % (len(payload_type), payload_type, len(body), body)


def b64decode_any(text: str) -> bytes:
    """Standard or URL-safe base64 (DSSE: verifiers MUST accept either)."""
    if not isinstance(text, str) or not text.isascii():
        raise DsseError("base64 field is not an ASCII string")
    padded = text + "=" * (-len(text) % 4)
    alphabet = padded.translate(str.maketrans("-_", "+/"))
    try:
        import base64  # imports re: only on the reading side

        return base64.b64decode(alphabet, validate=True)
    except (binascii.Error, ValueError):
        raise DsseError("invalid base64") from None


def sign_envelope(payload_type: str, body: bytes, signer: Any) -> dict[str, Any]:
    """A DSSE envelope over ``body``, signed by ``signer`` (a :class:`Signer`)."""
    sig = signer.sign(pae(payload_type.encode("utf-8"), body))
    return {
        "payloadType": payload_type,
        "payload": b64encode(body),
        "signatures": [{"keyid": signer.keyid, "sig": b64encode(sig)}],
    }


def verify_envelope(
    doc: object, keys: Mapping[str, bytes], payload_types: Iterable[str]
) -> tuple[bytes, list[str]]:
    """Verify ``doc`` against ``keys`` (keyid -> raw public key): the body (the exact bytes
    verified) and the ids of the keys that signed it (none: no trusted signature). Raises
    :class:`DsseError` for a malformed envelope or an unsupported payload type."""
    from collections.abc import Mapping  # not on an unsigned gate's path (ADR 0022)

    if not isinstance(doc, Mapping):
        raise DsseError("a DSSE envelope must be a JSON object")
    if set(doc) - {"payloadType", "payload", "signatures"}:
        raise DsseError("unknown field in DSSE envelope")
    ptype, payload, sigs = doc.get("payloadType"), doc.get("payload"), doc.get("signatures")
    if not isinstance(ptype, str) or not isinstance(payload, str):
        raise DsseError("payloadType and payload must be strings")
    if not isinstance(sigs, list) or not 1 <= len(sigs) <= MAX_SIGNATURES:
        raise DsseError(f"signatures must be a list of 1 to {MAX_SIGNATURES}")
    signatures: list[bytes] = []
    for sig in sigs:
        if not isinstance(sig, Mapping) or set(sig) - {"keyid", "sig"} or "sig" not in sig:
            raise DsseError("a signature must be {keyid?, sig}")
        keyid = sig.get("keyid")
        if keyid is not None and not isinstance(keyid, str):
            raise DsseError("keyid must be a string")
        signatures.append(b64decode_any(sig["sig"]))
    body = b64decode_any(payload)
    message = pae(ptype.encode("utf-8"), body)
    accepted: list[str] = []
    for signature in signatures:  # the keyid hint never selects the key alone
        for keyid, public in keys.items():
            if keyid not in accepted and verify(public, signature, message):
                accepted.append(keyid)
    if accepted and ptype not in set(payload_types):
        raise DsseError(f"unsupported payloadType {ptype!r}")
    return body, accepted


# --------------------------------------------------------------------------- signers


class NoSigner(Exception):
    """No usable key for the role; ``str()`` says why (one line)."""


def load_signer_file(path: StrPath, root: StrPath) -> Signer:
    try:
        return Signer.from_pem(read_key_file(path, root))
    except KeyFormatError as exc:
        raise KeyFileError(f"key file {path}: {exc}") from None


def find_signer(store: TrustStore, role: str, root: StrPath, now: str) -> Signer:
    """The signer for ``role``, or :class:`NoSigner` (an unsafe file's KeyFileError propagates)."""
    active = store.active(role, now)
    explicit = env_key_file(role)
    if explicit is not None:
        if not os.path.lexists(explicit):
            raise NoSigner(f"the key file {explicit} does not exist")
        signer = load_signer_file(explicit, root)
        if signer.keyid not in {k.keyid for k in active}:
            raise NoSigner(
                f"the key in {explicit} ({signer.keyid[:16]}) is not an active {role} key "
                f"in {store.path}"
            )
        return signer
    if not active:
        raise NoSigner(f"{store.path} lists no active {role} key")
    for key in active:
        path = key_file(key.keyid)
        if os.path.exists(path):
            signer = load_signer_file(path, root)
            if signer.keyid == key.keyid:
                return signer
            raise KeyFileError(f"key file {path} holds key {signer.keyid[:16]}, not its name")
    variable = SIGNING_KEY_ENV if role == "orchestrator" else SENDER_KEY_ENV
    raise NoSigner(
        f"no private key for the active {role} key {active[0].keyid[:16]} is reachable "
        f"here ({key_file(active[0].keyid)} or ${variable})"
    )


# --------------------------------------------------------------------------- receipts


def receipt_path(envelope_path: StrPath) -> str:
    """``<stem>.receipt.json`` beside ``<stem>.envelope.json``."""
    from eidolons.io.payload import sidecar_path

    return sidecar_path(envelope_path, RECEIPT_SUFFIX)


def build_statement(
    result: Any, *, command: str, time: str, project: str | None = None
) -> dict[str, Any] | None:
    """The statement for one :class:`eidolons.gates.verify.VerificationResult`, signed for
    ``project``; None when there are no bytes to attest."""
    from eidolons.ecl.events import TOOL, agent_label

    env = result.envelope
    if result.digest is not None and env is not None:
        name, sha = env.artifact_path, result.digest.sha256
    elif result.envelope_sha256 is not None:
        name, sha = str(result.envelope_path), result.envelope_sha256
    else:
        return None
    predicate = {
        "project": project,
        "message_id": env.message_id if env else None,
        "thread_id": env.thread_id if env else None,
        "from": agent_label(env.sender.eidolon, env.sender.version) if env else None,
        "to": agent_label(env.recipient.eidolon, env.recipient.version) if env else None,
        "performative": env.performative if env else None,
        "integrity": {
            "method": env.integrity_method if env else None,
            "value": env.integrity_value if env else None,
        },
        "envelope_sha256": result.envelope_sha256,
        "verdict": str(result.verdict),
        "failure_code": result.failure_code,
        "gate": RECEIPT_GATE,
        "command": command,
        "time": time,
        "verifier": TOOL,
    }
    return statement(subject_name=name, subject_sha256=sha, predicate=predicate)


def sign_statement(doc: dict[str, Any], signer: Any) -> dict[str, Any]:

    return sign_envelope(PAYLOAD_TYPE, statement_bytes(doc), signer)


def write_receipt(envelope_path: StrPath, receipt: dict[str, Any]) -> str:
    from eidolons.ecl.grammar import dumps

    path = receipt_path(envelope_path)
    data = (dumps(receipt, indent=2) + "\n").encode("ascii")
    atomic_write(path, data, readable_mode())
    return path


def signed_without_trust_store(
    envelope_path: StrPath | Sidecars, record: dict[str, Any] | None
) -> str | None:
    """Why a hand-off with a receipt (sidecar or on record) is not judged unsigned in a
    project with no trust store (a deleted ``trust.json`` is a downgrade); else None."""
    from eidolons.io.payload import Sidecars

    sidecars = Sidecars.of(envelope_path)
    beside = sidecars.exists(RECEIPT_SUFFIX)
    if beside or (record is not None and record.get("receipt") is not None):
        where = pathstr.name(sidecars.path(RECEIPT_SUFFIX)) if beside else "the verdict on record"
        return (
            f"{where} is a signed receipt but the project has no trust store "
            "(.eidolons/trust.json): a signed hand-off is never judged unsigned"
        )
    return None


class Judged:
    """One receipt judged: ``problem`` is None when it vouches for this hand-off."""

    __slots__ = ("keyid", "names_envelope", "problem", "source", "subject_sha256", "time")

    def __init__(
        self,
        source: str,
        problem: tuple[str, str] | None,
        keyid: str | None = None,
        time: str | None = None,
        names_envelope: bool = False,
    ) -> None:
        self.source = source
        self.problem = problem
        self.keyid = keyid
        self.time = time
        self.names_envelope = names_envelope  # trusted, and for these exact envelope bytes
        self.subject_sha256: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "keyid": self.keyid,
            "time": self.time,
            "ok": self.problem is None,
            "code": self.problem[0] if self.problem else None,
            "reason": self.problem[1] if self.problem else None,
        }


class Trusted:
    """A receipt under :func:`trust_receipt`: ``statement`` (of the bytes signed) and
    ``keyid`` when trusted; else ``why``, a clause after "the receipt"."""

    __slots__ = ("keyid", "statement", "why")

    def __init__(
        self, statement: dict[str, Any] | None, keyid: str | None, why: str | None
    ) -> None:
        self.statement = statement
        self.keyid = keyid
        self.why = why


def trust_receipt(doc: Any, store: TrustStore, now: str) -> Trusted:
    """The one rule for whether a receipt counts in this trust store at ``now``
    (:meth:`TrustStore.verify_signed`, :meth:`TrustStore.project_refusal`); what it vouches
    for is the caller's to judge."""

    try:
        signed = store.verify_signed(doc, ORCHESTRATOR, PAYLOAD_TYPE, now)
    except DsseError as exc:
        return Trusted(None, None, f"is malformed: {exc}")
    if signed.key is None and signed.inactive is None:
        why = "is not signed by any orchestrator key in the trust store (self-minted or forged)"
        return Trusted(None, None, why)
    if signed.key is None:
        key = signed.inactive
        assert key is not None
        status = key.status(now)
        when = key.revoked if status == "revoked" else key.not_after
        why = f"is signed by orchestrator key {key.keyid[:16]}, {status}"
        return Trusted(None, key.keyid, why + (f" since {when}" if when else ""))
    doc_stmt = parse_statement(signed.body)
    if doc_stmt is None:
        return Trusted(None, signed.key.keyid, "holds no eidolons statement")
    refusal = store.project_refusal(signed.key, doc_stmt["predicate"].get("project"))
    if refusal is not None:
        return Trusted(None, signed.key.keyid, refusal)
    return Trusted(doc_stmt, signed.key.keyid, None)


def judge_receipt(
    doc: Any,
    source: str,
    store: TrustStore,
    now: str,
    *,
    message_id: str | None,
    envelope_sha256: str,
    payload_sha256: str | None,
    trusted: Trusted | None = None,
) -> Judged:
    """Trust one receipt (unless ``trusted`` is given) and judge its statement."""
    trusted = trusted if trusted is not None else trust_receipt(doc, store, now)
    doc_stmt = trusted.statement
    if doc_stmt is None:
        why = f"the {source} receipt {trusted.why}"
        return Judged(source, (UNVERIFIED, why), trusted.keyid)
    pred = doc_stmt["predicate"]
    time = pred.get("time")
    problem = judge_statement(
        doc_stmt,
        message_id=message_id,
        envelope_sha256=envelope_sha256,
        payload_sha256=payload_sha256,
    )
    names = judge_names(pred, message_id=message_id, envelope_sha256=envelope_sha256) is None
    when = time if isinstance(time, str) else None
    judged = Judged(source, problem, trusted.keyid, when, names)
    judged.subject_sha256 = doc_stmt["subject"][0]["digest"]["sha256"]
    return judged


def decide(judged: list[Judged]) -> tuple[Judged | None, tuple[str, str] | None]:
    """(the receipt that decides, None) or (None, the refusal): the latest signed of the
    trusted receipts for these envelope bytes; failing that, a trusted receipt for other
    bytes (INTEGRITY_MISMATCH) tells more than an untrusted one (UNVERIFIED)."""
    relevant = [j for j in judged if j.names_envelope]
    if relevant:
        latest = max(relevant, key=lambda j: ts_key(j.time) if j.time else "")
        return (latest, None) if latest.problem is None else (None, latest.problem)
    problems = [j.problem for j in judged if j.problem is not None]
    if not problems:
        return None, (UNVERIFIED, "no signed receipt for this hand-off (sidecar or trace)")
    problems.sort(key=lambda p: 0 if p[0] == INTEGRITY_MISMATCH else 1)
    return None, problems[0]


class SigningState:
    """What the orchestrator gate can sign with: ``store`` and ``problem`` None, unsigned
    mode; ``signer`` None with a ``problem``, a store it cannot produce evidence for (block
    mode exits 3); ``refusal``, a key that must not sign for this root: no pass is
    recorded (ADR 0011)."""

    __slots__ = ("problem", "refusal", "signer", "store")

    def __init__(
        self,
        store: TrustStore | None,
        signer: Any = None,
        problem: str | None = None,
        refusal: str | None = None,
    ):
        self.store = store
        self.signer = signer
        self.problem = problem
        self.refusal = refusal

    @property
    def unsigned_mode(self) -> bool:
        return self.store is None and self.problem is None


def signing_state(root: StrPath, now: str) -> SigningState:
    """The trust store and, only if there is one, the orchestrator's signer, which signs
    only for a project registered for it at this root (:mod:`eidolons.keys.host`)."""
    from eidolons.errors import EidolonsError
    from eidolons.keys.store import TrustStoreError, load_trust_store

    try:
        store = load_trust_store(root)
    except TrustStoreError as exc:
        return SigningState(None, None, f"trust store unusable: {exc}")
    if store is None:
        return SigningState(None)
    from eidolons.keys.host import signing_refusal

    try:
        signer = find_signer(store, ORCHESTRATOR, root, now)
    except NoSigner as exc:
        return SigningState(store, None, str(exc))
    except EidolonsError as exc:  # an unsafe or unreadable key file: never signed with
        return SigningState(store, None, str(exc))
    refusal = signing_refusal(store, signer.keyid, root)
    if refusal is not None:
        return SigningState(store, None, None, refusal)
    return SigningState(store, signer)


def receiver_evidence(
    envelope_path: StrPath | Sidecars,
    record: dict[str, Any] | None,
    store: TrustStore,
    now: str,
    *,
    message_id: str | None,
    envelope_sha256: str,
) -> tuple[Judged | None, tuple[str, str] | None, list[Judged]]:
    """Judge the sidecar receipt and the trace record's receipt; then :func:`decide`."""
    judged: list[Judged] = []
    from eidolons.io.payload import Sidecars

    sidecars = Sidecars.of(envelope_path)
    sidecar, problem = None, None
    if sidecars.exists(RECEIPT_SUFFIX):
        sidecar, problem = sidecars.read(RECEIPT_SUFFIX, MAX_RECEIPT_BYTES, "receipt")
    if problem is not None:
        judged.append(Judged("sidecar", (UNVERIFIED, problem)))
    kw: dict[str, Any] = {"message_id": message_id, "envelope_sha256": envelope_sha256}
    trusted = None
    if sidecar is not None:
        trusted = trust_receipt(sidecar, store, now)
        judged.append(
            judge_receipt(
                sidecar, "sidecar", store, now, payload_sha256=None, trusted=trusted, **kw
            )
        )
    if record is not None and record.get("receipt") is not None:
        doc = record["receipt"]
        same = trusted if sidecar is not None and doc == sidecar else None  # verified once
        judged.append(
            judge_receipt(doc, "trace", store, now, payload_sha256=None, trusted=same, **kw)
        )
    elif record is not None and not judged:
        why = UNSIGNED_PASS.format(envelope=sidecars.envelope_path)  # escaped where printed
        judged.append(Judged("trace", (UNVERIFIED, why)))
    chosen, refusal = decide(judged)
    return chosen, refusal, judged


# --------------------------------------------------------------------------- sender signatures


SIGNATURE_PAYLOAD_TYPE = "application/vnd.eidolons.ecl-envelope+json"
SIG_SUFFIX = ".envelope.sig"
MAX_SIG_BYTES = 64 * 1024


def signature_path(envelope_path: StrPath) -> str:
    """``<stem>.envelope.sig`` beside ``<stem>.envelope.json``."""
    from eidolons.io.payload import sidecar_path

    return sidecar_path(envelope_path, SIG_SUFFIX)


def sender_signature_required(trust: TrustStore | None, sender: str, receiver: str) -> bool:
    """Whether the hand-off ``sender -> receiver`` needs a sender signature."""
    if trust is None:
        return False
    return trust.has_role(sender_role(sender)) or trust.requires_sender_signature(sender, receiver)


def sign_bytes(data: bytes, signer: Any) -> bytes:
    """The ``.envelope.sig`` file's bytes for envelope bytes ``data``."""
    import json

    doc = sign_envelope(SIGNATURE_PAYLOAD_TYPE, data, signer)
    return (json.dumps(doc, indent=2, ensure_ascii=True) + "\n").encode("ascii")


def sender_signer(trust: TrustStore | None, sender: str, root: Path, now: str) -> Any:
    """The sender's signer for ``emit --sign`` (:func:`find_signer`, or the key file alone
    without a trust store). Raises ``UsageError`` (no key) or ``KeyFileError``."""
    from eidolons.errors import UsageError

    role = sender_role(sender)
    explicit = env_key_file(role)
    if trust is None:
        if explicit is None:
            raise UsageError(
                "--sign needs a sender key: a trust store listing sender:"
                f"{sender} (eidolons keys init --role {role}) or $EIDOLONS_SENDER_KEY_FILE"
            )
        return load_signer_file(explicit, root)
    try:
        return find_signer(trust, role, root, now)
    except NoSigner as exc:
        raise UsageError(f"--sign: {exc}") from None


def check_sender_signature(
    envelope_path: StrPath | Sidecars,
    envelope_sha256: str,
    sender: str,
    trust: TrustStore,
    now: str,
) -> tuple[str, str] | None:
    """None when an active key of ``sender`` signed exactly these bytes; else (code, why)."""

    from eidolons.io.payload import Sidecars

    sidecars = Sidecars.of(envelope_path)
    if not sidecars.exists(SIG_SUFFIX):
        name = pathstr.name(sidecars.path(SIG_SUFFIX))
        return UNVERIFIED, f"no sender signature ({name}) where {sender}'s is required"
    doc, unreadable = sidecars.read(SIG_SUFFIX, MAX_SIG_BYTES, "sender signature")
    if unreadable is not None:
        return UNVERIFIED, unreadable
    role = sender_role(sender)
    try:
        signed = trust.verify_signed(doc, role, SIGNATURE_PAYLOAD_TYPE, now)
    except DsseError as exc:
        return UNVERIFIED, f"sender signature malformed: {exc}"
    if signed.key is None and signed.inactive is None:
        return UNVERIFIED, f"the envelope is not signed by any {role} key of the trust store"
    if signed.key is None:
        key = signed.inactive
        assert key is not None
        status = key.status(now)
        return UNVERIFIED, f"the sender signature is by {role} key {key.keyid[:16]}, {status}"
    body = signed.body
    from eidolons.ecl.integrity import sha256_hex

    if sha256_hex(body) != envelope_sha256:
        return INTEGRITY_MISMATCH, (
            f"{sender}'s signature is for other envelope bytes (rewritten and re-emitted)"
        )
    return None
