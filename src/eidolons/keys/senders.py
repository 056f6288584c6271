"""Sender signatures (ADR 0034): ``emit --sign`` and the check both gates make.

``<stem>.envelope.sig`` is a DSSE envelope whose body is the envelope's exact bytes. A
signature is needed when the trust store holds a key for the sender (whatever its
status) or requires one on the edge; none, or one by no trusted key, is UNVERIFIED; a
trusted signature over other bytes is INTEGRITY_MISMATCH.
"""

from __future__ import annotations

import os

from eidolons.ecl.verdict import RefusalCode
from eidolons.io import paths as pathstr
from eidolons.keys.store import TrustStore, sender_role

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from eidolons.io.paths import StrPath

PAYLOAD_TYPE = "application/vnd.eidolons.ecl-envelope+json"
SIG_SUFFIX = ".envelope.sig"
MAX_SIG_BYTES = 64 * 1024
UNVERIFIED = RefusalCode.UNVERIFIED  # the one enumeration of the codes (ecl.verdict)
INTEGRITY_MISMATCH = RefusalCode.INTEGRITY_MISMATCH


def signature_path(envelope_path: StrPath) -> str:
    """``<stem>.envelope.sig`` beside ``<stem>.envelope.json``."""
    from eidolons.io.payload import sidecar_path

    return sidecar_path(envelope_path, SIG_SUFFIX)


def required(trust: TrustStore | None, sender: str, receiver: str) -> bool:
    """Whether the hand-off ``sender -> receiver`` needs a sender signature."""
    if trust is None:
        return False
    return trust.has_role(sender_role(sender)) or trust.requires_sender_signature(sender, receiver)


def sign_bytes(data: bytes, signer: Any) -> bytes:
    """The ``.envelope.sig`` file's bytes for envelope bytes ``data``."""
    import json

    from eidolons.keys.dsse import sign_envelope

    doc = sign_envelope(PAYLOAD_TYPE, data, signer)
    return (json.dumps(doc, indent=2, ensure_ascii=True) + "\n").encode("ascii")


def sender_signer(trust: TrustStore | None, sender: str, root: Path, now: str) -> Any:
    """The sender's signer for ``emit --sign``: ``EIDOLONS_SENDER_KEY_FILE``, else the
    newest active ``sender:<eidolon>`` key of the trust store found in the key directory.
    Raises :class:`eidolons.errors.UsageError` (no key) or ``KeyFileError`` (unsafe file)."""
    from eidolons.errors import UsageError
    from eidolons.keys.files import env_key_file
    from eidolons.keys.signer import NoSigner, find_signer, load_signer_file

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


def check(
    envelope_path: StrPath,
    envelope_sha256: str,
    sender: str,
    trust: TrustStore,
    now: str,
) -> tuple[str, str] | None:
    """None when a trusted, active key of ``sender`` signed exactly these envelope bytes;
    else ``(code, why)``."""
    from eidolons.ecl.strict_json import loads_strict
    from eidolons.errors import EnvelopeError, InputError
    from eidolons.io.payload import read_envelope_bytes
    from eidolons.keys.dsse import DsseError

    path = signature_path(envelope_path)
    if not os.path.lexists(path):
        name = pathstr.name(path)
        return UNVERIFIED, f"no sender signature ({name}) where {sender}'s is required"
    try:
        doc = loads_strict(read_envelope_bytes(path, MAX_SIG_BYTES))
    except (InputError, EnvelopeError) as exc:
        return UNVERIFIED, f"sender signature {pathstr.name(path)} unreadable: {exc}"
    role = sender_role(sender)
    try:
        signed = trust.verify_signed(doc, role, PAYLOAD_TYPE, now)
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
