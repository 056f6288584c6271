"""The integrity core: computing and comparing ECL integrity tags.

Rules:

- ``sha256``: lowercase hex SHA-256 of the payload bytes.
- ``hmac-sha256``: lowercase hex HMAC-SHA-256 of the payload bytes, keyed with the raw
  bytes of ``ECL_HMAC_KEY`` (as ``openssl dgst -sha256 -hmac "$KEY"``).
- Any other method is unsupported and never verifies.
- Tags are compared in constant time and exactly (an upper-case tag does not match).
- Hashing streams through one reused buffer and stops past the size cap; the bytes that
  were hashed are the only bytes a caller may hand on (``keep=True`` returns them).

No paths here: callers pass an open binary file (see :mod:`eidolons.payload`).
"""

from __future__ import annotations

import hashlib
import hmac

from eidolons.errors import EidolonsError

SUPPORTED_METHODS = ("sha256", "hmac-sha256")
CHUNK = 1024 * 1024


TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Protocol

    class Readable(Protocol):
        def readinto(self, buffer: memoryview, /) -> int | None: ...

    class Writable(Protocol):
        def write(self, data: memoryview, /) -> object: ...


class PayloadTooLarge(EidolonsError):
    code = "PAYLOAD_TOO_LARGE"


class Digest:
    """What was computed over one read of the payload: ``value`` is the integrity tag
    (SHA-256 or HMAC, lowercase hex), ``sha256`` the plain SHA-256 always, ``data`` the
    exact bytes hashed when they were asked for (a ``bytearray`` from a stream: the one
    copy that was read, never copied again)."""

    __slots__ = ("data", "method", "sha256", "size", "value")

    def __init__(
        self,
        method: str,
        value: str,
        sha256: str,
        size: int,
        data: bytes | bytearray | None = None,
    ) -> None:
        self.method = method
        self.value = value
        self.sha256 = sha256
        self.size = size
        self.data = data

    def __repr__(self) -> str:
        return f"Digest({self.method}, {self.value}, size={self.size})"


def tags_equal(expected: str, actual: str) -> bool:
    """Constant-time comparison of two hex tags."""
    return hmac.compare_digest(
        expected.encode("ascii", "replace"), actual.encode("ascii", "replace")
    )


def digest_bytes(data: bytes, method: str, key: bytes | None = None) -> Digest:
    """The tag of in-memory bytes (used by emit and tests)."""
    sha = hashlib.sha256(data).hexdigest()
    if method == "sha256":
        return Digest(method, sha, sha, len(data))
    if method == "hmac-sha256":
        if key is None:
            raise EidolonsError("hmac-sha256 needs a key", code="NO_KEY")
        return Digest(method, hmac.new(key, data, hashlib.sha256).hexdigest(), sha, len(data))
    raise EidolonsError(f"unsupported integrity method {method!r}", code="UNSUPPORTED_ALGO")


def digest_stream(
    stream: Readable,
    method: str,
    key: bytes | None = None,
    *,
    max_bytes: int,
    keep: bool = False,
    sink: Writable | None = None,
) -> Digest:
    """Hash ``stream`` to its end in one pass. Raises :class:`PayloadTooLarge` past
    ``max_bytes`` (counted while reading, so a growing file cannot slip past the cap).
    ``keep`` returns the bytes hashed in ``Digest.data``; ``sink`` receives each chunk as
    it is hashed (a snapshot of exactly the bytes judged, without holding them in memory)."""
    sha = hashlib.sha256()
    mac = None
    if method == "hmac-sha256":
        if key is None:
            raise EidolonsError("hmac-sha256 needs a key", code="NO_KEY")
        mac = hmac.new(key, digestmod=hashlib.sha256)
    elif method != "sha256":
        raise EidolonsError(f"unsupported integrity method {method!r}", code="UNSUPPORTED_ALGO")
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    # one copy of the payload: each chunk appended to one growing buffer, handed back as
    # is (no join, no final copy), so a payload costs its size once, plus this buffer
    kept: bytearray | None = bytearray() if keep else None
    size = 0
    while True:
        n = stream.readinto(view)
        if not n:
            break
        size += n
        if size > max_bytes:
            raise PayloadTooLarge(f"payload is larger than the {max_bytes}-byte cap")
        chunk = view[:n]
        sha.update(chunk)
        if mac is not None:
            mac.update(chunk)
        if kept is not None:
            kept += chunk
        if sink is not None:
            sink.write(chunk)
    sha_hex = sha.hexdigest()
    value = mac.hexdigest() if mac is not None else sha_hex
    return Digest(method, value, sha_hex, size, kept)
