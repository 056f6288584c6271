"""The builtin SHA-256 used for small payloads before OpenSSL is loaded (ADR 0022) gives
exactly OpenSSL's digests, and the switch to OpenSSL happens where it is documented."""

from __future__ import annotations

import hashlib
import hmac
import io
import os
import random

import pytest

from eidolons.ecl import integrity


@pytest.fixture
def fresh_budget() -> object:
    saved = integrity._light_bytes[0]
    integrity._light_bytes[0] = 0
    yield
    integrity._light_bytes[0] = saved


def test_light_and_openssl_agree(fresh_budget: object) -> None:
    rng = random.Random(3)
    for size in [0, 1, 55, 56, 63, 64, 65, 1000, 4096, 65537, *rng.sample(range(1, 9000), 40)]:
        data = os.urandom(size)
        integrity._light_bytes[0] = 0
        light = integrity.sha256(data)
        assert type(light) is not type(hashlib.sha256())  # really the builtin one
        assert light.hexdigest() == hashlib.sha256(data).hexdigest()
        assert integrity.sha256_hex(data) == hashlib.sha256(data).hexdigest()


def test_switch_over_to_openssl(fresh_budget: object) -> None:
    openssl = type(hashlib.sha256())
    assert type(integrity.sha256(size_hint=integrity.LIGHT_MAX_BYTES + 1)) is openssl
    assert type(integrity.sha256(b"x")) is not openssl
    integrity._light_bytes[0] = integrity.LIGHT_MAX_BYTES  # the process has hashed enough
    assert type(integrity.sha256(b"x")) is openssl


@pytest.mark.parametrize("size", [0, 100, 4096, integrity.LIGHT_MAX_BYTES + 7, 3 * 1024 * 1024])
@pytest.mark.parametrize("hinted", [True, False])
def test_digest_stream_agrees_whatever_the_hint(
    fresh_budget: object, size: int, hinted: bool
) -> None:
    data = os.urandom(size)
    for hint in [size, 0, size * 2] if hinted else [None]:
        integrity._light_bytes[0] = 0
        got = integrity.digest_stream(
            io.BytesIO(data), "sha256", max_bytes=size + 1, size_hint=hint
        )
        assert got.value == got.sha256 == hashlib.sha256(data).hexdigest()
        assert got.size == size
        mac = integrity.digest_stream(
            io.BytesIO(data), "hmac-sha256", b"k", max_bytes=size + 1, size_hint=hint
        )
        assert mac.value == hmac.new(b"k", data, hashlib.sha256).hexdigest()
        assert mac.sha256 == got.sha256


def test_a_file_that_grew_past_its_hint_is_hashed_to_its_end(fresh_budget: object) -> None:
    data = os.urandom(200_000)
    got = integrity.digest_stream(io.BytesIO(data), "sha256", max_bytes=10**6, size_hint=10)
    assert got.size == len(data) and got.sha256 == hashlib.sha256(data).hexdigest()
    with pytest.raises(integrity.PayloadTooLarge):
        integrity.digest_stream(io.BytesIO(data), "sha256", max_bytes=1000, size_hint=10)


def test_tags_equal_is_compare_digest() -> None:
    for a, b in [("ab", "ab"), ("ab", "ac"), ("", ""), ("a", "ab"), ("é", "é"), ("é", "e")]:
        expected = hmac.compare_digest(a.encode("ascii", "replace"), b.encode("ascii", "replace"))
        assert integrity.tags_equal(a, b) is expected
