"""The envelope's field rules (digest section 2), written once as a table.

:func:`schema_problems` walks the table for :meth:`eidolons.ecl.envelope.Envelope.schema_problems`
(the orchestrator gate's warnings, ``malformed`` under ``--strict``); the conformance gates
(E-2, E-4, E-8, S-1, S-4) decide with the same sets and predicates.
"""

from __future__ import annotations

from eidolons.ecl import grammar
from eidolons.ecl.grammar import is_placeholder, is_safe_relative_path

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    #: ``(key, when, check, message)``: ``when`` is ``in`` (key present), ``set`` (not
    #: null) or ``all``; ``check`` a predicate failing with ``message`` (``%r`` shows the
    #: value) or, with no message, a function ``(value, add)`` adding its own problems.
    Rule = tuple[str, str, Any, str | None]

PERFORMATIVES: frozenset[str] = frozenset(
    {
        "REQUEST",
        "INFORM",
        "PROPOSE",
        "CRITIQUE",
        "DECIDE",
        "DELEGATE",
        "ACKNOWLEDGE",
        "ESCALATE",
        "RESUME",
        "REFUSE",
    }
)
REQUIRED_FIELDS: tuple[str, ...] = (
    "envelope_version",
    "message_id",
    "thread_id",
    "parent_id",
    "from",
    "to",
    "performative",
    "objective",
    "artifact",
    "integrity",
    "trace",
)
OPTIONAL_FIELDS = frozenset(
    {"edge_origin", "context_delta", "constraints", "expected_response"}
    | {"confidence", "assumptions", "ise"}
)
EDGE_ORIGINS = frozenset({"roster", "composition", "implicit", "emitted-request"})
TRUST_LEVELS = frozenset({"low", "standard", "high"})
TIERS = frozenset({"standard", "trance"})
ASSERTION_GRADES = frozenset({"unverified", "self-attested", "validated", "human-reviewed"})
TRANSCRIPT_ACCESS = frozenset({"none", "artifact-only"})
AUTHZ_FIELDS = ("auto_route", "auto_merge", "auto_deploy")


def missing_fields(env: Mapping[str, Any]) -> list[str]:
    """The required fields absent or null (``parent_id`` may be null): schema and E-2."""
    return [f for f in REQUIRED_FIELDS if f not in env or (env[f] is None and f != "parent_id")]


def one_of(values: frozenset[str]) -> Callable[[Any], bool]:
    """A string in ``values`` (a non-string never is)."""
    return lambda v: isinstance(v, str) and v in values


is_performative = one_of(PERFORMATIVES)
is_tier = one_of(TIERS)
is_grade = one_of(ASSERTION_GRADES)
is_transcript_access = one_of(TRANSCRIPT_ACCESS)


def is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _keys(obj: Any, allowed: set[str]) -> bool:
    return isinstance(obj, dict) and not set(obj) - allowed


def _bools(obj: Any) -> bool:
    return not _keys(obj, set(AUTHZ_FIELDS)) or all(isinstance(v, bool) for v in obj.values())


def _handles(value: Any, add: Callable[[str], None]) -> None:
    for h in value if isinstance(value, list) else ():
        if not (isinstance(h, str) and (is_safe_relative_path(h) or grammar.is_message_handle(h))):
            add(f"context_delta.input_handles entry {h!r} is not a relative path or handle")


def _string(value: Any) -> bool:
    return isinstance(value, str)


class Obj:
    """An object's rules: ``required`` keys (missing when absent), ``allowed`` keys
    (None: any), and its :data:`Rule` table."""

    __slots__ = ("allowed", "label", "required", "rules", "unknown_first")

    def __init__(
        self,
        label: str,
        rules: tuple[Rule, ...],
        *,
        required: tuple[str, ...] = (),
        allowed: set[str] | None = None,
        unknown_first: bool = True,
    ) -> None:
        self.label, self.rules, self.required = label, rules, required
        self.allowed, self.unknown_first = allowed, unknown_first

    def __call__(self, obj: Any, add: Callable[[str], None]) -> None:
        """Add every problem of ``obj`` against these rules."""
        if not isinstance(obj, dict):
            add(f"{self.label} must be an object")
            return
        for key in self.required:
            if key not in obj:
                add(f"missing required field {self.label}.{key}")
        if self.unknown_first:
            self._unknown(obj, add)
        for key, when, check, message in self.rules:
            if (when == "in" and key not in obj) or (when == "set" and obj.get(key) is None):
                continue
            if message is None:
                check(obj.get(key), add)
            elif not check(obj.get(key)):
                add(message % (obj.get(key),) if "%r" in message else message)
        if not self.unknown_first:
            self._unknown(obj, add)

    def _unknown(self, obj: dict[str, Any], add: Callable[[str], None]) -> None:
        extra = set() if self.allowed is None else set(obj) - self.allowed
        if extra:
            add(f"{self.label} has unknown fields {sorted(extra)}")


def _agent(key: str) -> Obj:
    def named(e: Any) -> bool:
        return grammar.is_slug(e) or e in ("human", "orchestrator")

    return Obj(
        key,
        (
            ("eidolon", "all", named, f"{key}.eidolon %r is not a slug"),
            (
                "version",
                "all",
                grammar.is_agent_version,
                f"{key}.version must be MAJOR.MINOR.PATCH or n/a",
            ),
        ),
        allowed={"eidolon", "version"},
        unknown_first=False,
    )


def _sha256(value: Any) -> bool:
    return grammar.is_hex64(value) or (isinstance(value, str) and is_placeholder(value))


def _expected(value: Any) -> bool:
    return (
        not _keys(value, _EXPECTED)
        or "performative" not in value
        or is_performative(value["performative"])
    )


def _provenance(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("methodology_version"), str)


def _confidence(c: Any) -> bool:
    return not isinstance(c, bool) and isinstance(c, (int, float)) and 0 <= c <= 1


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


_ARTIFACT_KEYS = ("kind", "schema_version", "path", "sha256", "size_bytes")
_HEX = "must be 64 lowercase hex characters"
_COUNT = "must be an integer >= 0"
_AUTHZ = "ise.receiver_authorization"
_EXPECTED = {"performative", "shape_hint"}
ARTIFACT = Obj(
    "artifact",
    (
        ("kind", "in", grammar.is_slug, "artifact.kind must be a slug"),
        (
            "schema_version",
            "in",
            grammar.is_schema_version,
            "artifact.schema_version must be MAJOR.MINOR[.PATCH]",
        ),
        ("sha256", "in", _sha256, f"artifact.sha256 {_HEX}"),
        ("size_bytes", "in", is_count, f"artifact.size_bytes {_COUNT}"),
    ),
    required=_ARTIFACT_KEYS,
    allowed=set(_ARTIFACT_KEYS),
)
TRACE = Obj(
    "trace",
    (
        *(
            (k, "all", _string, f"trace.{k} must be a string")
            for k in ("ts", "host", "model", "tier")
        ),
        (
            "ts",
            "all",
            lambda v: not _string(v) or grammar.is_rfc3339(v),
            "trace.ts must be an RFC 3339 date-time",
        ),
        (
            "tier",
            "all",
            lambda v: not _string(v) or is_tier(v),
            "trace.tier must be standard or trance",
        ),
    ),
    allowed={"ts", "host", "model", "tier"},
    unknown_first=False,
)
CONTEXT_DELTA = Obj(
    "context_delta",
    (
        ("token_budget", "all", is_count, f"context_delta.token_budget {_COUNT}"),
        ("tokens_used", "all", is_count, f"context_delta.tokens_used {_COUNT}"),
        (
            "input_handles",
            "all",
            lambda v: isinstance(v, list),
            "context_delta.input_handles must be an array",
        ),
        ("input_handles", "all", _handles, None),
        ("summary", "all", _text, "context_delta.summary must be a non-empty string"),
    ),
    allowed={"token_budget", "tokens_used", "input_handles", "summary"},
    unknown_first=False,
)
CONSTRAINTS = Obj(
    "constraints",
    (
        (
            "trust_level",
            "in",
            one_of(TRUST_LEVELS),
            "constraints.trust_level must be low, standard or high",
        ),
        (
            "deadline_ts",
            "set",
            grammar.is_rfc3339,
            "constraints.deadline_ts must be null or an RFC 3339 date-time",
        ),
    ),
    allowed={"deadline_ts", "trust_level"},
)
VERIFICATION = Obj(
    "ise.verification",
    (
        (
            "fresh_context",
            "all",
            lambda v: isinstance(v, bool),
            "ise.verification.fresh_context must be a boolean",
        ),
        ("checker", "all", grammar.is_slug, "ise.verification.checker must be a slug"),
        (
            "transcript_access",
            "all",
            is_transcript_access,
            "ise.verification.transcript_access must be none or artifact-only",
        ),
    ),
)
_ISE_RULES: tuple[Rule, ...] = (
    (
        "assertion_grade",
        "all",
        is_grade,
        "ise.assertion_grade is required and must be one of " + "|".join(sorted(ASSERTION_GRADES)),
    ),
    (
        "receiver_authorization",
        "set",
        lambda v: _keys(v, set(AUTHZ_FIELDS)),
        f"{_AUTHZ} must be {{auto_route, auto_merge, auto_deploy}}",
    ),
    ("receiver_authorization", "set", _bools, f"{_AUTHZ} values must be booleans"),
    ("provenance", "set", _provenance, "ise.provenance.methodology_version is required"),
    ("verification", "set", VERIFICATION, None),
)
#: The ise block's rules, by whether the envelope is 2.1 (only 2.1 has ``verification``).
ISE = {
    v21: Obj(
        "ise",
        _ISE_RULES,
        allowed={"assertion_grade", "provenance", "receiver_authorization"}
        | ({"verification"} if v21 else set()),
    )
    for v21 in (False, True)
}
INTEGRITY = Obj(
    "integrity",
    (
        (
            "value",
            "all",
            lambda v: grammar.is_hex64(v) or is_placeholder(v),
            f"integrity.value {_HEX}",
        ),
    ),
    allowed={"method", "value"},
    unknown_first=False,
)
ENVELOPE = Obj(
    "envelope",
    (
        (
            "envelope_version",
            "all",
            grammar.is_envelope_version,
            "envelope_version %r is not 1.0-1.2 or 2.0-2.1",
        ),
        ("message_id", "set", _text, "message_id must be a non-empty string"),
        ("thread_id", "set", _text, "thread_id must be a non-empty string"),
        ("parent_id", "set", _text, "parent_id must be null or a non-empty string"),
        ("from", "all", _agent("from"), None),
        ("to", "all", _agent("to"), None),
        ("performative", "all", is_performative, "performative %r is not one of the ten"),
        (
            "objective",
            "set",
            lambda v: _string(v) and 1 <= len(v) <= 240,
            "objective must be a string of 1 to 240 characters",
        ),
        ("artifact", "all", ARTIFACT, None),
        ("integrity", "all", INTEGRITY, None),
        ("trace", "set", TRACE, None),
        (
            "edge_origin",
            "in",
            one_of(EDGE_ORIGINS),
            f"edge_origin %r is not one of {sorted(EDGE_ORIGINS)}",
        ),
        ("context_delta", "in", CONTEXT_DELTA, None),
        ("constraints", "in", CONSTRAINTS, None),
        (
            "expected_response",
            "in",
            lambda v: _keys(v, _EXPECTED),
            "expected_response must be {performative?, shape_hint?}",
        ),
        (
            "expected_response",
            "in",
            _expected,
            "expected_response.performative is not one of the ten",
        ),
        ("confidence", "in", _confidence, "confidence must be a number between 0 and 1"),
        ("assumptions", "in", _strings, "assumptions must be an array of strings"),
    ),
)


def schema_problems(env: Mapping[str, Any]) -> list[str]:
    """Every violation of the envelope schema, as strings, over an envelope that
    :meth:`~eidolons.ecl.envelope.Envelope.from_dict` accepted."""
    out = [f"missing required field {key}" for key in missing_fields(env)]
    add = out.append
    for key in env:
        if key not in REQUIRED_FIELDS and key not in OPTIONAL_FIELDS:
            if not grammar.is_extension_field(key):
                add(f"unknown top-level field {key!r} (extensions must match x_<vendor>_<field>)")
    ENVELOPE(env, add)
    if "ise" in env:
        version = env["envelope_version"]
        if not version.startswith("2."):
            add("ise block requires envelope_version 2.0 or later")
        ISE[version.startswith("2.1")](env["ise"], add)
    return out
