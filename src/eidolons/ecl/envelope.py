"""The ECL envelope (1.0 to 2.1): the model, its strict parse, its schema (digest section
2, one table) and its gates E-1..E-8, E-3.compat and S-1..S-4 (ECL §6.5), for the
receiver gate and ``eidolons check`` alike. Pure. :func:`parse_envelope` refuses
(``malformed``) non-strict JSON, a top level not an object, and a missing or ill-typed
field integrity depends on (``artifact.path`` must be a safe relative path); every other
schema rule is a string of :meth:`Envelope.schema_problems`."""

from __future__ import annotations

from collections import namedtuple

from eidolons.ecl import grammar
from eidolons.ecl.grammar import (
    Limits,
    is_placeholder,
    is_safe_relative_path,
    json_type,
    loads_strict,
)
from eidolons.errors import EnvelopeError

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, NamedTuple

    Rule = tuple[str, str, Any, str | None]
    #: an object's rules: (label, rules, required, allowed, unknown_first)
    Obj = tuple[str, tuple[Rule, ...], tuple[str, ...], set[str] | None, bool]

    class _GateResult(NamedTuple):
        id: str
        level: str
        status: str
        name: str
        reason: str | None = None
        target: str | None = None

else:  # the same fields for the interpreter: typing.NamedTuple would import typing
    _GateResult = namedtuple(
        "GateResult", ("id", "level", "status", "name", "reason", "target"), defaults=(None, None)
    )

PERFORMATIVES = frozenset(
    "REQUEST INFORM PROPOSE CRITIQUE DECIDE DELEGATE ACKNOWLEDGE ESCALATE RESUME REFUSE".split()
)
#: In the schema's order (E-2 lists the missing ones so).
REQUIRED_FIELDS = tuple(
    "envelope_version message_id thread_id parent_id from to performative objective "
    "artifact integrity trace".split()
)
OPTIONAL_FIELDS = frozenset(
    "edge_origin context_delta constraints expected_response confidence assumptions ise".split()
)
EDGE_ORIGINS = frozenset({"roster", "composition", "implicit", "emitted-request"})
TRUST_LEVELS = frozenset({"low", "standard", "high"})
TIERS = frozenset({"standard", "trance"})
ASSERTION_GRADES = frozenset({"unverified", "self-attested", "validated", "human-reviewed"})
TRANSCRIPT_ACCESS = frozenset({"none", "artifact-only"})
AUTHZ_FIELDS = ("auto_route", "auto_merge", "auto_deploy")


class AgentRef:
    """``{eidolon, version}``. ``version`` is ``n/a`` when the envelope omits it."""

    __slots__ = ("eidolon", "version")

    def __init__(self, eidolon: str, version: str) -> None:
        self.eidolon = eidolon
        self.version = version

    def __repr__(self) -> str:
        return f"AgentRef({self.eidolon!r}, {self.version!r})"

    def __eq__(self, other: object) -> bool:
        key = (self.eidolon, self.version)
        return isinstance(other, AgentRef) and key == (other.eidolon, other.version)

    def __hash__(self) -> int:
        return hash((self.eidolon, self.version))

    def __str__(self) -> str:
        return f"{self.eidolon}@{self.version}"


class Envelope:
    """A parsed envelope: ``data`` as received, typed the fields integrity depends on."""

    __slots__ = (
        "artifact",
        "artifact_kind",
        "artifact_path",
        "data",
        "envelope_version",
        "integrity_method",
        "integrity_value",
        "message_id",
        "parent_id",
        "performative",
        "recipient",
        "sender",
        "thread_id",
    )

    def __init__(
        self,
        envelope_version: str,
        sender: AgentRef,
        recipient: AgentRef,
        performative: str,
        artifact_path: str,
        integrity_method: str,
        integrity_value: str,
        data: Mapping[str, Any],
    ) -> None:
        self.envelope_version = envelope_version
        self.sender = sender
        self.recipient = recipient
        self.performative = performative
        self.artifact_path = artifact_path
        self.integrity_method = integrity_method
        self.integrity_value = integrity_value
        self.data = data
        # the optional ids, typed loosely: absent or wrong in a valid parse reads as None
        ids = [data.get(key) for key in ("message_id", "thread_id", "parent_id")]
        ids = [value if isinstance(value, str) and value else None for value in ids]
        self.message_id, self.thread_id, self.parent_id = ids
        self.artifact: Mapping[str, Any] = data["artifact"]
        kind = self.artifact.get("kind")
        self.artifact_kind = kind if isinstance(kind, str) else None

    def __repr__(self) -> str:
        return (
            f"Envelope({self.sender} -> {self.recipient} {self.performative}, "
            f"message_id={self.message_id!r})"
        )

    @classmethod
    def from_dict(cls, data: Any) -> Envelope:
        if not isinstance(data, dict):
            raise EnvelopeError(f"top level must be a JSON object, got {json_type(data)}")
        fields = _needs(data)
        version, sender, sender_name, recipient, recipient_name, performative = fields[:6]
        path, method, value = fields[7], fields[9], fields[10]
        agents = []
        for ref, name in ((sender, sender_name), (recipient, recipient_name)):
            given = ref.get("version")
            agents.append(AgentRef(name, given if isinstance(given, str) and given else "n/a"))
        if not is_safe_relative_path(path):
            raise EnvelopeError(
                f"artifact.path {path!r} is not a safe relative path "
                "(no leading '/', no '..', no control character or backslash, "
                "no empty or '.' component)"
            )
        return cls(version, agents[0], agents[1], performative, path, method, value, data)

    @property
    def context_delta(self) -> Mapping[str, Any] | None:
        value = self.data.get("context_delta")
        return value if isinstance(value, dict) else None

    def schema_problems(self) -> list[str]:
        """Every schema violation (digest section 2) :meth:`from_dict` lets through."""
        env = self.data
        out = [f"missing required field {key}" for key in missing_fields(env)]
        add = out.append
        for key in env:
            known = key in REQUIRED_FIELDS or key in OPTIONAL_FIELDS
            if not known and not grammar.is_extension_field(key):
                add(f"unknown top-level field {key!r} (extensions must match x_<vendor>_<field>)")
        check_object(ENVELOPE, env, add)
        if "ise" in env:
            version = env["envelope_version"]
            if not version.startswith("2."):
                add("ise block requires envelope_version 2.0 or later")
            check_object(ISE[version.startswith("2.1")], env["ise"], add)
        return out


def parse_envelope(data: bytes, limits: Limits | None = None) -> Envelope:
    """Strictly parse envelope bytes. Raises :class:`EnvelopeError` (verdict malformed)."""
    return Envelope.from_dict(loads_strict(data, limits))


#: the fields integrity depends on, in order: (path, kind); a ``name`` is a non-empty str
_NEEDED: tuple[tuple[tuple[str, ...], Any], ...] = (
    (("envelope_version",), str),
    (("from",), dict),
    (("from", "eidolon"), "name"),
    (("to",), dict),
    (("to", "eidolon"), "name"),
    (("performative",), str),
    (("artifact",), dict),
    (("artifact", "path"), str),
    (("integrity",), dict),
    (("integrity", "method"), str),
    (("integrity", "value"), str),
)


def _needs(data: Mapping[str, Any]) -> list[Any]:
    """The values of :data:`_NEEDED`, else EnvelopeError naming the first one missing."""
    out = []
    for path, kind in _NEEDED:
        label = ".".join(path)
        value = get(data, *path)
        if value is None:
            raise EnvelopeError(f"missing required field {label}")
        if not isinstance(value, dict if kind is dict else str):
            shape = "an object" if kind is dict else "a string"
            raise EnvelopeError(f"{label} must be {shape}, got {json_type(value)}")
        if kind == "name" and not value:
            raise EnvelopeError(f"{label} is empty")
        out.append(value)
    return out


def missing_fields(env: Mapping[str, Any]) -> list[str]:
    """The required fields absent or null (``parent_id`` may be null): schema and E-2."""
    return [f for f in REQUIRED_FIELDS if f not in env or (env[f] is None and f != "parent_id")]


def is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _in(value: Any, names: frozenset[str]) -> bool:
    return isinstance(value, str) and value in names


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _keys(obj: Any, allowed: set[str]) -> bool:
    return isinstance(obj, dict) and not set(obj) - allowed


def _handles(value: Any, add: Callable[[str], None]) -> None:
    for h in value if isinstance(value, list) else ():
        if not (isinstance(h, str) and (is_safe_relative_path(h) or grammar.is_message_handle(h))):
            add(f"context_delta.input_handles entry {h!r} is not a relative path or handle")


def _expected(value: Any, add: Callable[[str], None]) -> None:
    if not _keys(value, {"performative", "shape_hint"}):
        add("expected_response must be {performative?, shape_hint?}")
    elif "performative" in value and not _in(value["performative"], PERFORMATIVES):
        add("expected_response.performative is not one of the ten")


def check_object(spec: Obj, obj: Any, add: Callable[[str], None]) -> None:
    """Add every problem of ``obj`` against ``spec`` (:data:`Obj`). A rule ``(key, when,
    check, message)`` applies ``all``, ``in`` (key present) or ``set`` (not null); ``check``
    is a frozenset, a type or a predicate, or, with no message, a nested spec or
    ``(value, add)``; ``%r`` in ``message`` shows the value."""
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
            ok = _in(value, check)
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


def _tag(value: Any) -> bool:
    return grammar.is_hex64(value) or (isinstance(value, str) and is_placeholder(value))


def _authz(obj: Any) -> bool:
    return _keys(obj, _AUTHZ)


def _bools(obj: Any) -> bool:
    return not _keys(obj, _AUTHZ) or all(isinstance(v, bool) for v in obj.values())


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
        ("sha256", "in", _tag, _HEX),
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
INTEGRITY: Obj = ("integrity", (("value", "all", _tag, _HEX),), (), {"method", "value"}, False)
#: The top level's rules (its required and unknown fields are ``schema_problems``').
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


class GateResult(_GateResult):
    """One gate's outcome (``level`` MUST, SHOULD or INFO; ``status`` ok, fail or warn),
    truthy only when ok: a named tuple, ``check`` makes 25 per envelope (ADR 0022)."""

    __slots__ = ()

    def __bool__(self) -> bool:
        return self.status == "ok"

    def to_json(self) -> dict[str, Any]:
        """``{"id", "level", "status", "name"[, "target"][, "reason"]}`` (upstream order)."""
        out: dict[str, Any] = {
            "id": self.id,
            "level": self.level,
            "status": self.status,
            "name": self.name,
        }
        if self.target is not None:
            out["target"] = self.target
        if self.reason is not None:
            out["reason"] = self.reason
        return out


_result = tuple.__new__  # a GateResult without its generated __new__ (a third of the cost)


class Recorder:
    """Collects results for one envelope, stamping each with the same target."""

    __slots__ = ("out", "target")

    def __init__(self, target: str | None) -> None:
        self.target = target
        self.out: list[GateResult] = []

    def ok(self, gid: str, level: str, name: str, reason: str | None = None) -> None:
        self.out.append(_result(GateResult, (gid, level, "ok", name, reason, self.target)))

    def fail(self, gid: str, level: str, name: str, reason: str) -> None:
        self.out.append(_result(GateResult, (gid, level, "fail", name, reason, self.target)))

    def warn(self, gid: str, level: str, name: str, reason: str) -> None:
        self.out.append(_result(GateResult, (gid, level, "warn", name, reason, self.target)))

    def judge(
        self, gid: str, level: str, name: str, problem: str | None, bad: str = "fail"
    ) -> None:
        """ok when there is no ``problem``, else ``bad`` (fail or warn) with it as reason."""
        status = "ok" if problem is None else bad
        self.out.append(_result(GateResult, (gid, level, status, name, problem, self.target)))

    def graded(self, gid: str, v21: bool, name: str, problem: str | None, reasons: Any) -> None:
        """MUST for 2.1 envelopes, SHOULD before; ``reasons``: the (fail, warn) pair."""
        level = "MUST" if v21 else "SHOULD"
        if problem is None:
            self.ok(gid, level, name)
        elif v21:
            self.fail(gid, level, name, reasons[0])
        else:
            self.warn(gid, level, name, reasons[1])


def text(value: Any) -> str:
    """A value as ``jq -r '.x // ""'`` prints it, for reasons only (never decisions)."""
    if value is None or value is False:
        return ""
    if isinstance(value, str):
        return value
    if type(value) is int:
        return str(value)
    if value is True:
        return "true"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e17:
        return str(int(value))
    import json  # only to word a reason (json imports re: not on every gate's start-up)

    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def get(env: Any, *keys: str) -> Any:
    """``.a.b.c``: None when a level is absent or not an object."""
    node: Any = env
    for key in keys:
        if type(node) is not dict:
            from collections.abc import Mapping  # off the gates' start-up: rare

            if not isinstance(node, Mapping):
                return None
        node = node.get(key)
    return node


def truthy(value: Any) -> bool:
    """jq truthiness: everything but null and false."""
    return value is not None and value is not False


def is_v21(env: Mapping[str, Any]) -> bool:
    return grammar.is_v21_version(env.get("envelope_version"))


def trust_level(env: Mapping[str, Any]) -> Any:
    value = get(env, "constraints", "trust_level")
    return value if truthy(value) else "standard"


def token_count(value: Any) -> int | None:
    """A non-negative integer (or integral float) count; absent or false is 0, else None."""
    if value is None or value is False:
        return 0
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


COMPAT_REASON = "v1.x envelope accepted under v2.0 receiver, §7.3 window valid through 2027-05-13"


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
    problem = None if _in(performative, PERFORMATIVES) else f"got: {text(performative)}"
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
    rec.judge("E-8", "MUST", "trace_tier_valid", None if _in(tier, TIERS) else f"got: {text(tier)}")
    return rec.out


S1_MISSING_REASON = "ise.assertion_grade is required when ise block is present (spec §6.5.2)"
S3_REASONS = (
    "trust_level=high requires an ise.* block at ECL v2.1 (spec §6.5.5); ise absent",
    "trust_level=high without ise.* block; see spec §6.5.5. [PROMOTION-CANDIDATE: MUST at v2.1]",
)


def ise_results(env: Mapping[str, Any], *, target: str | None = None) -> list[GateResult]:
    """S-1, S-2 and S-4 (2.1) when ``ise`` is present, then S-3 (upstream's order)."""
    rec = Recorder(target)
    ise = env.get("ise")
    present = truthy(ise)
    if present:
        _grade(ise, rec)
        _authorization(ise, rec)
        if is_v21(env):
            _verification(ise, rec)
    if grammar.is_v1_version(env.get("envelope_version")):
        rec.ok("S-3", "SHOULD", "ise_required_at_high")
    else:
        problem = "absent" if trust_level(env) == "high" and not present else None
        rec.graded("S-3", is_v21(env), "ise_required_at_high", problem, S3_REASONS)
    return rec.out


def _grade(ise: Any, rec: Recorder) -> None:
    grade = get(ise, "assertion_grade")
    problem = None if _in(grade, ASSERTION_GRADES) else S1_MISSING_REASON
    if problem and text(grade):
        problem = (
            f"ise.assertion_grade invalid: got '{text(grade)}'; "
            "must be unverified|self-attested|validated|human-reviewed"
        )
    rec.judge("S-1", "MUST", "ise_block_shape", problem)


def _authorization(ise: Any, rec: Recorder) -> None:
    authz = get(ise, "receiver_authorization")
    if not truthy(authz):
        rec.ok("S-2", "MUST", "ise_authz_honored")  # absent: the defaults apply
        return
    if not isinstance(authz, dict):
        reason = f"ise.receiver_authorization must be an object (got {json_type(authz)})"
        rec.fail("S-2", "MUST", "ise_authz_honored", reason)
        return
    invalid = []
    for field in AUTHZ_FIELDS:
        value = authz.get(field)
        if value is None or isinstance(value, bool):
            continue
        shown = text(value)
        if shown in ("true", "false", "null"):  # a string upstream would let through
            import json

            shown = json.dumps(value, ensure_ascii=False)
        invalid.append(f"{field}={shown} (must be boolean)")
    problem = "ise.receiver_authorization invalid field values: " + " ".join(invalid)
    rec.judge("S-2", "MUST", "ise_authz_honored", problem if invalid else None)


def _verification(ise: Any, rec: Recorder) -> None:
    verification = get(ise, "verification")
    if not truthy(verification):
        return
    problems: list[str] = []
    fresh = get(verification, "fresh_context")
    if fresh is None:
        problems.append("fresh_context missing")
    elif not isinstance(fresh, bool):
        problems.append(f"fresh_context must be boolean (got type {json_type(fresh)})")
    checker = get(verification, "checker")
    if text(checker) == "":
        problems.append("checker missing")
    elif not grammar.is_slug(checker):
        problems.append(f"checker invalid slug (got '{text(checker)}')")
    access = get(verification, "transcript_access")
    if text(access) == "":
        problems.append("transcript_access missing")
    elif not _in(access, TRANSCRIPT_ACCESS):
        problems.append(
            f"transcript_access invalid (got '{text(access)}'; must be none|artifact-only)"
        )
    problem = "; ".join(problems) + ";" if problems else None  # upstream's trailing ";"
    rec.judge("S-4", "MUST", "ise_verification_shape", problem)
