"""Signed gate receipts and sender signatures: signing a verdict or an envelope, and
deciding on what a receiver finds (ADR 0011). The receipt statement itself is
:mod:`eidolons.ecl.events` (pure).

Rules:

- The orchestrator gate signs each verdict with the newest active orchestrator key it can
  reach (:func:`eidolons.keys.crypto.find_signer`), and only for a project this host
  registered for that key at this root (:func:`eidolons.keys.host.signing_refusal`); the
  statement names the project. The receipt goes into the trace event (``receipt``) and
  beside the envelope, ``<stem>.receipt.json`` (the latest verdict), written atomically.
- A receipt is trusted (:func:`trust_receipt`, the one rule the receiver gate, the
  orchestrator's read hook and the trace views apply) when its DSSE signature verifies
  under an orchestrator key of the trust store that is active *now* (not revoked, not
  expired), it holds an eidolons statement, and the trust store pins the pair (that key,
  the statement's project).
- A receiver with a trust store accepts as integrity evidence only a trusted receipt
  whose statement vouches for this envelope's exact bytes and this payload's digest
  (:func:`eidolons.ecl.events.judge_statement`). It looks at the
  sidecar receipt and at the receipt of the latest orchestrator event for the message in
  the trace; among the receipts that verify and name these envelope bytes, the one signed
  latest decides. Nothing else is evidence: an unsigned line, a receipt signed by any other
  key, a receipt for other bytes.
- A sender signature, ``<stem>.envelope.sig``, is a DSSE envelope whose body is the
  envelope's exact bytes. It is needed when the trust store holds a key for the sender
  (whatever its status) or requires one on the edge; none, or one by no trusted key, is
  UNVERIFIED; a trusted signature over other bytes is INTEGRITY_MISMATCH.
"""

from __future__ import annotations

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
from eidolons.ecl.integrity import RefusalCode
from eidolons.io import paths as pathstr
from eidolons.io.files import atomic_write, readable_mode
from eidolons.keys.store import ORCHESTRATOR, TrustStore, sender_role, ts_key

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from eidolons.io.paths import StrPath

RECEIPT_SUFFIX = ".receipt.json"
MAX_RECEIPT_BYTES = 256 * 1024
UNVERIFIED = RefusalCode.UNVERIFIED  # the one enumeration of the codes (ecl.integrity)
INTEGRITY_MISMATCH = RefusalCode.INTEGRITY_MISMATCH


def receipt_path(envelope_path: StrPath) -> str:
    """``<stem>.receipt.json`` beside ``<stem>.envelope.json``."""
    from eidolons.io.payload import sidecar_path

    return sidecar_path(envelope_path, RECEIPT_SUFFIX)


def build_statement(
    result: Any, *, command: str, time: str, project: str | None = None
) -> dict[str, Any] | None:
    """The statement for one :class:`eidolons.gates.verify.VerificationResult`, signed for
    ``project``; None when there are no bytes to attest (an envelope that could not even
    be read)."""
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
    from eidolons.keys.crypto import sign_envelope

    return sign_envelope(PAYLOAD_TYPE, statement_bytes(doc), signer)


def write_receipt(envelope_path: StrPath, receipt: dict[str, Any]) -> str:
    from eidolons.ecl.grammar import dumps

    path = receipt_path(envelope_path)
    data = (dumps(receipt, indent=2) + "\n").encode("ascii")
    atomic_write(path, data, readable_mode())
    return path


def signed_without_trust_store(envelope_path: StrPath, record: dict[str, Any] | None) -> str | None:
    """Why a hand-off that carries signed evidence is not judged unsigned in a project
    with no trust store: its sidecar receipt or its record's receipt says the project was
    signed, so a missing ``.eidolons/trust.json`` is a deleted one (a downgrade), never
    "unsigned mode". None when nothing signed is in sight."""
    sidecar = receipt_path(envelope_path)
    if os.path.lexists(sidecar) or (record is not None and record.get("receipt") is not None):
        where = pathstr.name(sidecar) if os.path.lexists(sidecar) else "the verdict on record"
        return (
            f"{where} is a signed receipt but the project has no trust store "
            "(.eidolons/trust.json): a signed hand-off is never judged unsigned"
        )
    return None


def read_receipt(envelope_path: StrPath) -> tuple[Any, str | None]:
    """(document, None), (None, None) when there is no sidecar receipt, or (None, why)."""
    path = receipt_path(envelope_path)
    if not os.path.lexists(path):
        return None, None
    return _read_sidecar(path, MAX_RECEIPT_BYTES, "receipt")


def _read_sidecar(path: str, limit: int, what: str) -> tuple[Any, str | None]:
    """The JSON document in the sidecar ``path`` (read beneath its directory, strictly):
    (document, None), or (None, why) when it cannot be read or parsed."""
    from eidolons.ecl.grammar import loads_strict
    from eidolons.errors import EnvelopeError, InputError
    from eidolons.io.payload import read_envelope_bytes

    try:
        return loads_strict(read_envelope_bytes(path, limit)), None
    except (InputError, EnvelopeError) as exc:
        return None, f"{what} {pathstr.name(path)} unreadable: {exc}"


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
    """One receipt under :func:`trust_receipt`: ``statement`` (parsed from the exact bytes
    the signature covered) and ``keyid`` when it is trusted; else ``why``, a clause after
    "the receipt" (and ``keyid`` when a trusted key signed it)."""

    __slots__ = ("keyid", "statement", "why")

    def __init__(
        self, statement: dict[str, Any] | None, keyid: str | None, why: str | None
    ) -> None:
        self.statement = statement
        self.keyid = keyid
        self.why = why


def trust_receipt(doc: Any, store: TrustStore, now: str) -> Trusted:
    """The one rule for whether a receipt counts in this trust store at ``now``: signed
    by an orchestrator key of the store that is active now (the key-validity rule,
    :meth:`TrustStore.verify_signed`), holding an eidolons statement, for a project the
    store pins for that key (:meth:`TrustStore.project_refusal`). What it vouches for
    (these bytes, a pass) is the caller's to judge."""
    from eidolons.keys.crypto import DsseError

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
    """Trust one receipt (:func:`trust_receipt`, unless ``trusted`` is its result for
    this very document) and judge its statement."""
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
    """(the receipt that decides, None) or (None, the refusal). Among the trusted receipts
    for these exact envelope bytes the one signed latest decides (a signed fail, or a
    receipt for other payload bytes, refuses); failing that, a trusted receipt for other
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
    """What the orchestrator gate can sign with in this project.

    ``store`` None and ``problem`` None: no trust store (unsigned mode). ``signer`` None
    with a ``problem``: a trust store the gate cannot produce evidence for (no reachable
    key, an unsafe key file, a broken store): say so, and block mode exits 3. ``refusal``:
    the key is here but must not sign for this root (a project not registered for it at
    this path, an older store): the gate records no pass at all (ADR 0011)."""

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
    """Load the trust store and, only if there is one, the orchestrator's signer (the
    ``cryptography`` import happens here, never in unsigned mode), which signs only for a
    project registered for it at this root (:mod:`eidolons.keys.host`)."""
    from eidolons.errors import EidolonsError
    from eidolons.keys.store import TrustStoreError, load_trust_store

    try:
        store = load_trust_store(root)
    except TrustStoreError as exc:
        return SigningState(None, None, f"trust store unusable: {exc}")
    if store is None:
        return SigningState(None)
    from eidolons.keys.crypto import NoSigner, find_signer
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
    envelope_path: StrPath,
    record: dict[str, Any] | None,
    store: TrustStore,
    now: str,
    *,
    message_id: str | None,
    envelope_sha256: str,
) -> tuple[Judged | None, tuple[str, str] | None, list[Judged]]:
    """Judge the sidecar receipt and the trace record's receipt; then :func:`decide`."""
    judged: list[Judged] = []
    sidecar, problem = read_receipt(envelope_path)
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
        why = "the verify_pass on record is unsigned (hand-written, or minted without the key)"
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

    from eidolons.keys.crypto import sign_envelope

    doc = sign_envelope(SIGNATURE_PAYLOAD_TYPE, data, signer)
    return (json.dumps(doc, indent=2, ensure_ascii=True) + "\n").encode("ascii")


def sender_signer(trust: TrustStore | None, sender: str, root: Path, now: str) -> Any:
    """The sender's signer for ``emit --sign``: ``EIDOLONS_SENDER_KEY_FILE``, else the
    newest active ``sender:<eidolon>`` key of the trust store found in the key directory.
    Raises :class:`eidolons.errors.UsageError` (no key) or ``KeyFileError`` (unsafe file)."""
    from eidolons.errors import UsageError
    from eidolons.keys.crypto import NoSigner, find_signer, load_signer_file
    from eidolons.keys.host import env_key_file

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
    envelope_path: StrPath,
    envelope_sha256: str,
    sender: str,
    trust: TrustStore,
    now: str,
) -> tuple[str, str] | None:
    """None when a trusted, active key of ``sender`` signed exactly these envelope bytes;
    else ``(code, why)``."""
    from eidolons.keys.crypto import DsseError

    path = signature_path(envelope_path)
    if not os.path.lexists(path):
        name = pathstr.name(path)
        return UNVERIFIED, f"no sender signature ({name}) where {sender}'s is required"
    doc, unreadable = _read_sidecar(path, MAX_SIG_BYTES, "sender signature")
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
