"""OpenTelemetry ids derived from ECL ids, deterministically.

- trace id (16 bytes) of a thread: the thread id's own 128 bits when it is a UUID (so the
  trace id *is* the thread id without dashes), else the first 16 bytes of
  ``SHA-256("ecl.thread_id:" + thread_id)``;
- span id (8 bytes) of a hand-off: the first 8 bytes of
  ``SHA-256("ecl.message_id:" + message_id)`` (a UUIDv7's first 8 bytes are its
  timestamp, shared by messages minted in the same millisecond).

OpenTelemetry forbids all-zero ids; the one input that would give one (the nil UUID, or a
hash prefix of zeros) is mapped through the hash, then its last byte set to 1.
"""

from __future__ import annotations

import hashlib
import uuid


def _hashed(label: str, value: str, size: int) -> bytes:
    digest = hashlib.sha256(f"{label}:{value}".encode("utf-8", "surrogatepass")).digest()[:size]
    return digest if any(digest) else digest[:-1] + b"\x01"


def trace_id_bytes(thread_id: str) -> bytes:
    try:
        raw = uuid.UUID(thread_id).bytes
    except ValueError:
        raw = b""
    if len(thread_id) == 36 and any(raw):
        return raw
    return _hashed("ecl.thread_id", thread_id, 16)


def span_id_bytes(message_id: str) -> bytes:
    return _hashed("ecl.message_id", message_id, 8)


def trace_id(thread_id: str) -> str:
    return trace_id_bytes(thread_id).hex()


def span_id(message_id: str) -> str:
    return span_id_bytes(message_id).hex()
