"""DSSE envelopes (https://github.com/secure-systems-lab/dsse, protocol v1.0.0).

A signature is over ``PAE(payloadType, body)`` (:func:`pae`, the one encoder; the spec's
vectors are pinned in the tests). ``keyid`` is a hint: every trusted key is tried. The
body handed back is the exact bytes verified.
"""

from __future__ import annotations

import binascii
from collections.abc import Mapping

from eidolons.errors import EidolonsError

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

IN_TOTO = "application/vnd.in-toto+json"
MAX_SIGNATURES = 8


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
    """A DSSE envelope over ``body``, signed by ``signer`` (a ``keys.crypto.Signer``)."""
    sig = signer.sign(pae(payload_type.encode("utf-8"), body))
    return {
        "payloadType": payload_type,
        "payload": _b64encode(body),
        "signatures": [{"keyid": signer.keyid, "sig": _b64encode(sig)}],
    }


class Parsed:
    """The decoded parts of a DSSE envelope."""

    __slots__ = ("body", "payload_type", "signatures")

    def __init__(self, payload_type: str, body: bytes, signatures: list[tuple[str | None, bytes]]):
        self.payload_type = payload_type
        self.body = body
        self.signatures = signatures


def parse_envelope(doc: object) -> Parsed:
    if not isinstance(doc, Mapping):
        raise DsseError("a DSSE envelope must be a JSON object")
    if set(doc) - {"payloadType", "payload", "signatures"}:
        raise DsseError("unknown field in DSSE envelope")
    ptype, payload, sigs = doc.get("payloadType"), doc.get("payload"), doc.get("signatures")
    if not isinstance(ptype, str) or not isinstance(payload, str):
        raise DsseError("payloadType and payload must be strings")
    if not isinstance(sigs, list) or not 1 <= len(sigs) <= MAX_SIGNATURES:
        raise DsseError(f"signatures must be a list of 1 to {MAX_SIGNATURES}")
    out: list[tuple[str | None, bytes]] = []
    for s in sigs:
        if not isinstance(s, Mapping) or set(s) - {"keyid", "sig"} or "sig" not in s:
            raise DsseError("a signature must be {keyid?, sig}")
        keyid = s.get("keyid")
        if keyid is not None and not isinstance(keyid, str):
            raise DsseError("keyid must be a string")
        out.append((keyid, b64decode_any(s["sig"])))
    return Parsed(ptype, b64decode_any(payload), out)


def verify_envelope(
    doc: object, keys: Mapping[str, bytes], payload_types: Iterable[str]
) -> tuple[bytes, list[str]]:
    """Verify ``doc`` against ``keys`` (keyid -> raw Ed25519 public key). Returns the body
    (the exact bytes verified) and the ids of the keys whose signature verified; an empty
    list means no trusted signature. Raises :class:`DsseError` for a malformed envelope or
    an unsupported payload type on a verified signature."""
    from eidolons.keys.crypto import verify

    parsed = parse_envelope(doc)
    message = pae(parsed.payload_type.encode("utf-8"), parsed.body)
    accepted: list[str] = []
    for _hint, sig in parsed.signatures:  # the keyid hint never selects the key alone
        for keyid, public in keys.items():
            if keyid not in accepted and verify(public, sig, message):
                accepted.append(keyid)
    if accepted and parsed.payload_type not in set(payload_types):
        raise DsseError(f"unsupported payloadType {parsed.payload_type!r}")
    return parsed.body, accepted


def _b64encode(raw: bytes) -> str:
    """``base64.b64encode(raw).decode("ascii")`` (the same bytes; ``base64`` imports
    ``re``, and every signed gate writes these)."""
    return binascii.b2a_base64(raw, newline=False).decode("ascii")
