"""The embedded memory: a SQLite + FTS5 store that answers like a CRYSTALIUM server.

One file, ``<store_dir>/memory.sqlite3``, in WAL mode and shared by every gate process of
the project, created or upgraded (from schema 1 or 2) under an exclusive ``flock`` on
``<store>/.create.lock``; a newer schema is refused, never downgraded. ``ingest`` refuses
what :func:`validate_envelope` refuses (the server's checks, order and reason codes), then
stores one ``episodic`` crystal, or merges a repeat of ``(project, message_id,
artifact.sha256)`` or of the hand-off's content key (ADR 0021). ``recall`` keeps in SQL
the rows of the project, active, of the chosen layers and visible to the caller's class;
ranks them with two arms, BM25 over words and a trigram match of the query's
identifier-like tokens (ADRs 0021, 0022); fuses the arms by weighted reciprocal rank;
packs the first ``k`` into the server's token budget. The text rules run as plain scans
where they can, so a recall or a merge imports no :mod:`re` (ADR 0022). Where the store
differs from the server: ADR 0021.
"""

from __future__ import annotations

import os
import time
from _thread import RLock  # what threading.RLock returns; threading is not imported at open
from collections.abc import Iterable, Iterator, Mapping, Sequence

try:  # what sqlite3 re-exports, without sqlite3.dbapi2's datetime adapters (ADR 0021)
    import _sqlite3 as sqlite3
except ImportError:  # an interpreter without it: the public module
    import sqlite3  # type: ignore[no-redef]

from eidolons.ecl import jsontext
from eidolons.ecl.envelope import REQUIRED_FIELDS as ENVELOPE_REQUIRED_FIELDS
from eidolons.ecl.grammar import is_hex64
from eidolons.ecl.integrity import sha256_hex  # builtin SHA-256 first: no OpenSSL at open
from eidolons.io.files import deadline, flock_until
from eidolons.memory import (
    BACKEND_LOCAL,
    INGEST_BAD_ENVELOPE,
    INGEST_PAYLOAD_HASH_MISMATCH,
    SLOT_CAPS,
    TOTAL_TOKEN_CAP,
    UNSUPPORTED_ENVELOPE_VERSION,
    Frozen,
    check_recall_args,
    clamp_k,
    empty_recall,
    error_result,
    input_error,
    skipped_ingest,
    skipped_recall,
)

TYPE_CHECKING = False  # as typing.TYPE_CHECKING: typing is not imported at memory open
if TYPE_CHECKING:
    import re
    from pathlib import Path
    from typing import Any, Final


class LazyPattern:
    """A regular expression compiled on first use, with the methods the memory calls."""

    __slots__ = ("_compiled", "pattern")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._compiled: re.Pattern[str] | None = None

    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            import re

            self._compiled = re.compile(self.pattern)
        return self._compiled

    def fullmatch(self, text: str) -> re.Match[str] | None:
        return self.compiled().fullmatch(text)

    def findall(self, text: str) -> list[str]:
        return self.compiled().findall(text)

    def sub(self, replacement: str, text: str) -> str:
        return self.compiled().sub(replacement, text)

    def __repr__(self) -> str:
        return f"LazyPattern({self.pattern!r})"


_LOWER: Final = frozenset("abcdefghijklmnopqrstuvwxyz")
_UPPER: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_DIGITS: Final = frozenset("0123456789")
_LOWER_OR_DIGIT: Final = _LOWER | _DIGITS
_WORD_ASCII: Final = _LOWER | _UPPER | _DIGITS | {"_"}
# the separators of a raw token that are not whitespace (whitespace is str.split's, the
# same Py_UNICODE_ISSPACE as the patterns' \s)
_SEPARATORS_TO_SPACE: Final = str.maketrans(dict.fromkeys("\"'`()[]{}<>,;|", " "))


def ascii_words(text: str) -> list[str] | None:
    """``re.findall(r"\\w+", text)`` for an ASCII ``text`` (``\\w`` is then
    ``[A-Za-z0-9_]``); None for any other text."""
    if not text.isascii():
        return None
    words: list[str] = []
    start = -1
    for index, ch in enumerate(text):
        if ch in _WORD_ASCII:
            if start < 0:
                start = index
        elif start >= 0:
            words.append(text[start:index])
            start = -1
    if start >= 0:
        words.append(text[start:])
    return words


def candidate_runs(text: str) -> list[str] | None:
    """For an ASCII ``text``, what ``ranking``'s candidate pattern finds: every maximal run
    of non-separators (whitespace, quotes, brackets, ``,;|``) that is not made of
    lower-case letters only, in order; None for any other text."""
    if not text.isascii():
        return None
    runs = text.translate(_SEPARATORS_TO_SPACE).split()
    return [run for run in runs if not (run.isalpha() and run.islower())]


def has_camel(text: str) -> bool:
    """``re.search("[a-z0-9][A-Z]", text)`` (ASCII classes: exact for any text)."""
    previous = False
    for ch in text:
        if previous and ch in _UPPER:
            return True
        previous = ch in _LOWER_OR_DIGIT
    return False


def kebab_words(term: str) -> bool | None:
    """``re.fullmatch("(?i)[a-z]+(?:-[a-z]+)+", term)`` for an ASCII ``term`` (letters
    joined by single hyphens); None for any other term (case folding reaches past ASCII)."""
    if not term.isascii():
        return None
    parts = term.split("-")
    return len(parts) >= 2 and all(part.isalpha() for part in parts)


def plain_term(term: str) -> bool:
    """``re.fullmatch("[a-z0-9]+", term)`` (ASCII classes: exact for any text)."""
    return bool(term) and all(ch in _LOWER_OR_DIGIT for ch in term)


def envelope_version(text: str) -> bool | None:
    """``re.fullmatch(r"[12](\\.\\d+){1,2}", text)`` for an ASCII ``text``; None for any
    other (``\\d`` is every Unicode decimal digit)."""
    if not text.isascii():
        return None
    if text[:1] not in ("1", "2") or text[1:2] != ".":
        return False
    parts = text[2:].split(".")
    return len(parts) <= 2 and all(part and all(ch in _DIGITS for ch in part) for part in parts)


def tier_digit(text: str) -> str | None:
    """The digit of ``re.fullmatch("[Tt]([0-3])", text)``, or None when it does not match
    (literal characters: exact for any text)."""
    if len(text) == 2 and text[0] in ("T", "t") and text[1] in ("0", "1", "2", "3"):
        return text[1]
    return None


def _ssn_shape(text: str) -> bool:
    """Whether ``text`` holds ``ddd-dd-dddd`` (``d`` a Unicode decimal digit, as ``\\d``):
    what the SSN pattern needs, without its word boundaries."""
    at = text.find("-", 3)
    while 0 <= at <= len(text) - 8:
        if (
            text[at + 3] == "-"
            and text[at - 3 : at].isdecimal()
            and text[at + 1 : at + 3].isdecimal()
            and text[at + 4 : at + 8].isdecimal()
        ):
            return True
        at = text.find("-", at + 1)
    return False


_GITHUB_PREFIXES: Final = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")


def may_redact(rule: str, text: str) -> bool:
    """False only when the redaction pattern named ``rule`` cannot match ``text``: each
    pattern needs a literal its test here looks for (the password rule ignores case, which
    reaches past ASCII: any other text may match). True for a rule it does not know."""
    if rule == "SSN":
        return _ssn_shape(text)
    if rule == "AWS_KEY":
        return "AKIA" in text or "ASIA" in text
    if rule == "GITHUB_TOKEN":
        return any(prefix in text for prefix in _GITHUB_PREFIXES)
    if rule == "JWT":
        return "eyJ" in text
    if rule == "PEM_PRIVATE_KEY":
        return "-----BEGIN " in text
    if rule == "PASSWORD":
        return not text.isascii() or "password" in text.lower()
    return True


RRF_K: Final = 60
MAX_QUERY_TERMS: Final = 32
_WORD_RE: Final = LazyPattern(r"\w+")
_SEPARATORS: Final = r"\s\"'`()\[\]{}<>,;|"
# a whole raw token (a run of non-separators) not of lower-case ASCII letters only, which
# never look like an identifier
_CANDIDATE_RE: Final = LazyPattern(
    f"(?<![^{_SEPARATORS}])(?![a-z]+(?![^{_SEPARATORS}]))[^{_SEPARATORS}]+"
)
_SCAN_MAX: Final = 512  # longer texts (an excerpt) by the pattern: no re at a recall (ADR 0022)
_IDENT_PUNCT: Final = frozenset("_./-:\\#@=")
_KEBAB_WORDS_RE: Final = LazyPattern(r"(?i)[a-z]+(?:-[a-z]+)+")


def _distinct(tokens: Iterable[str]) -> list[str]:
    """The first ``MAX_QUERY_TERMS`` distinct tokens, in order."""
    seen: dict[str, None] = {}
    for token in tokens:
        seen.setdefault(token, None)
        if len(seen) >= MAX_QUERY_TERMS:
            break
    return list(seen)


def word_terms(query: str) -> list[str]:
    """The query's word tokens (``\\w+``), lower-cased, deduplicated, at most 32."""
    tokens = ascii_words(query)
    return _distinct(
        token.lower() for token in (_WORD_RE.findall(query) if tokens is None else tokens)
    )


def looks_like_identifier(token: str) -> bool:
    """A path, a dotted or snake/kebab name, a camelCase name, or anything with a digit."""
    return (
        any(ch in _IDENT_PUNCT for ch in token)
        or any(ch.isdigit() for ch in token)
        or has_camel(token)
    )


def _identifier_tokens(text: str) -> Iterator[str]:
    """The tokens of ``text`` (runs without whitespace, quotes, brackets, ``,;|``, stripped
    of ``.:!?=`` at both ends) that look like identifiers or paths, at least 3 chars."""
    runs = candidate_runs(text) if len(text) <= _SCAN_MAX else None
    for raw in _CANDIDATE_RE.findall(text) if runs is None else runs:
        token = raw.strip(".:!?=")
        if len(token) < 3:
            continue
        # a token of letters only can look like an identifier by an inner capital alone
        if has_camel(token) if token.isalpha() else looks_like_identifier(token):
            yield token


def identifier_terms(query: str) -> list[str]:
    """The query's identifier- and path-like tokens, deduplicated, at most 32: what the
    trigram arm searches for."""
    return _distinct(_identifier_tokens(query))


def trigram_terms(query: str) -> list[str]:
    """:func:`identifier_terms` but the hyphenated words (``scout-report``), which the word
    arm already searches as their words (ADR 0021)."""
    return [term for term in identifier_terms(query) if not _kebab_words(term) or has_camel(term)]


def _kebab_words(term: str) -> bool:
    """Whether ``_KEBAB_WORDS_RE`` matches the whole ``term``."""
    plain = kebab_words(term)
    return _KEBAB_WORDS_RE.fullmatch(term) is not None if plain is None else plain


def identifier_text(text: str) -> str:
    """What the trigram index holds of a text: its identifier- and path-like tokens, in
    order, one space apart; every occurrence of a query term lies inside one (ADR 0021)."""
    return " ".join(_identifier_tokens(text))


def fts_or(terms: Iterable[str]) -> str:
    """An FTS5 query: each term as a quoted phrase, OR-ed."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def selectivity(n_hits: int, fetch_limit: int, n_scoped: int) -> float:
    """The server's rule: 0 when the arm is empty or censored (filled its fetch), else
    ``1 - hits / scoped``."""
    if n_hits == 0 or n_hits >= fetch_limit or n_scoped <= 0:
        return 0.0
    return max(0.0, 1.0 - n_hits / n_scoped)


def rrf_fuse(
    arms: Sequence[tuple[float, Sequence[str]]], k_rrf: int = RRF_K
) -> list[tuple[str, float]]:
    """Weighted reciprocal-rank fusion: ``score(id) = sum(w / (k_rrf + rank))``, ranks from
    1, ordered by score descending then id ascending."""
    scores: dict[str, float] = {}
    for weight, ranked in arms:
        for rank, ident in enumerate(ranked, start=1):
            scores[ident] = scores.get(ident, 0.0) + weight / (k_rrf + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


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
    return sha256_hex(jsontext.dumps(parts).encode())  # json.dumps(parts, ensure_ascii=True)


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


DB_NAME: Final = "memory.sqlite3"
CREATION_LOCK: Final = ".create.lock"
SCHEMA_VERSION: Final = "3"
"""1: the first store; 2: ``crystals.handoff_key`` (ADR 0021); 3: the trigram index holds
identifier-like tokens only, and the scope index covers every scope column (ADR 0021)."""
UPGRADABLE: Final = frozenset({"1", "2"})


class SchemaError(sqlite3.DatabaseError):
    """The store's schema is one this code cannot use (newer than it knows)."""


def _fts_index(name: str, tokenize: str, columns: tuple[str, str]) -> str:
    """An external-content FTS5 index over two columns of ``crystals``, with its triggers."""
    cols = ", ".join(columns)
    new = ", ".join(f"new.{c}" for c in columns)
    old = ", ".join(f"old.{c}" for c in columns)
    return f"""
CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING fts5 (
    {cols}, content='crystals', content_rowid='rowid', tokenize='{tokenize}'
);
CREATE TRIGGER IF NOT EXISTS {name}_ai AFTER INSERT ON crystals BEGIN
    INSERT INTO {name} (rowid, {cols}) VALUES (new.rowid, {new});
END;
CREATE TRIGGER IF NOT EXISTS {name}_ad AFTER DELETE ON crystals BEGIN
    INSERT INTO {name} ({name}, rowid, {cols}) VALUES ('delete', old.rowid, {old});
END;
CREATE TRIGGER IF NOT EXISTS {name}_au AFTER UPDATE OF {cols} ON crystals
BEGIN
    INSERT INTO {name} ({name}, rowid, {cols}) VALUES ('delete', old.rowid, {old});
    INSERT INTO {name} (rowid, {cols}) VALUES (new.rowid, {new});
END;
"""


_TABLES: Final = (
    """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS crystals (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    layer TEXT NOT NULL,
    summary TEXT NOT NULL,
    body_excerpt TEXT NOT NULL DEFAULT '',
    project TEXT NOT NULL,
    project_raw TEXT,
    agent_class_visibility TEXT,
    sensitivity_tag TEXT NOT NULL DEFAULT 'internal',
    trust_tier TEXT NOT NULL,
    validation_state TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'active',
    importance REAL NOT NULL,
    message_id TEXT,
    artifact_sha256 TEXT,
    content_ref TEXT NOT NULL,
    payload_json TEXT NOT NULL,
    created_at TEXT NOT NULL,
    t_valid_from TEXT NOT NULL,
    t_valid_to TEXT,
    superseded_by TEXT,
    last_access TEXT NOT NULL,
    access_count INTEGER NOT NULL DEFAULT 0,
    handoff_key TEXT,
    tri_body TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX IF NOT EXISTS crystals_idem
    ON crystals (project, message_id, artifact_sha256) WHERE message_id IS NOT NULL;
"""
    + _fts_index("crystals_fts", "unicode61", ("summary", "body_excerpt"))
    + "CREATE VIRTUAL TABLE IF NOT EXISTS crystals_vocab USING fts5vocab (crystals_fts, 'row');\n"
)

#: Columns added after schema 1, in order (a fresh table has them already).
_ADDED_COLUMNS: Final = (
    ("handoff_key", "TEXT"),
    ("tri_body", "TEXT NOT NULL DEFAULT ''"),
)
_INDEXES: Final = (
    "CREATE UNIQUE INDEX IF NOT EXISTS crystals_handoff"
    " ON crystals (project, handoff_key) WHERE handoff_key IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS crystals_live"
    " ON crystals (project, status, layer, t_valid_to, agent_class_visibility)",
    "DROP INDEX IF EXISTS crystals_scope",  # schema <= 2: (project, status, layer)
)
_TRIGRAM: Final = _fts_index("crystals_tri", "trigram", ("summary", "tri_body"))
_DROP_TRIGRAM: Final = (
    "DROP TRIGGER IF EXISTS crystals_tri_ai",
    "DROP TRIGGER IF EXISTS crystals_tri_ad",
    "DROP TRIGGER IF EXISTS crystals_tri_au",
    "DROP TABLE IF EXISTS crystals_tri",
)


class creation_lock:  # a class, not contextlib's: no contextlib at open
    """``with creation_lock(store_dir):`` an exclusive ``flock`` on the creation lock,
    waited for until the trace timeout (:class:`eidolons.io.files.LockTimeout`)."""

    __slots__ = ("_fd", "_path")

    def __init__(self, store_dir: str | os.PathLike[str]) -> None:
        self._path = os.path.join(os.fspath(store_dir), CREATION_LOCK)
        self._fd = -1

    def __enter__(self) -> None:
        # never through a planted link (the gate's state, ADR 0021)
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        try:
            flock_until(fd, deadline(), self._path)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def __exit__(self, *exc: object) -> None:
        fd, self._fd = self._fd, -1
        os.close(fd)  # releases the lock


def _ensure_wal(conn: sqlite3.Connection) -> None:
    """Set WAL (persistent in the file) when it is not set yet; under the creation lock."""
    mode = conn.execute("PRAGMA journal_mode").fetchone()
    if mode is None or str(mode[0]).lower() != "wal":
        conn.execute("PRAGMA journal_mode = WAL")


def stored_version(conn: sqlite3.Connection) -> str | None:
    """The store's ``schema_version``, or None when it has none (not created yet)."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.OperationalError:  # no meta table yet
        return None
    return None if row is None else str(row[0])


def has_trigram(conn: sqlite3.Connection) -> bool:
    row = conn.execute("SELECT value FROM meta WHERE key = 'trigram'").fetchone()
    return row is not None and str(row[0]) == "1"


def ready(conn: sqlite3.Connection, *, create: bool, store_dir: str | os.PathLike[str]) -> bool:
    """Bring the store to :data:`SCHEMA_VERSION`: create it (``create``), upgrade it or
    leave it. False when there is none and not ``create``; :class:`SchemaError` when newer."""
    version = stored_version(conn)
    if version == SCHEMA_VERSION:
        return True
    if version is None and not create:
        return False
    if version is not None and version not in UPGRADABLE:
        raise SchemaError(f"memory store schema {version!r} is newer than this eidolons knows")
    with creation_lock(store_dir):
        _ensure_wal(conn)
        version = stored_version(conn)  # another process may have done it meanwhile
        if version == SCHEMA_VERSION:
            return True
        if version is not None and version not in UPGRADABLE:
            raise SchemaError(f"memory store schema {version!r} is newer than this eidolons knows")
        _build(conn)
    return True


def _build(conn: sqlite3.Connection) -> None:
    """Create or upgrade the schema, in one transaction."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in split_sql(_TABLES):
            conn.execute(statement)
        columns = {row[1] for row in conn.execute("PRAGMA table_info(crystals)")}
        for name, decl in _ADDED_COLUMNS:
            if name not in columns:  # an older store
                conn.execute(f"ALTER TABLE crystals ADD COLUMN {name} {decl}")
        for statement in _INDEXES:
            conn.execute(statement)
        trigram = _build_trigram(conn)
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('trigram', ?)", (trigram,))
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
            (SCHEMA_VERSION,),
        )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _build_trigram(conn: sqlite3.Connection) -> str:
    """(Re)build the trigram index from every row's identifier tokens, dropping an older
    one first; ``"0"`` when SQLite has no trigram tokenizer (< 3.34), else ``"1"``."""
    for statement in _DROP_TRIGRAM:
        conn.execute(statement)
    rows = conn.execute("SELECT rowid, body_excerpt FROM crystals").fetchall()
    conn.executemany(
        "UPDATE crystals SET tri_body = ? WHERE rowid = ?",
        [(identifier_text(body), rowid) for rowid, body in rows],
    )
    try:
        conn.execute("SAVEPOINT tri")
        for statement in split_sql(_TRIGRAM):
            conn.execute(statement)
        conn.execute("INSERT INTO crystals_tri (crystals_tri) VALUES ('rebuild')")
        conn.execute("RELEASE tri")
    except sqlite3.OperationalError:  # SQLite < 3.34 has no trigram tokenizer
        conn.execute("ROLLBACK TO tri")
        conn.execute("RELEASE tri")
        return "0"
    return "1"


def split_sql(script: str) -> list[str]:
    """Statements of a schema script (triggers keep their inner semicolons)."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                statements.append(buffer.strip())
            buffer = ""
    return statements


PREFETCH_FACTOR: Final = 10
PREFETCH_MIN: Final = 300
"""An arm ranks its best ``max(PREFETCH_FACTOR x fetch, PREFETCH_MIN)`` matches before
the scope is judged; past them it runs over every match (ADR 0022)."""
LOOKUP_MAX: Final = 500  # ranked rows looked up per statement (SQLite's oldest limit: 999)
WAL_CHECKPOINT_PAGES: Final = 4000  # fewer checkpoints, each two fsyncs (ADR 0021)
PRUNE_MIN_DOCS: Final = 1000


def _new_id() -> str:
    """A new record id (``uuid`` imports ``platform``: not for a recall or a merge, ADR 0022)."""
    import uuid

    return str(uuid.uuid4())


_RECORD_COLUMNS: Final = (
    "id, layer, summary, trust_tier, validation_state, importance, last_access, content_ref, "
    "sensitivity_tag"
)


class _Scope:
    """Which rows a recall may see (a plain class: no :mod:`dataclasses` at open)."""

    __slots__ = ("layers", "project", "visibility")

    def __init__(self, project: str, visibility: str | None, layers: tuple[str, ...]) -> None:
        self.project = project
        self.visibility = visibility
        self.layers = layers

    def where(self, alias: str = "c") -> tuple[str, list[Any]]:
        marks = ", ".join("?" for _ in self.layers)
        sql = (
            f"{alias}.project = ? AND {alias}.status = 'active' AND {alias}.t_valid_to IS NULL "
            f"AND {alias}.layer IN ({marks})"
        )
        params: list[Any] = [self.project, *self.layers]
        if self.visibility is not None:
            sql += (
                f" AND ({alias}.agent_class_visibility IS NULL"
                f" OR {alias}.agent_class_visibility IN ('all', ?))"
            )
            params.append(self.visibility)
        return sql, params


class LocalMemory:
    """The embedded backend. Thread-safe; one SQLite connection per object, opened lazily."""

    backend = BACKEND_LOCAL

    def __init__(
        self, store_dir: str | os.PathLike[str], *, project: str, limits: LocalLimits | None = None
    ) -> None:
        # strings inside: no pathlib at open (ADR 0021)
        self._dir = os.fspath(store_dir)
        self._db = os.path.join(self._dir, DB_NAME)
        self._project = project
        self.limits = limits or LocalLimits()
        self._conn: sqlite3.Connection | None = None
        self._has_trigram = False
        self._lock = RLock()

    @property
    def store_dir(self) -> Path:
        from pathlib import Path

        return Path(self._dir)

    @property
    def path(self) -> Path:
        """The store's SQLite file."""
        from pathlib import Path

        return Path(self._db)

    @property
    def project(self) -> str:
        return self._project

    # -- connection ---------------------------------------------------------------------

    def _connection(self, *, create: bool) -> sqlite3.Connection | None:
        if self._conn is not None:
            return self._conn
        if not create and not os.path.exists(self._db):
            return None
        if create:
            os.makedirs(self._dir, exist_ok=True)
        _refuse_links(self._dir, self._db)
        conn = sqlite3.connect(
            self._db,
            timeout=self.limits.busy_timeout_ms / 1000,
            isolation_level=None,
            check_same_thread=False,
        )
        try:
            # the journal mode is set under the creation lock only (ADR 0021)
            conn.execute(f"PRAGMA busy_timeout = {int(self.limits.busy_timeout_ms)}")
            # durable against the process's death, not a power cut, as the trace (ADR 0021)
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}")
            if not ready(conn, create=create, store_dir=self._dir):
                conn.close()
                return None
            self._has_trigram = has_trigram(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> LocalMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- ingest -------------------------------------------------------------------------

    def ingest(
        self,
        envelope: Mapping[str, Any],
        payload: Any,
        *,
        payload_encoding: str = "utf8",
        gated: bool = False,
    ) -> dict[str, Any]:
        """The CRYSTALIUM ``ingest`` tool: the stored or merged crystal, or a refusal.
        ``gated``: the hand-off passed both gates (stored ``validated``, ADR 0021)."""
        if payload is None:
            return input_error("'payload' is a required property", self.backend)
        if not isinstance(payload, bytes | bytearray | memoryview | str | Mapping | list):
            return input_error(f"{payload!r} is not of type 'object', 'string'", self.backend)
        if payload_encoding not in ("utf8", "base64", "json"):
            return input_error(
                f"{payload_encoding!r} is not one of ['utf8', 'base64', 'json']", self.backend
            )
        refusal = validate_envelope(envelope, payload)
        if refusal is not None:
            return error_result(refusal[0], refusal[1], self.backend)
        try:
            with self._lock:
                return self._ingest(envelope, payload, payload_encoding, gated)
        except (sqlite3.Error, OSError) as exc:
            return skipped_ingest(f"local store unavailable: {exc}")

    def _ingest(
        self, envelope: Mapping[str, Any], payload: Any, payload_encoding: str, gated: bool
    ) -> dict[str, Any]:
        artifact, sender = envelope["artifact"], envelope["from"]
        tier = trust_tier(envelope)
        state = validation_state(tier, gated)
        key = handoff_key(envelope)
        kind, objective = str(artifact["kind"]), str(envelope["objective"])
        message_id, sha = str(envelope["message_id"]), str(artifact["sha256"])
        version = str(envelope["envelope_version"])
        thread_id = envelope.get("thread_id")
        project_raw = str(thread_id) if thread_id else f"eidolon:{sender['eidolon']}"
        conn = self._connection(create=True)
        assert conn is not None
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute(
                "SELECT id, trust_tier, validation_state FROM crystals WHERE project = ?"
                " AND ((message_id = ? AND artifact_sha256 = ?) OR handoff_key = ?)"
                " ORDER BY rowid LIMIT 1",
                (self.project, message_id, sha, key),
            ).fetchone()
            if row is None:  # the crystal is built only to be stored (a merge needs none)
                native, excerpt, notes = decode_payload(payload, payload_encoding, self.limits)
                now = _now()
                created_at = _parse_ts(_get(envelope, "trace.ts")) or now
                crystal: dict[str, Any] = {
                    "summary": summary_of(kind, objective, self.limits.summary_chars),
                    "scope": {
                        "project": self.project,
                        "project_raw": project_raw,
                        "sensitivity_tag": "internal",
                    },
                    "provenance": {
                        "source": provenance_source(tier),
                        "author_agent": sender["eidolon"],
                        "task_id": thread_id,
                        "created_at": created_at,
                    },
                    "tags": [kind, f"from:{sender['eidolon']}", f"env:{version}"],
                    "encoding_context": {
                        "native_artifact": native,
                        "envelope_version": version,
                        "artifact_kind": kind,
                        "artifact_schema_version": artifact.get("schema_version"),
                        "source_thread_id": thread_id,
                        "source_message_id": message_id,
                        "source_performative": envelope.get("performative"),
                        **notes,
                    },
                }
                import json  # a new crystal only: a merge imports no json (ADR 0021)

                blob = json.dumps(crystal, ensure_ascii=False, sort_keys=True, default=str)
                ident = _new_id()
                conn.execute(
                    "INSERT INTO crystals (id, layer, summary, body_excerpt, project, project_raw,"
                    " agent_class_visibility, sensitivity_tag, trust_tier, validation_state,"
                    " status, importance, message_id, artifact_sha256, content_ref,"
                    " payload_json, created_at, t_valid_from, last_access, access_count,"
                    " handoff_key, tri_body)"
                    " VALUES (?, 'episodic', ?, ?, ?, ?, NULL, 'internal', ?, ?, 'active', ?,"
                    " ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)",
                    (
                        ident,
                        crystal["summary"],
                        excerpt,
                        self.project,
                        project_raw,
                        tier,
                        state,
                        self.limits.importance_cold_start,
                        message_id,
                        sha,
                        sha256_hex(blob.encode("utf-8")),
                        blob,
                        created_at,
                        now,
                        now,
                        key,
                        identifier_text(excerpt),
                    ),
                )
                stored, commit_status = (ident, tier, state), "committed"
            else:
                stored, commit_status = (str(row[0]), str(row[1]), str(row[2])), "merged"
                if state == "validated" and stored[2] == "unverified":  # now both gates passed
                    conn.execute(
                        "UPDATE crystals SET validation_state = ? WHERE id = ?", (state, stored[0])
                    )
                    stored = (stored[0], stored[1], state)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        result: dict[str, Any] = {
            "status": "ingested",
            "id": stored[0],
            "layer": "episodic",
            "trust_tier": stored[1],
            "validation_state": stored[2],
            "source_eidolon": sender["eidolon"],
            "artifact_kind": kind,
            "envelope_version": version,
            "commit_status": commit_status,
        }
        if project_raw != self.project:
            result["scope_normalized"] = True
        result["backend"] = self.backend
        return result

    # -- recall -------------------------------------------------------------------------

    def recall(
        self,
        scope: Mapping[str, Any],
        query: str,
        k: int = 5,
        layers: Sequence[str] | None = None,
        *,
        explain: bool = False,
    ) -> dict[str, Any]:
        """The CRYSTALIUM ``recall`` tool: the ranked, packed records, or a refusal."""
        problem, chosen = check_recall_args(scope, query, k, layers)
        if problem is not None:
            return input_error(problem, self.backend)
        try:
            with self._lock:
                return self._recall(scope, query, k, chosen, explain)
        except (sqlite3.Error, OSError) as exc:
            return skipped_recall(f"local store unavailable: {exc}", k)

    def _recall(
        self,
        scope: Mapping[str, Any],
        query: str,
        k_requested: int,
        layers: tuple[str, ...],
        explain: bool,
    ) -> dict[str, Any]:
        k = clamp_k(k_requested)
        conn = self._connection(create=False)
        if conn is None:  # nothing ingested yet: no store, and none created by a read
            return empty_recall(k_requested, k, self.backend)
        where = _Scope(
            project=scope.get("project") or self.project,
            visibility=scope.get("agent_class_visibility"),
            layers=layers,
        )
        fused, info = self._rank(conn, where, query, k, arms=("words", "trigram"))
        chosen = fused[:k]
        rows = self._rows(conn, [ident for ident, _ in chosen])
        records: list[dict[str, Any]] = []
        slots = dict.fromkeys(SLOT_CAPS, 0)
        total = evicted = 0
        for ident, score in chosen:
            row = rows.get(ident)
            if row is None:
                continue
            summary = redact(row["summary"], row["sensitivity_tag"])
            cost = estimate_tokens(summary)
            slot = row["layer"]
            if slots[slot] + cost > SLOT_CAPS[slot] or total + cost > TOTAL_TOKEN_CAP:
                evicted += 1
                continue
            slots[slot] += cost
            total += cost
            records.append(
                {
                    "id": ident,
                    "layer": row["layer"],
                    "summary": summary,
                    "trust_tier": row["trust_tier"],
                    "validation_state": row["validation_state"],
                    "importance": row["importance"],
                    "last_access": row["last_access"],
                    "content_ref": row["content_ref"],
                    "score": score,
                }
            )
        self._touch(conn, [record["id"] for record in records])
        result = empty_recall(k_requested, k, self.backend)
        result.update(
            records=records,
            slot_breakdown=slots,
            total_tokens=total,
            evicted_count=evicted,
        )
        result["budget"]["truncated_count"] = max(0, len(fused) - k)
        if explain:
            result["explain"] = self._explain(conn, where, info, k, len(fused))
        result["backend"] = result.pop("backend")  # keep "backend" last
        return result

    def _rank(
        self,
        conn: sqlite3.Connection,
        where: _Scope,
        query: str,
        k: int,
        *,
        arms: tuple[str, ...],
    ) -> tuple[list[tuple[str, float]], dict[str, Any]]:
        fetch = max(3 * k, 30)
        sql_where, params = where.where("c")
        ranked: list[tuple[str, list[str]]] = []
        words = self._informative(conn, word_terms(query)) if "words" in arms else []
        if words:
            ranked.append(("bm25", self._arm(conn, "crystals_fts", fts_or(words), where, fetch)))
        idents = trigram_terms(query) if "trigram" in arms and self._has_trigram else []
        if idents:
            ranked.append(
                ("trigram", self._arm(conn, "crystals_tri", fts_or(idents), where, fetch))
            )
        n_scoped = 0
        if any(0 < len(ids) < fetch for _, ids in ranked):
            n_scoped = int(
                conn.execute(
                    f"SELECT count(*) FROM crystals c WHERE {sql_where}", params
                ).fetchone()[0]
            )
        weighted: list[tuple[float, list[str]]] = []
        info: dict[str, Any] = {"fetch_width": fetch, "n_scoped": n_scoped, "arms": {}}
        for name, ids in ranked:
            sel = selectivity(len(ids), fetch, n_scoped)
            weighted.append((1.0 + sel, ids))
            info["arms"][name] = {"n": len(ids), "selectivity": sel, "weight": 1.0 + sel}
        info["terms"] = {"words": words, "identifiers": idents}
        return rrf_fuse(weighted), info

    @staticmethod
    def _informative(conn: sqlite3.Connection, terms: list[str]) -> list[str]:
        """Drop query words in at least half of the crystals of a store of at least
        ``PRUNE_MIN_DOCS``, while a word in fewer remains: BM25 gives them no weight, yet
        each pulls nearly every row into the candidates."""
        if len(terms) <= 1:
            return terms
        # the word index's own document count, the N of its BM25: a quarter of the pages
        # a count of ``crystals`` reads (ADR 0022)
        (total,) = conn.execute("SELECT count(*) FROM crystals_fts_docsize").fetchone()
        if total < PRUNE_MIN_DOCS:
            return terms
        half = (total + 1) // 2  # df >= half  <=>  df * 2 >= total
        df = _document_frequencies(conn, terms, half)
        kept = [term for term in terms if df.get(term, 0) < half]
        if not any(df.get(term, 0) for term in kept):
            return terms  # nothing informative left: rank on everything
        return kept

    def _arm(
        self, conn: sqlite3.Connection, table: str, match: str, where: _Scope, fetch: int
    ) -> list[str]:
        """One arm's first ``fetch`` in-scope matches by (score, id), as one query over
        every match would rank them, in fewer reads (ADR 0022): the FTS table ranks alone,
        the best rows are looked up ``fetch`` at a time until the answer is certain, and
        past the prefetched rows the arm runs once over every match."""
        order = f"bm25({table}, 5.0, 1.0)"
        limit = max(PREFETCH_FACTOR * fetch, PREFETCH_MIN)
        ranked = self._search(
            conn,
            f"SELECT rowid, {order} AS s FROM {table} WHERE {table} MATCH ? ORDER BY s LIMIT ?",
            [match, limit],
        )
        complete = len(ranked) < limit  # every match is in ``ranked``
        sql_where, params = where.where("c")
        found: list[tuple[float, str]] = []
        rest = 0
        while rest < len(ranked):
            start, rest = rest, min(rest + fetch, len(ranked))
            while (
                rest < len(ranked)
                and rest - start < LOOKUP_MAX
                and ranked[rest][1] == ranked[rest - 1][1]
            ):
                rest += 1  # a run of equal scores is looked up whole: ids order it
            chunk = ranked[start:rest]
            marks = ", ".join("?" for _ in chunk)
            scores = dict(chunk)
            found += [
                (scores[rowid], ident)
                for rowid, ident in conn.execute(
                    # by rowid: left to itself the planner scans the scope index instead
                    f"SELECT c.rowid, c.id FROM crystals c NOT INDEXED WHERE c.rowid IN ({marks})"
                    f" AND {sql_where}",
                    [*scores, *params],
                )
            ]
            found.sort()
            if rest >= len(ranked):  # looked up all: unranked matches score >= the last
                if complete or (len(found) >= fetch and found[fetch - 1][0] < ranked[-1][1]):
                    return [str(ident) for _, ident in found[:fetch]]
                break
            if len(found) >= fetch and found[fetch - 1][0] < ranked[rest][1]:
                return [str(ident) for _, ident in found[:fetch]]
        return [
            str(ident)
            for (ident,) in self._search(
                conn,
                f"SELECT c.id FROM {table} f JOIN crystals c ON c.rowid = f.rowid"
                f" WHERE {table} MATCH ? AND {sql_where} ORDER BY {order}, c.id LIMIT ?",
                [match, *params, fetch],
            )
        ]

    @staticmethod
    def _search(conn: sqlite3.Connection, sql: str, params: list[Any]) -> list[Any]:
        try:
            return conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            if "fts5" in str(exc) or "syntax" in str(exc):  # an odd query: no matches
                return []
            raise

    @staticmethod
    def _rows(conn: sqlite3.Connection, ids: list[str]) -> dict[str, dict[str, Any]]:
        if not ids:
            return {}
        marks = ", ".join("?" for _ in ids)
        cursor = conn.execute(f"SELECT {_RECORD_COLUMNS} FROM crystals WHERE id IN ({marks})", ids)
        names = [column[0] for column in cursor.description]
        return {row[0]: dict(zip(names, row, strict=True)) for row in cursor}

    def _touch(self, conn: sqlite3.Connection, ids: list[str]) -> None:
        """Recall writes, as on the server; a store we cannot write to is still readable."""
        if not ids:
            return
        marks = ", ".join("?" for _ in ids)
        try:
            conn.execute(
                "UPDATE crystals SET access_count = access_count + 1, last_access = ?"
                f" WHERE id IN ({marks})",
                [_now(), *ids],
            )
        except sqlite3.OperationalError:  # read-only or busy past the timeout
            pass

    def _explain(
        self,
        conn: sqlite3.Connection,
        where: _Scope,
        info: dict[str, Any],
        k: int,
        n_fused: int,
    ) -> dict[str, Any]:
        total, active = _counts(conn)
        keys = [row[0] for row in conn.execute("SELECT DISTINCT project FROM crystals")]
        arms = info["arms"]
        return {
            "candidates_prefilter": n_fused,
            "filtered_by_status": 0,
            "filtered_by_scope": 0,
            "arms": {
                "bm25": "on",
                "trigram": "on" if self._has_trigram else "off(no_tokenizer)",
                "dense": "inactive(null_vector_store)",
                "graph": "off",
            },
            "store": {"total_crystals": total, "active": active, "embedded": 0},
            "project_keys_present": sorted(keys),
            "k_applied": k,
            "truncated_by_k": n_fused > k,
            "fusion": {
                "weighted": True,
                "k_rrf": RRF_K,
                "w_sparse": arms.get("bm25", {}).get("weight", 0.0),
                "w_trigram": arms.get("trigram", {}).get("weight", 0.0),
                "n_sparse": arms.get("bm25", {}).get("n", 0),
                "n_trigram": arms.get("trigram", {}).get("n", 0),
                "n_scoped": info["n_scoped"],
                "fetch_width": info["fetch_width"],
                "terms": info["terms"],
                "filters": "applied in SQL before ranking",
                "scope": {"project": where.project, "agent_class_visibility": where.visibility},
            },
        }

    # -- stats --------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        base: dict[str, Any] = {
            "backend": self.backend,
            "path": str(self.path),
            "project": self.project,
        }
        try:
            with self._lock:
                conn = self._connection(create=False)
                if conn is None:
                    return {**base, "status": "empty", "crystals": 0}
                total, active = _counts(conn)
                by_layer = dict(
                    conn.execute("SELECT layer, count(*) FROM crystals GROUP BY layer").fetchall()
                )
                by_tier = dict(
                    conn.execute(
                        "SELECT trust_tier, count(*) FROM crystals GROUP BY trust_tier"
                    ).fetchall()
                )
                by_state = dict(
                    conn.execute(
                        "SELECT validation_state, count(*) FROM crystals GROUP BY validation_state"
                    ).fetchall()
                )
        except (sqlite3.Error, OSError) as exc:
            return {**base, "status": "unavailable", "reason": str(exc)}
        files = self.store_dir.glob(DB_NAME + "*")
        size = sum(p.stat().st_size for p in files if p.is_file())
        return {
            **base,
            "status": "ok",
            "crystals": total,
            "active": active,
            "by_layer": by_layer,
            "by_trust_tier": by_tier,
            "by_validation_state": by_state,
            "trigram": self._has_trigram,
            "bytes": size,
            "schema_version": SCHEMA_VERSION,
        }


def _counts(conn: sqlite3.Connection) -> tuple[int, int]:
    """The store's crystals, all and active (not archived nor superseded)."""
    row = conn.execute(
        "SELECT count(*), coalesce(sum(status = 'active' AND t_valid_to IS NULL), 0) FROM crystals"
    ).fetchone()
    return int(row[0]), int(row[1])


def _document_frequencies(conn: sqlite3.Connection, terms: list[str], cap: int) -> dict[str, int]:
    """How many crystals hold each word, exact below ``cap``: a plain word is counted on
    the word index, stopping at the cap; any other (one the tokenizer splits or folds) is
    looked up in the vocabulary under its own spelling."""
    df: dict[str, int] = {}
    others = []
    for term in terms:
        if plain_term(term):  # a word unicode61 keeps as it is (ASCII [a-z0-9]+)
            (df[term],) = conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM crystals_fts WHERE crystals_fts MATCH ?"
                " LIMIT ?)",
                (fts_or([term]), cap),
            ).fetchone()
        else:
            others.append(term)
    if others:
        marks = ", ".join("?" for _ in others)
        df.update(
            conn.execute(f"SELECT term, doc FROM crystals_vocab WHERE term IN ({marks})", others)
        )
    return df


def _refuse_links(store_dir: str, db: str) -> None:
    """Raise :class:`OSError` when the store's directory or a file of its database is a
    link or not of its kind: the gate's state is never reached through a link (ADR 0021).
    The store is then unavailable: memory is skipped, the verdict unchanged."""
    st = os.lstat(store_dir)
    if st.st_mode & 0o170000 != 0o040000:
        raise OSError(f"{store_dir} is a link or not a directory")
    for name in (db, db + "-wal", db + "-shm", db + "-journal"):
        try:
            st = os.lstat(name)
        except FileNotFoundError:
            continue
        if st.st_mode & 0o170000 != 0o100000:
            raise OSError(f"{name} is a link or not a regular file")
