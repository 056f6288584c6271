"""Ed25519 through the ``cryptography`` library: the one module that imports it.

Only the paths that sign or verify import this module (receipts, sender signatures,
``keys``); every other command runs without loading ``cryptography`` (a test checks it).
``serialization`` (PEM, and through it SSH keys, bcrypt and the ciphers: ~13 ms) is
imported only where a key file is read or written, never on the verifying path.
"""

from __future__ import annotations

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from eidolons.errors import EidolonsError


class KeyFormatError(EidolonsError):
    code = "KEY_FORMAT"


class Signer:
    """A private Ed25519 key and its id."""

    __slots__ = ("_key", "keyid", "public_raw")

    def __init__(self, key: Ed25519PrivateKey) -> None:
        from cryptography.hazmat.primitives import serialization

        from eidolons.keys.store import key_id

        self._key = key
        self.public_raw = key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        self.keyid = key_id(self.public_raw)

    def sign(self, message: bytes) -> bytes:
        return self._key.sign(message)

    @classmethod
    def generate(cls) -> Signer:
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_seed(cls, seed: bytes) -> Signer:
        return cls(Ed25519PrivateKey.from_private_bytes(seed))

    @classmethod
    def from_pem(cls, data: bytes) -> Signer:
        from cryptography.hazmat.primitives import serialization

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


def verify(public_raw: bytes, signature: bytes, message: bytes) -> bool:
    """True only if ``signature`` is a valid Ed25519 signature of ``message``."""
    try:
        Ed25519PublicKey.from_public_bytes(public_raw).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def public_from_pem(data: bytes) -> bytes:
    """The raw 32 bytes of a PEM Ed25519 public key."""
    from cryptography.hazmat.primitives import serialization

    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise KeyFormatError(f"not a PEM public key ({exc})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFormatError("not an Ed25519 public key")
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
