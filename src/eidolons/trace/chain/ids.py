"""OpenTelemetry ids derived from ECL ids: a thread's trace id is its UUID's bits (else a
SHA-256 prefix), a hand-off's span id a SHA-256 prefix of its ``message_id``; an all-zero
id is mapped through the hash with its last byte set to 1.
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
