"""Ed25519 through ``cryptography``: the one module that imports it, and only where a
signature is made or checked (a test checks other commands never load it); PEM
serialization is imported only where a key file is read or written.
"""

from __future__ import annotations

from eidolons.errors import EidolonsError

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

try:  # the Rust classes the public ones are (ADR 0089): ~4 ms to load, not ~12 ms
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
        from eidolons.keys.store import key_id

        self._key = key
        self.public_raw = key.public_key().public_bytes_raw()  # no serialization import
        self.keyid = key_id(self.public_raw)

    def sign(self, message: bytes) -> bytes:
        return self._key.sign(message)

    @classmethod
    def generate(cls) -> Signer:
        return cls(_generate())

    @classmethod
    def from_seed(cls, seed: bytes) -> Signer:
        return cls(_from_private(seed))

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
    import binascii

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
