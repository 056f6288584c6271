"""How a verified hand-off becomes a crystal, as the CRYSTALIUM server maps it
(``crystalium.md`` §2): the envelope's refusals, trust tier and validation state, summary,
payload decoding within bounds, redaction. Pure.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from eidolons.ecl import grammar
from eidolons.ecl.envelope import REQUIRED_FIELDS as ENVELOPE_REQUIRED_FIELDS
from eidolons.ecl.grammar import is_hex64
from eidolons.ecl.integrity import sha256_hex  # builtin SHA-256 first: no OpenSSL at open
from eidolons.memory._common import (
    INGEST_BAD_ENVELOPE,
    INGEST_PAYLOAD_HASH_MISMATCH,
    UNSUPPORTED_ENVELOPE_VERSION,
    Frozen,
)
from eidolons.memory.textscan import LazyPattern, envelope_version, may_redact, tier_digit

TYPE_CHECKING = False  # as typing.TYPE_CHECKING: typing is not imported at memory open
if TYPE_CHECKING:
    from typing import Any, Final

REQUIRED_FIELDS: Final = ENVELOPE_REQUIRED_FIELDS  # the same eleven as the envelope model
ARTIFACT_FIELDS: Final = ("kind", "schema_version", "path", "sha256", "size_bytes")
INTEGRITY_FIELDS: Final = ("method", "value")
AGENT_FIELDS: Final = ("eidolon", "version")
HOST_T0: Final = frozenset({"host", "host-llm", "cortex"})


ROSTER_T1: Final = frozenset(
    (
        "atlas",
        "spectra",
        "apivr",
        "apivr-delta",
        "apivr-Δ",
        "idg",
        "forge",
        "vigil",
        "opus",
        "crystalium",
    )
)
"""The roster of ``crystalium.md`` §2.2: newer members (vivi, kupo, gilgamesh, ramza) and
the reserved ``human``/``orchestrator`` are T3 there, and so here."""

_VERSION_RE: Final = LazyPattern(r"[12](\.\d+){1,2}")
# Redaction rules (crystalium.md §3): SSN always, the others unless sensitivity is "none".
_REDACTIONS: Final[tuple[tuple[str, LazyPattern, bool], ...]] = (
    ("SSN", LazyPattern(r"\b\d{3}-\d{2}-\d{4}\b"), True),
    ("AWS_KEY", LazyPattern(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), False),
    (
        "GITHUB_TOKEN",
        LazyPattern(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})\b"),
        False,
    ),
    ("JWT", LazyPattern(r"\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+"), False),
    ("PEM_PRIVATE_KEY", LazyPattern(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"), False),
    ("PASSWORD", LazyPattern(r"(?i)\bpassword\s*[=:]\s*\S+"), False),
)


class LocalLimits(Frozen):
    """Every bound of the local store: characters of the payload indexed
    (``excerpt_chars``) and of the summary (``summary_chars``), the largest payload kept
    verbatim (``native_max_bytes``), how long a writer waits for another's lock
    (``busy_timeout_ms``), a new crystal's importance."""

    _fields = (
        "excerpt_chars",
        "summary_chars",
        "native_max_bytes",
        "busy_timeout_ms",
        "importance_cold_start",
    )
    __slots__ = _fields

    excerpt_chars: int
    summary_chars: int
    native_max_bytes: int
    busy_timeout_ms: int
    importance_cold_start: float

    def __init__(
        self,
        excerpt_chars: int = 4096,
        summary_chars: int = 4096,
        native_max_bytes: int = 1024 * 1024,
        busy_timeout_ms: int = 5000,
        importance_cold_start: float = 0.30,
    ) -> None:
        self._set(
            excerpt_chars, summary_chars, native_max_bytes, busy_timeout_ms, importance_cold_start
        )


def _now() -> str:
    """UTC now to the second, ``Z``-suffixed, without :mod:`datetime`. Not ``gmtime()``:
    C's ``time(NULL)`` can lag ``datetime.now()`` by a second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time()))


def _parse_ts(value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    from datetime import UTC, datetime  # a new crystal's date only: not at open

    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def validate_envelope(envelope: Any, payload: Any) -> tuple[str, str] | None:
    """The server's ingest refusals, in order. Returns ``(reason_code, message)`` or None."""
    if not isinstance(envelope, Mapping):
        return INGEST_BAD_ENVELOPE, "envelope must be an object"
    version = envelope.get("envelope_version")
    if not isinstance(version, str) or not _supported_version(version):
        return (
            UNSUPPORTED_ENVELOPE_VERSION,
            f"envelope_version {version!r} is not a supported version (1.x or 2.x)",
        )
    for name in REQUIRED_FIELDS:
        if name not in envelope or (envelope[name] is None and name != "parent_id"):
            return INGEST_BAD_ENVELOPE, f"envelope is missing required field {name!r}"
    for name, fields in (
        ("artifact", ARTIFACT_FIELDS),
        ("integrity", INTEGRITY_FIELDS),
        ("from", AGENT_FIELDS),
        ("to", AGENT_FIELDS),
    ):
        block = envelope[name]
        if not isinstance(block, Mapping):
            return INGEST_BAD_ENVELOPE, f"envelope.{name} must be an object"
        for sub in fields:
            if block.get(sub) is None:
                return INGEST_BAD_ENVELOPE, f"envelope.{name} is missing {sub!r}"
    for dotted in (
        "message_id",
        "thread_id",
        "objective",
        "artifact.kind",
        "artifact.sha256",
        "integrity.method",
        "integrity.value",
        "from.eidolon",
    ):
        if not isinstance(_get(envelope, dotted), str):
            return INGEST_BAD_ENVELOPE, f"envelope.{dotted} must be a string"
    if not isinstance(envelope["trace"], Mapping):
        return INGEST_BAD_ENVELOPE, "envelope.trace must be an object"
    artifact, integrity = envelope["artifact"], envelope["integrity"]
    method, value = integrity["method"], integrity["value"]
    if method == "sha256":
        if value != artifact["sha256"]:
            return INGEST_BAD_ENVELOPE, "integrity.value does not equal artifact.sha256"
    elif method == "hmac-sha256":
        if not is_hex64(value):
            return INGEST_BAD_ENVELOPE, "integrity.value is not 64 lowercase hex digits"
    else:
        return INGEST_BAD_ENVELOPE, f"unknown integrity.method {method!r}"
    if isinstance(payload, bytes | bytearray | memoryview | str):
        raw = payload.encode("utf-8") if isinstance(payload, str) else bytes(payload)
        digest = sha256_hex(raw)
        if digest != artifact["sha256"]:
            return (
                INGEST_PAYLOAD_HASH_MISMATCH,
                f"sha256(payload) {digest} does not equal artifact.sha256 {artifact['sha256']}",
            )
    return None


def _get(mapping: Mapping[str, Any], dotted: str) -> Any:
    value: Any = mapping
    for part in dotted.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def identity_tier(eidolon: str) -> str:
    name = eidolon.lower()
    if name in HOST_T0:
        return "T0"
    if name in ROSTER_T1:
        return "T1"
    return "T3"


def trust_tier(envelope: Mapping[str, Any]) -> str:
    """MIN-trust: the identity tier, lowered (never raised) by a ``trace.tier`` of T0..T3."""
    tier = identity_tier(str(_get(envelope, "from.eidolon")))
    declared = _get(envelope, "trace.tier")
    if isinstance(declared, str):
        digit = tier_digit(declared.strip())
        if digit is not None and digit > tier[1]:
            tier = f"T{digit}"
    return tier


def validation_state(tier: str, gated: bool = False) -> str:
    """T3 is ``quarantined``; a hand-off that passed both gates (``gated``) is
    ``validated`` (ADR 0021); anything else ``unverified``."""
    if tier == "T3":
        return "quarantined"
    return "validated" if gated else "unverified"


def handoff_key(envelope: Mapping[str, Any]) -> str:
    """The idempotency key of a hand-off's content (ADR 0021): SHA-256 of the sender and
    receiver (lower-cased), performative, artifact kind, objective and payload SHA-256."""
    parts = [
        str(_get(envelope, "from.eidolon")).lower(),
        str(_get(envelope, "to.eidolon")).lower(),
        str(envelope.get("performative")),
        str(_get(envelope, "artifact.kind")),
        str(envelope.get("objective")),
        str(_get(envelope, "artifact.sha256")),
    ]
    return sha256_hex(grammar.dumps(parts).encode())  # json.dumps(parts, ensure_ascii=True)


def provenance_source(tier: str) -> str:
    return {"T0": "human", "T1": "verified_agent"}.get(tier, "unverified_agent")


def summary_of(kind: str, objective: str, limit: int) -> str:
    text = f"{kind}: {objective}" if objective.strip() else kind
    return text[:limit]


def decode_payload(
    payload: Any, encoding: str, limits: LocalLimits
) -> tuple[Any, str, dict[str, Any]]:
    """``(native artifact to keep, searchable text, encoding notes)``."""
    notes: dict[str, Any] = {}
    native: Any
    if isinstance(payload, bytes | bytearray | memoryview):
        raw = bytes(payload)
    elif isinstance(payload, str):
        if encoding == "base64":
            import base64  # only for a base64 payload: not imported at open
            import binascii

            try:
                raw = base64.b64decode(payload, validate=True)
            except (binascii.Error, ValueError):
                raw = payload.encode("utf-8")
                notes["payload_decode_error"] = "base64"
        elif encoding == "json":
            import json  # json only where a payload is JSON (a merge imports none, ADR 0021)

            try:
                native = json.loads(payload)
            except ValueError:
                native = payload
                notes["payload_decode_error"] = "json"
            text = payload
            return _bounded(native, text, limits, notes)
        else:
            raw = payload.encode("utf-8")
    else:  # a JSON object or array
        import json

        text = json.dumps(payload, ensure_ascii=False, sort_keys=True, default=str)
        return _bounded(payload, text, limits, notes)
    try:
        text = raw.decode("utf-8")
        native = text
    except UnicodeDecodeError:
        import base64

        text = ""
        native = base64.b64encode(raw).decode("ascii")
        notes["native_artifact_encoding"] = "base64"
    return _bounded(native, text, limits, notes, size=len(raw))


def _bounded(
    native: Any, text: str, limits: LocalLimits, notes: dict[str, Any], size: int | None = None
) -> tuple[Any, str, dict[str, Any]]:
    if size is None:
        size = len(text.encode("utf-8"))
    if size > limits.native_max_bytes:
        notes["native_artifact_omitted"] = f"payload of {size} bytes > {limits.native_max_bytes}"
        native = None
    return native, text[: limits.excerpt_chars], notes


def estimate_tokens(text: str) -> int:
    """``math.ceil(words x 1.3)``, the server's estimate, without :mod:`math` (ADR 0022)."""
    return int(-(-(len(text.split()) * 1.3) // 1))


def redact(text: str, sensitivity: str | None) -> str:
    for rule, pattern, always in _REDACTIONS:
        if (always or (sensitivity or "internal") != "none") and may_redact(rule, text):
            text = pattern.sub(f"«REDACTED:{rule}»", text)
    return text


def _supported_version(version: str) -> bool:
    """Whether ``_VERSION_RE`` matches the whole ``version``."""
    plain = envelope_version(version)
    return _VERSION_RE.fullmatch(version) is not None if plain is None else plain
