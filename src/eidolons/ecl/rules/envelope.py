"""The envelope's rules: its fields (digest section 2), written once as a table, and its
gates E-1..E-8 and E-3.compat.

:func:`schema_problems` walks the table for :meth:`eidolons.ecl.envelope.Envelope.schema_problems`
(the orchestrator gate's warnings, ``malformed`` under ``--strict``); the conformance gates
(E-2, E-4, E-8, S-1, S-4) decide with the same sets and predicates.
"""

from __future__ import annotations

from eidolons.ecl import grammar
from eidolons.ecl.grammar import is_placeholder, is_safe_relative_path
from eidolons.ecl.rules.common import GateResult, Recorder, get, text
from eidolons.ecl.strict_json import loads_strict
from eidolons.errors import EnvelopeError

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from eidolons.ecl.limits import Limits

    Rule = tuple[str, str, Any, str | None]
    #: an object's rules: (label, rules, required, allowed, unknown_first)
    Obj = tuple[str, tuple[Rule, ...], tuple[str, ...], set[str] | None, bool]

PERFORMATIVES = frozenset(
    "REQUEST INFORM PROPOSE CRITIQUE DECIDE DELEGATE ACKNOWLEDGE ESCALATE RESUME REFUSE".split()
)
#: In the schema's order (E-2 lists the missing ones so).
REQUIRED_FIELDS = tuple(
    "envelope_version message_id thread_id parent_id from to performative objective "
    "artifact integrity trace".split()
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


def is_performative(value: Any) -> bool:
    return isinstance(value, str) and value in PERFORMATIVES


def is_tier(value: Any) -> bool:
    return isinstance(value, str) and value in TIERS


def is_grade(value: Any) -> bool:
    return isinstance(value, str) and value in ASSERTION_GRADES


def is_transcript_access(value: Any) -> bool:
    return isinstance(value, str) and value in TRANSCRIPT_ACCESS


def is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _keys(obj: Any, allowed: set[str]) -> bool:
    return isinstance(obj, dict) and not set(obj) - allowed


def _authz(obj: Any) -> bool:
    return _keys(obj, _AUTHZ)


def _bools(obj: Any) -> bool:
    return not _keys(obj, _AUTHZ) or all(isinstance(v, bool) for v in obj.values())


def _handles(value: Any, add: Callable[[str], None]) -> None:
    for h in value if isinstance(value, list) else ():
        if not (isinstance(h, str) and (is_safe_relative_path(h) or grammar.is_message_handle(h))):
            add(f"context_delta.input_handles entry {h!r} is not a relative path or handle")


def _expected(value: Any, add: Callable[[str], None]) -> None:
    if not _keys(value, _EXPECTED):
        add("expected_response must be {performative?, shape_hint?}")
    elif "performative" in value and not is_performative(value["performative"]):
        add("expected_response.performative is not one of the ten")


def check_object(spec: Obj, obj: Any, add: Callable[[str], None]) -> None:
    """Add every problem of ``obj`` against ``spec``, an object's rules ``(label, rules,
    required, allowed, unknown_first)``: ``required`` keys are missing when absent,
    ``allowed`` keys (None: any) are reported before the rules or after them. Each rule
    is ``(key, when, check, message)``: ``when`` is ``in`` (key present), ``set`` (not
    null) or ``all``; ``check`` is a frozenset (a string in it), a type (an instance of
    it) or a predicate, failing with the field's name followed by ``message`` (``%r``
    shows the value); with no message, a nested spec or a function ``(value, add)``
    adding its own problems."""
    label, rules, required, allowed, unknown_first = spec
    if not isinstance(obj, dict):
        add(f"{label} must be an object")
        return
    for key in required:
        if key not in obj:
            add(f"missing required field {label}.{key}")
    extra = None if allowed is None else set(obj) - allowed
    if extra and unknown_first:
        add(f"{label} has unknown fields {sorted(extra)}")
    for key, when, check, message in rules:
        value = obj.get(key)
        if (when == "in" and key not in obj) or (when == "set" and value is None):
            continue
        if message is None:
            if type(check) is tuple:
                check_object(check, value, add)
            else:
                check(value, add)
            continue
        kind = type(check)
        if kind is frozenset:
            ok = isinstance(value, str) and value in check
        elif kind is type:
            ok = isinstance(value, check)
        else:
            ok = check(value)
        if not ok:
            name = f"{label}.{key}" if label else key
            add(name + (message % (value,) if "%r" in message else message))
    if extra and not unknown_first:
        add(f"{label} has unknown fields {sorted(extra)}")


def _named(value: Any) -> bool:
    return grammar.is_slug(value) or value in ("human", "orchestrator")


def _sha256(value: Any) -> bool:
    return grammar.is_hex64(value) or (isinstance(value, str) and is_placeholder(value))


def _provenance(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("methodology_version"), str)


def _confidence(c: Any) -> bool:
    return not isinstance(c, bool) and isinstance(c, (int, float)) and 0 <= c <= 1


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


def _objective(value: Any) -> bool:
    return isinstance(value, str) and 1 <= len(value) <= 240


def _ts(value: Any) -> bool:
    return not isinstance(value, str) or grammar.is_rfc3339(value)


def _trace_tier(value: Any) -> bool:
    return not isinstance(value, str) or value in TIERS


_HEX = " must be 64 lowercase hex characters"
_COUNT = " must be an integer >= 0"
_SLUG = " must be a slug"
_STRING = " must be a string"
_EXPECTED = {"performative", "shape_hint"}
_ARTIFACT = ("kind", "schema_version", "path", "sha256", "size_bytes")
_AUTHZ = set(AUTHZ_FIELDS)
_AGENT_RULES: tuple[Rule, ...] = (
    ("eidolon", "all", _named, " %r is not a slug"),
    ("version", "all", grammar.is_agent_version, " must be MAJOR.MINOR.PATCH or n/a"),
)
_AGENT_KEYS = {"eidolon", "version"}

ARTIFACT: Obj = (
    "artifact",
    (
        ("kind", "in", grammar.is_slug, _SLUG),
        ("schema_version", "in", grammar.is_schema_version, " must be MAJOR.MINOR[.PATCH]"),
        ("sha256", "in", _sha256, _HEX),
        ("size_bytes", "in", is_count, _COUNT),
    ),
    _ARTIFACT,
    set(_ARTIFACT),
    True,
)
TRACE: Obj = (
    "trace",
    (
        ("ts", "all", str, _STRING),
        ("host", "all", str, _STRING),
        ("model", "all", str, _STRING),
        ("tier", "all", str, _STRING),
        ("ts", "all", _ts, " must be an RFC 3339 date-time"),
        ("tier", "all", _trace_tier, " must be standard or trance"),
    ),
    (),
    {"ts", "host", "model", "tier"},
    False,
)
CONTEXT_DELTA: Obj = (
    "context_delta",
    (
        ("token_budget", "all", is_count, _COUNT),
        ("tokens_used", "all", is_count, _COUNT),
        ("input_handles", "all", list, " must be an array"),
        ("input_handles", "all", _handles, None),
        ("summary", "all", _text, " must be a non-empty string"),
    ),
    (),
    {"token_budget", "tokens_used", "input_handles", "summary"},
    False,
)
CONSTRAINTS: Obj = (
    "constraints",
    (
        ("trust_level", "in", TRUST_LEVELS, " must be low, standard or high"),
        ("deadline_ts", "set", grammar.is_rfc3339, " must be null or an RFC 3339 date-time"),
    ),
    (),
    {"deadline_ts", "trust_level"},
    True,
)
VERIFICATION: Obj = (
    "ise.verification",
    (
        ("fresh_context", "all", bool, " must be a boolean"),
        ("checker", "all", grammar.is_slug, _SLUG),
        ("transcript_access", "all", TRANSCRIPT_ACCESS, " must be none or artifact-only"),
    ),
    (),
    None,
    True,
)
_GRADES = "|".join(sorted(ASSERTION_GRADES))
_ISE_RULES: tuple[Rule, ...] = (
    ("assertion_grade", "all", ASSERTION_GRADES, " is required and must be one of " + _GRADES),
    ("receiver_authorization", "set", _authz, " must be {auto_route, auto_merge, auto_deploy}"),
    ("receiver_authorization", "set", _bools, " values must be booleans"),
    ("provenance", "set", _provenance, ".methodology_version is required"),
    ("verification", "set", VERIFICATION, None),
)
_ISE_KEYS = {"assertion_grade", "provenance", "receiver_authorization"}
#: The ise block's rules, by whether the envelope is 2.1 (only 2.1 has ``verification``).
ISE: dict[bool, Obj] = {
    False: ("ise", _ISE_RULES, (), _ISE_KEYS, True),
    True: ("ise", _ISE_RULES, (), _ISE_KEYS | {"verification"}, True),
}


def _integrity_value(value: Any) -> bool:
    return grammar.is_hex64(value) or is_placeholder(value)


INTEGRITY: Obj = (
    "integrity",
    (("value", "all", _integrity_value, _HEX),),
    (),
    {"method", "value"},
    False,
)
#: The top level's rules (its required and unknown fields are :func:`schema_problems`').
ENVELOPE: Obj = (
    "",
    (
        ("envelope_version", "all", grammar.is_envelope_version, " %r is not 1.0-1.2 or 2.0-2.1"),
        ("message_id", "set", _text, " must be a non-empty string"),
        ("thread_id", "set", _text, " must be a non-empty string"),
        ("parent_id", "set", _text, " must be null or a non-empty string"),
        ("from", "all", ("from", _AGENT_RULES, (), _AGENT_KEYS, False), None),
        ("to", "all", ("to", _AGENT_RULES, (), _AGENT_KEYS, False), None),
        ("performative", "all", PERFORMATIVES, " %r is not one of the ten"),
        ("objective", "set", _objective, " must be a string of 1 to 240 characters"),
        ("artifact", "all", ARTIFACT, None),
        ("integrity", "all", INTEGRITY, None),
        ("trace", "set", TRACE, None),
        ("edge_origin", "in", EDGE_ORIGINS, f" %r is not one of {sorted(EDGE_ORIGINS)}"),
        ("context_delta", "in", CONTEXT_DELTA, None),
        ("constraints", "in", CONSTRAINTS, None),
        ("expected_response", "in", _expected, None),
        ("confidence", "in", _confidence, " must be a number between 0 and 1"),
        ("assumptions", "in", _strings, " must be an array of strings"),
    ),
    (),
    None,
    True,
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
    check_object(ENVELOPE, env, add)
    if "ise" in env:
        version = env["envelope_version"]
        if not version.startswith("2."):
            add("ise block requires envelope_version 2.0 or later")
        check_object(ISE[version.startswith("2.1")], env["ise"], add)
    return out


COMPAT_REASON = "v1.x envelope accepted under v2.0 receiver, §7.3 window valid through 2027-05-13"


def json_result(
    data: bytes, *, limits: Limits | None = None, target: str | None = None
) -> tuple[GateResult, Mapping[str, Any] | None]:
    """E-1: parse ``data`` strictly. Returns the result and the top-level object (an
    empty mapping when the JSON is valid but not an object), or None when E-1 failed."""
    rec = Recorder(target)
    try:
        value = loads_strict(data, limits)
    except EnvelopeError as exc:
        rec.fail("E-1", "MUST", "envelope_is_json", str(exc))
        return rec.out[0], None
    rec.ok("E-1", "MUST", "envelope_is_json")
    return rec.out[0], value if isinstance(value, dict) else {}


def _path_problem(path: Any) -> str | None:
    shown = text(path)
    if shown == "":
        return "missing artifact.path"
    if not isinstance(path, str):
        return f"not a string: {shown}"
    if path.startswith("/"):
        return f"absolute path: {path}"
    if grammar.has_dotdot(path):
        return f"contains '..': {path}"
    return None


def envelope_results(env: Mapping[str, Any], *, target: str | None = None) -> list[GateResult]:
    """E-2..E-8 and E-3.compat over a parsed envelope (E-1 passed)."""
    rec = Recorder(target)
    missing = missing_fields(env)
    problem = "missing: " + " ".join(missing) if missing else None
    rec.judge("E-2", "MUST", "required_fields_present", problem)

    version = env.get("envelope_version")
    if grammar.is_envelope_version(version):
        rec.ok("E-3", "MUST", "envelope_version_supported")
        if grammar.is_v1_version(version):
            rec.ok("E-3.compat", "INFO", "v1x_accepted_under_v2_receiver", COMPAT_REASON)
    else:
        reason = f"got: {text(version)} (expected 1.0|1.1|1.2|2.0|2.1 variant)"
        rec.fail("E-3", "MUST", "envelope_version_supported", reason)

    performative = env.get("performative")
    problem = None if is_performative(performative) else f"got: {text(performative)}"
    rec.judge("E-4", "MUST", "performative_in_enum", problem)

    sender, receiver = get(env, "from", "eidolon"), get(env, "to", "eidolon")
    ok = grammar.is_slug(sender) and grammar.is_slug(receiver)
    problem = None if ok else f"from={text(sender)} to={text(receiver)}"
    rec.judge("E-5", "MUST", "agent_refs_well_formed", problem)

    problem = _path_problem(get(env, "artifact", "path"))
    rec.judge("E-6", "MUST", "artifact_path_relative", problem)

    problem = None if text(env.get("edge_origin")) else "missing edge_origin"
    rec.judge("E-7", "SHOULD", "edge_origin_populated", problem, "warn")

    tier = get(env, "trace", "tier")
    rec.judge("E-8", "MUST", "trace_tier_valid", None if is_tier(tier) else f"got: {text(tier)}")
    return rec.out
