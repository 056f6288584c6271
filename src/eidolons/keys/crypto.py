"""Signatures: Ed25519 keys, DSSE envelopes, and the signer a role signs with.

``cryptography`` is imported here only, and this module only where a signature is made or
checked (a test checks other commands never load it); PEM serialization only where a key
file is read or written.

DSSE (https://github.com/secure-systems-lab/dsse, protocol v1.0.0): a signature is over
``PAE(payloadType, body)`` (:func:`pae`, the one encoder; the spec's vectors are pinned in
the tests). ``keyid`` is a hint: every trusted key is tried. The body handed back is the
exact bytes verified.

A role signs with the key file its environment names, else the key file of the newest
active key of the role in the trust store (:func:`find_signer`); a key the store does not
list as active signs nothing.
"""

from __future__ import annotations

import binascii
import os
from collections.abc import Mapping

from eidolons.errors import EidolonsError
from eidolons.keys.host import (
    SENDER_KEY_ENV,
    SIGNING_KEY_ENV,
    KeyFileError,
    env_key_file,
    key_file,
    read_key_file,
)
from eidolons.keys.store import TrustStore, b64encode, key_id

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from eidolons.io.paths import StrPath

try:  # the Rust classes the public ones are (ADR 0022): ~4 ms to load, not ~12 ms
    from cryptography.hazmat.bindings._rust import openssl as _rust_openssl

    _ED = _rust_openssl.ed25519
    _from_public, _from_private, _generate = (
        _ED.from_public_bytes,
        _ED.from_private_bytes,
        _ED.generate_key,
    )
except (ImportError, AttributeError):  # another layout of cryptography: the public API
    from cryptography.hazmat.primitives.asymmetric import ed25519 as _public

    _from_public = _public.Ed25519PublicKey.from_public_bytes
    _from_private = _public.Ed25519PrivateKey.from_private_bytes
    _generate = _public.Ed25519PrivateKey.generate


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
        return cls(_generate())

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
    """The seed of exactly the PEM :meth:`Signer.to_pem` writes (one ``PRIVATE KEY``
    block holding the fixed 48-byte RFC 8410 encoding), else None: every other form,
    encrypted, with attributes or a public key, another algorithm, anything around the
    block, is read by ``cryptography``'s own loader (``serialization``, ~13 ms to
    import). ``tests/test_keys_fast_pem.py`` checks both give the same key."""
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


# --------------------------------------------------------------------------- DSSE

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
    """A DSSE envelope over ``body``, signed by ``signer`` (a :class:`Signer`)."""
    sig = signer.sign(pae(payload_type.encode("utf-8"), body))
    return {
        "payloadType": payload_type,
        "payload": b64encode(body),
        "signatures": [{"keyid": signer.keyid, "sig": b64encode(sig)}],
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


# --------------------------------------------------------------------------- signers


class NoSigner(Exception):
    """No usable key for the role; ``str()`` says why (one line)."""


def load_signer_file(path: StrPath, root: StrPath) -> Signer:
    try:
        return Signer.from_pem(read_key_file(path, root))
    except KeyFormatError as exc:
        raise KeyFileError(f"key file {path}: {exc}") from None


def find_signer(store: TrustStore, role: str, root: StrPath, now: str) -> Signer:
    """The signer for ``role``, or :class:`NoSigner` (a :class:`KeyFileError` for an unsafe
    file propagates: the caller reports it, never signs with it)."""
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
