"""``keys.receipts`` signs and verifies through cryptography's Rust classes (ADR 0022): the
same keys and signatures as the public API, without loading its Python wrappers."""

from __future__ import annotations

import os
import subprocess
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from eidolons.keys import receipts as crypto


def test_the_fast_classes_are_the_public_ones() -> None:
    signer = crypto.Signer.generate()
    assert isinstance(signer._key, Ed25519PrivateKey)
    assert isinstance(crypto._from_public(signer.public_raw), Ed25519PublicKey)


def test_signatures_agree_with_the_public_api_both_ways() -> None:
    for _ in range(20):
        seed = os.urandom(32)
        public_key = Ed25519PrivateKey.from_private_bytes(seed)
        signer = crypto.Signer(crypto._from_private(seed))  # the fast class
        assert signer.public_raw == public_key.public_key().public_bytes_raw()
        message = os.urandom(64)
        ours = signer.sign(message)
        assert ours == public_key.sign(message)  # Ed25519 is deterministic
        Ed25519PublicKey.from_public_bytes(signer.public_raw).verify(ours, message)
        assert crypto.verify(signer.public_raw, public_key.sign(message), message)


def test_every_bad_signature_is_false_never_an_exception() -> None:
    signer = crypto.Signer.generate()
    sig = signer.sign(b"message")
    other = crypto.Signer.generate()
    assert not crypto.verify(signer.public_raw, sig, b"messagE")
    assert not crypto.verify(other.public_raw, sig, b"message")
    assert not crypto.verify(signer.public_raw, sig[:-1], b"message")
    assert not crypto.verify(signer.public_raw, b"", b"message")
    assert not crypto.verify(signer.public_raw[:31], sig, b"message")
    assert not crypto.verify(b"\x00" * 32, sig, b"message")
    flipped = bytes([sig[0] ^ 1]) + sig[1:]
    assert not crypto.verify(signer.public_raw, flipped, b"message")
    try:
        Ed25519PublicKey.from_public_bytes(signer.public_raw).verify(flipped, b"message")
    except InvalidSignature:
        pass
    else:  # pragma: no cover - the oracle itself
        raise AssertionError("the public API accepted a flipped signature")


def test_verifying_loads_none_of_the_python_wrappers() -> None:
    code = (
        "import sys; from eidolons.keys import receipts as crypto; s = crypto.Signer.generate(); "
        "assert crypto.verify(s.public_raw, s.sign(b'm'), b'm'); "
        "print(' '.join(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    unwanted = {"cryptography.utils", "cryptography.hazmat.primitives", "typing"}
    assert sorted(unwanted & set(out)) == []
