"""The signing key's PEM is read without ``cryptography``'s serialization module when it
is exactly the form this tool writes; anything else goes to ``cryptography``'s loader,
and both give the same key (or the same refusal)."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from eidolons.keys.receipts import KeyFormatError, Signer, _pkcs8_ed25519_seed


def test_the_written_form_takes_the_fast_path_and_gives_the_same_key() -> None:
    for _ in range(50):
        signer = Signer.generate()
        pem = signer.to_pem()
        assert _pkcs8_ed25519_seed(pem) is not None
        again = Signer.from_pem(pem)
        slow = serialization.load_pem_private_key(pem, password=None)
        assert isinstance(slow, Ed25519PrivateKey)
        assert again.keyid == signer.keyid
        assert again.public_raw == slow.public_key().public_bytes_raw()
        assert again.sign(b"m") == signer.sign(b"m")  # Ed25519 is deterministic


def _other_forms() -> list[bytes]:
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    openssh = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pw"),
    )
    lines = pem.strip().split(b"\n")
    return [
        openssh,
        encrypted,
        b"junk\n" + pem,
        pem.replace(b"PRIVATE KEY", b"PUBLIC KEY"),
        lines[0] + b"\n" + lines[1][:-4] + b"AAAA\n" + lines[2],  # another seed tail
        lines[0] + b"\n" + lines[1] + b"=\n" + lines[2],  # bad padding
        b"",
    ]


@pytest.mark.parametrize("data", _other_forms())
def test_other_forms_are_left_to_cryptography(data: bytes) -> None:
    seed = _pkcs8_ed25519_seed(data)
    if seed is not None:  # only a valid seed of the fixed form may pass, and then equal
        slow = serialization.load_pem_private_key(data, password=None)
        assert isinstance(slow, Ed25519PrivateKey)
        assert Signer.from_pem(data).public_raw == slow.public_key().public_bytes_raw()
        return
    try:
        slow = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        with pytest.raises(KeyFormatError):
            Signer.from_pem(data)
        return
    if isinstance(slow, Ed25519PrivateKey):
        assert Signer.from_pem(data).public_raw == slow.public_key().public_bytes_raw()


def test_trust_store_base64_reader_equals_base64() -> None:
    import base64
    import binascii
    import random

    from eidolons.keys.store import _b64decode

    rng = random.Random(9)
    alphabet = "ABCxyz019+/=-_ \n.é"
    samples = [
        base64.b64encode(bytes(rng.randrange(256) for _ in range(n))).decode() for n in range(40)
    ]
    samples += [
        "".join(rng.choice(alphabet) for _ in range(rng.randrange(12))) for _ in range(3000)
    ]
    samples += ["", "=", "==", "===", "AA==", "AA===", "AAA=", "A", "AB", "ABC", "QUJD", "QUJD\n"]
    for text in samples:
        try:
            expected: object = base64.b64decode(text, validate=True)
        except binascii.Error:
            expected = binascii.Error
        except ValueError:
            expected = ValueError
        try:
            got: object = _b64decode(text)
        except binascii.Error:
            got = binascii.Error
        except ValueError:
            got = ValueError
        assert got == expected, text
