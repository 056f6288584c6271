"""The local store's pure rules (``crystalium.md`` §2-3): how a verified hand-off becomes
a crystal (refusals, trust tier, validation state, payload decoding within bounds) and how
a recall ranks and packs (query terms, selectivity, weighted reciprocal-rank fusion, the
token budget, redaction).

The text rules run as plain scans, so a recall or a merge imports no :mod:`re` (ADR 0022):
each scan gives its :class:`LazyPattern`'s exact answer or None (then the pattern decides),
as ``tests/memory/test_memory_textscan.py`` checks.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence

from eidolons.ecl import grammar
from eidolons.ecl.envelope import REQUIRED_FIELDS  # the same eleven as the envelope model
from eidolons.ecl.grammar import is_hex64
from eidolons.ecl.integrity import sha256_hex  # builtin SHA-256 first: no OpenSSL at open
from eidolons.memory import (
    INGEST_BAD_ENVELOPE,
    INGEST_PAYLOAD_HASH_MISMATCH,
    SLOT_CAPS,
    TOTAL_TOKEN_CAP,
    UNSUPPORTED_ENVELOPE_VERSION,
    Frozen,
)

TYPE_CHECKING = False  # as typing.TYPE_CHECKING: typing is not imported at memory open
if TYPE_CHECKING:
    import re
    from typing import Any, Final


class LazyPattern:
    """A regular expression compiled on first use (:meth:`compiled`)."""

    __slots__ = ("_compiled", "pattern")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._compiled: re.Pattern[str] | None = None

    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            import re

            self._compiled = re.compile(self.pattern)
        return self._compiled


_LOWER: Final = frozenset("abcdefghijklmnopqrstuvwxyz")
_UPPER: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_DIGITS: Final = frozenset("0123456789")
_LOWER_OR_DIGIT: Final = _LOWER | _DIGITS
_WORD_ASCII: Final = _LOWER | _UPPER | _DIGITS | {"_"}
_NON_WORD_TO_SPACE: Final = {c: " " for c in range(128) if chr(c) not in _WORD_ASCII}
# the separators of a raw token that are not whitespace (whitespace is str.split's, the
# same Py_UNICODE_ISSPACE as the patterns' \s)
_SEPARATORS_TO_SPACE: Final = str.maketrans(dict.fromkeys("\"'`()[]{}<>,;|", " "))


def ascii_words(text: str) -> list[str] | None:
    """``re.findall(r"\\w+", text)`` for an ASCII ``text``, else None."""
    return text.translate(_NON_WORD_TO_SPACE).split() if text.isascii() else None


def candidate_runs(text: str) -> list[str] | None:
    """For an ASCII ``text``, what :data:`_CANDIDATE_RE` finds (maximal runs of
    non-separators not of lower-case letters only), else None."""
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
    """``re.fullmatch("(?i)[a-z]+(?:-[a-z]+)+", term)`` for an ASCII ``term``, else None
    (case folding reaches past ASCII)."""
    if not term.isascii():
        return None
    parts = term.split("-")
    return len(parts) >= 2 and all(part.isalpha() for part in parts)


def plain_term(term: str) -> bool:
    """``re.fullmatch("[a-z0-9]+", term)`` (ASCII classes: exact for any text)."""
    return bool(term) and all(ch in _LOWER_OR_DIGIT for ch in term)


def envelope_version(text: str) -> bool | None:
    """``re.fullmatch(r"[12](\\.\\d+){1,2}", text)`` for an ASCII ``text``, else None."""
    if not text.isascii():
        return None
    if text[:1] not in ("1", "2") or text[1:2] != ".":
        return False
    parts = text[2:].split(".")
    return len(parts) <= 2 and all(part and all(ch in _DIGITS for ch in part) for part in parts)


def tier_digit(text: str) -> str | None:
    """The digit of ``re.fullmatch("[Tt]([0-3])", text)``, or None."""
    return text[1] if len(text) == 2 and text[0] in "Tt" and text[1] in "0123" else None


def _ssn_shape(text: str) -> bool:
    """Whether ``text`` holds ``ddd-dd-dddd`` (``\\d`` digits): the SSN pattern less its
    word boundaries."""
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
    """False only when the redaction pattern named ``rule`` cannot match ``text`` (it
    lacks the literal the pattern needs)."""
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
        token.lower()
        for token in (_WORD_RE.compiled().findall(query) if tokens is None else tokens)
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
    for raw in _CANDIDATE_RE.compiled().findall(text) if runs is None else runs:
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
    return _KEBAB_WORDS_RE.compiled().fullmatch(term) is not None if plain is None else plain


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


ARTIFACT_FIELDS: Final = ("kind", "schema_version", "path", "sha256", "size_bytes")
INTEGRITY_FIELDS: Final = ("method", "value")
AGENT_FIELDS: Final = ("eidolon", "version")
HOST_T0: Final = frozenset({"host", "host-llm", "cortex"})


ROSTER_T1: Final = frozenset(
    "atlas spectra apivr apivr-delta apivr-Δ idg forge vigil opus crystalium".split()
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
    (``busy_timeout_ms``), a new crystal's importance, and the seconds one call's SQL may
    run (``call_timeout_s``: a schema planted in the store can make a statement that never
    ends; SQLite interrupts it there)."""

    _fields = tuple(
        "excerpt_chars summary_chars native_max_bytes busy_timeout_ms importance_cold_start "
        "call_timeout_s".split()
    )
    __slots__ = _fields

    excerpt_chars: int
    summary_chars: int
    native_max_bytes: int
    busy_timeout_ms: int
    importance_cold_start: float
    call_timeout_s: float

    def __init__(
        self,
        excerpt_chars: int = 4096,
        summary_chars: int = 4096,
        native_max_bytes: int = 1024 * 1024,
        busy_timeout_ms: int = 5000,
        importance_cold_start: float = 0.30,
        call_timeout_s: float = 30.0,
    ) -> None:
        self._set(
            excerpt_chars,
            summary_chars,
            native_max_bytes,
            busy_timeout_ms,
            importance_cold_start,
            call_timeout_s,
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
        "message_id thread_id objective artifact.kind artifact.sha256 integrity.method "
        "integrity.value from.eidolon"
    ).split():
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


def trust_tier(envelope: Mapping[str, Any]) -> str:
    """MIN-trust: the identity tier, lowered (never raised) by a ``trace.tier`` of T0..T3."""
    name = str(_get(envelope, "from.eidolon")).lower()
    tier = "T0" if name in HOST_T0 else "T1" if name in ROSTER_T1 else "T3"
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


def raw_project(envelope: Mapping[str, Any]) -> str:
    """The scope a hand-off names (``project_raw``): its thread, else its sender."""
    thread_id = envelope.get("thread_id")
    return str(thread_id) if thread_id else f"eidolon:{envelope['from']['eidolon']}"


def new_crystal(
    envelope: Mapping[str, Any],
    project: str,
    payload: Any,
    encoding: str,
    limits: LocalLimits,
    now: str,
) -> tuple[dict[str, Any], str, str]:
    """A hand-off's new crystal, its searchable excerpt and its creation time (the
    envelope's ``trace.ts``, else ``now``)."""
    artifact, sender = envelope["artifact"], envelope["from"]
    kind, version = str(artifact["kind"]), str(envelope["envelope_version"])
    thread_id = envelope.get("thread_id")
    native, excerpt, notes = decode_payload(payload, encoding, limits)
    created_at = _parse_ts(_get(envelope, "trace.ts")) or now
    objective = str(envelope["objective"])
    summary = f"{kind}: {objective}" if objective.strip() else kind
    source = {"T0": "human", "T1": "verified_agent"}.get(trust_tier(envelope), "unverified_agent")
    crystal = {
        "summary": summary[: limits.summary_chars],
        "scope": {
            "project": project,
            "project_raw": raw_project(envelope),
            "sensitivity_tag": "internal",
        },
        "provenance": {
            "source": source,
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
            "source_message_id": str(envelope["message_id"]),
            "source_performative": envelope.get("performative"),
            **notes,
        },
    }
    return crystal, excerpt, created_at


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

            try:
                raw = base64.b64decode(payload, validate=True)
            except ValueError:  # binascii.Error is one
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


class Scope:
    """Which rows a recall may see, as SQL (a plain class: no :mod:`dataclasses` at open)."""

    __slots__ = ("layers", "project", "visibility")

    def __init__(self, project: str, visibility: str | None, layers: tuple[str, ...]) -> None:
        self.project = project
        self.visibility = visibility
        self.layers = layers

    def where(self) -> tuple[str, list[Any]]:
        marks = ", ".join("?" for _ in self.layers)
        sql = (
            "c.project = ? AND c.status = 'active' AND c.t_valid_to IS NULL "
            f"AND c.layer IN ({marks})"
        )
        params: list[Any] = [self.project, *self.layers]
        if self.visibility is not None:
            sql += " AND (c.agent_class_visibility IS NULL"
            sql += " OR c.agent_class_visibility IN ('all', ?))"
            params.append(self.visibility)
        return sql, params


def explanation(
    info: dict[str, Any], k: int, n_fused: int, store: dict[str, int], keys: list[str]
) -> dict[str, Any]:
    """A recall's ``explain`` block, as the server spells it (its ``fusion.scope`` is the
    caller's to add)."""
    arms = info["arms"]
    return {
        "candidates_prefilter": n_fused,
        "filtered_by_status": 0,
        "filtered_by_scope": 0,
        "arms": {
            "bm25": "on",
            "trigram": "on" if info["trigram"] else "off(no_tokenizer)",
            "dense": "inactive(null_vector_store)",
            "graph": "off",
        },
        "store": store,
        "project_keys_present": keys,
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
        },
    }


def pack(
    chosen: list[tuple[str, float]], rows: dict[str, dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, int], int, int]:
    """The records of the ranked ``chosen`` ids that fit the token budget, in order, their
    summaries redacted: ``(records, tokens per slot, tokens, evicted)``."""
    records: list[dict[str, Any]] = []
    slots = dict.fromkeys(SLOT_CAPS, 0)
    total = evicted = 0
    for ident, score in chosen:
        row = rows.get(ident)
        if row is None:
            continue
        tag = row.pop("sensitivity_tag")
        record = {**row, "summary": redact(row["summary"], tag)}
        cost = estimate_tokens(record["summary"])
        slot = row["layer"]
        if slots[slot] + cost > SLOT_CAPS[slot] or total + cost > TOTAL_TOKEN_CAP:
            evicted += 1
            continue
        slots[slot] += cost
        total += cost
        records.append({**record, "score": score})
    return records, slots, total, evicted


def redact(text: str, sensitivity: str | None) -> str:
    for rule, pattern, always in _REDACTIONS:
        if (always or (sensitivity or "internal") != "none") and may_redact(rule, text):
            text = pattern.compiled().sub(f"«REDACTED:{rule}»", text)
    return text


def _supported_version(version: str) -> bool:
    """Whether ``_VERSION_RE`` matches the whole ``version``."""
    plain = envelope_version(version)
    return _VERSION_RE.compiled().fullmatch(version) is not None if plain is None else plain
