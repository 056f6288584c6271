"""The ECL envelope (wire format 1.0 to 2.1): strict parsing of untrusted bytes and the model.

Pure: bytes in, objects out, no file or network I/O.

Rules enforced by :func:`parse_envelope` (each failure raises :class:`EnvelopeError`,
which the gates report as the ``malformed`` verdict):

1. At most ``Limits.max_envelope_bytes`` bytes; valid UTF-8 (a BOM is refused).
2. Strict JSON: no duplicate keys at any depth (a duplicate ``integrity.value`` would let
   an attacker show one digest to one reader and another to the next), no ``NaN`` /
   ``Infinity``, no lone surrogates, nesting at most ``Limits.max_json_depth``.
3. The top level is an object.
4. The fields integrity depends on are present with the right type: ``envelope_version``,
   ``from.eidolon``, ``to.eidolon``, ``performative``, ``artifact.path`` (strings),
   ``integrity.method`` and ``integrity.value`` (strings; a placeholder value is allowed
   here and judged later), and ``artifact.path`` is a safe relative path (no leading
   ``/``, no ``..`` anywhere, no control character or backslash, no empty or ``.``
   component, not empty: :func:`eidolons.ecl.grammar.is_safe_relative_path`).

Every other rule of the schema (digest section 2) is reported by
:meth:`Envelope.schema_problems` as a list of strings; the orchestrator gate lists them as
warnings, ``--strict`` turns them into ``malformed``.
"""

from __future__ import annotations

from eidolons.ecl import grammar
from eidolons.ecl.grammar import is_placeholder, is_safe_relative_path
from eidolons.ecl.limits import Limits
from eidolons.ecl.strict_json import json_type, loads_strict
from eidolons.errors import EnvelopeError

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

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
OPTIONAL_FIELDS: frozenset[str] = frozenset(
    {
        "edge_origin",
        "context_delta",
        "constraints",
        "expected_response",
        "confidence",
        "assumptions",
        "ise",
    }
)
EDGE_ORIGINS: frozenset[str] = frozenset({"roster", "composition", "implicit", "emitted-request"})
TRUST_LEVELS: frozenset[str] = frozenset({"low", "standard", "high"})
TIERS: frozenset[str] = frozenset({"standard", "trance"})
ASSERTION_GRADES: frozenset[str] = frozenset(
    {"unverified", "self-attested", "validated", "human-reviewed"}
)


# --------------------------------------------------------------------------- model


class AgentRef:
    """``{eidolon, version}``. ``version`` is ``n/a`` when the envelope omits it."""

    __slots__ = ("eidolon", "version")

    def __init__(self, eidolon: str, version: str) -> None:
        self.eidolon = eidolon
        self.version = version

    def __repr__(self) -> str:
        return f"AgentRef({self.eidolon!r}, {self.version!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AgentRef) and (self.eidolon, self.version) == (
            other.eidolon,
            other.version,
        )

    def __hash__(self) -> int:
        return hash((self.eidolon, self.version))

    def __str__(self) -> str:
        return f"{self.eidolon}@{self.version}"


class Envelope:
    """A parsed envelope. ``data`` is the whole object as received (unknown and ``x_*``
    fields kept), so ``to_dict`` round-trips; the typed attributes are the fields the
    integrity check depends on. Build one with :meth:`from_dict` or :func:`parse_envelope`."""

    __slots__ = (
        "artifact_path",
        "data",
        "envelope_version",
        "integrity_method",
        "integrity_value",
        "performative",
        "recipient",
        "sender",
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

    def __repr__(self) -> str:
        return (
            f"Envelope({self.sender} -> {self.recipient} {self.performative}, "
            f"message_id={self.message_id!r})"
        )

    @classmethod
    def from_dict(cls, data: Any) -> Envelope:
        if not isinstance(data, dict):
            raise EnvelopeError(f"top level must be a JSON object, got {json_type(data)}")
        version = _need_str(data, "envelope_version")
        sender = _agent(data, "from")
        recipient = _agent(data, "to")
        performative = _need_str(data, "performative")
        artifact = _need_obj(data, "artifact")
        path = _need_str(artifact, "path", "artifact.path")
        if not is_safe_relative_path(path):
            raise EnvelopeError(
                f"artifact.path {path!r} is not a safe relative path "
                "(no leading '/', no '..', no control character or backslash, "
                "no empty or '.' component)"
            )
        integrity = _need_obj(data, "integrity")
        method = _need_str(integrity, "method", "integrity.method")
        value = _need_str(integrity, "value", "integrity.value")
        return cls(version, sender, recipient, performative, path, method, value, data)

    def to_dict(self) -> dict[str, Any]:
        import json

        return json.loads(json.dumps(self.data))  # type: ignore[no-any-return]

    # -- optional fields, typed loosely: they may be absent or wrong in a valid parse
    def _str(self, key: str) -> str | None:
        value = self.data.get(key)
        return value if isinstance(value, str) and value else None

    @property
    def message_id(self) -> str | None:
        return self._str("message_id")

    @property
    def thread_id(self) -> str | None:
        return self._str("thread_id")

    @property
    def parent_id(self) -> str | None:
        return self._str("parent_id")

    @property
    def objective(self) -> str | None:
        return self._str("objective")

    @property
    def artifact(self) -> Mapping[str, Any]:
        return self.data["artifact"]  # type: ignore[no-any-return]

    @property
    def artifact_kind(self) -> str | None:
        kind = self.artifact.get("kind")
        return kind if isinstance(kind, str) else None

    @property
    def artifact_sha256(self) -> str | None:
        value = self.artifact.get("sha256")
        return value if isinstance(value, str) else None

    @property
    def trust_level(self) -> str:
        constraints = self.data.get("constraints")
        if isinstance(constraints, dict) and isinstance(constraints.get("trust_level"), str):
            return constraints["trust_level"]  # type: ignore[no-any-return]
        return "standard"

    @property
    def context_delta(self) -> Mapping[str, Any] | None:
        value = self.data.get("context_delta")
        return value if isinstance(value, dict) else None

    @property
    def is_v2(self) -> bool:
        return self.envelope_version.startswith("2.")

    def schema_problems(self) -> list[str]:
        """Every violation of the ECL envelope schema (digest section 2) that
        :meth:`from_dict` does not already refuse, as human-readable strings."""
        return _schema_problems(self)


def parse_envelope(data: bytes, limits: Limits | None = None) -> Envelope:
    """Strictly parse envelope bytes. Raises :class:`EnvelopeError` (verdict malformed)."""
    return Envelope.from_dict(loads_strict(data, limits))


def _need_obj(data: Mapping[str, Any], key: str, label: str | None = None) -> Mapping[str, Any]:
    value = data.get(key)
    if value is None:
        raise EnvelopeError(f"missing required field {label or key}")
    if not isinstance(value, dict):
        raise EnvelopeError(f"{label or key} must be an object, got {json_type(value)}")
    return value


def _need_str(data: Mapping[str, Any], key: str, label: str | None = None) -> str:
    if key not in data or data[key] is None:
        raise EnvelopeError(f"missing required field {label or key}")
    value = data[key]
    if not isinstance(value, str):
        raise EnvelopeError(f"{label or key} must be a string, got {json_type(value)}")
    return value


def _agent(data: Mapping[str, Any], key: str) -> AgentRef:
    ref = _need_obj(data, key)
    eidolon = _need_str(ref, "eidolon", f"{key}.eidolon")
    if not eidolon:
        raise EnvelopeError(f"{key}.eidolon is empty")
    version = ref.get("version")
    return AgentRef(eidolon, version if isinstance(version, str) and version else "n/a")


# --------------------------------------------------------------------------- schema rules


def _schema_problems(env: Envelope) -> list[str]:
    d = env.data
    out: list[str] = []
    add = out.append
    for key in REQUIRED_FIELDS:
        if key not in d or (d[key] is None and key != "parent_id"):
            add(f"missing required field {key}")
    for key in d:
        if (
            key not in REQUIRED_FIELDS
            and key not in OPTIONAL_FIELDS
            and not grammar.is_extension_field(key)
        ):
            add(f"unknown top-level field {key!r} (extensions must match x_<vendor>_<field>)")
    if not grammar.is_envelope_version(env.envelope_version):
        add(f"envelope_version {env.envelope_version!r} is not 1.0-1.2 or 2.0-2.1")
    for key in ("message_id", "thread_id"):
        if key in d and d[key] is not None and not (isinstance(d[key], str) and d[key]):
            add(f"{key} must be a non-empty string")
    if d.get("parent_id") is not None and not (isinstance(d["parent_id"], str) and d["parent_id"]):
        add("parent_id must be null or a non-empty string")
    for key in ("from", "to"):
        ref = d[key]
        if not (grammar.is_slug(ref["eidolon"]) or ref["eidolon"] in ("human", "orchestrator")):
            add(f"{key}.eidolon {ref['eidolon']!r} is not a slug")
        version = ref.get("version")
        if not grammar.is_agent_version(version):
            add(f"{key}.version must be MAJOR.MINOR.PATCH or n/a")
        extra = set(ref) - {"eidolon", "version"}
        if extra:
            add(f"{key} has unknown fields {sorted(extra)}")
    if env.performative not in PERFORMATIVES:
        add(f"performative {env.performative!r} is not one of the ten")
    objective = d.get("objective")
    if objective is not None and not (isinstance(objective, str) and 1 <= len(objective) <= 240):
        add("objective must be a string of 1 to 240 characters")
    _artifact_problems(env.artifact, add)
    if not grammar.is_hex64(env.integrity_value) and not is_placeholder(env.integrity_value):
        add("integrity.value must be 64 lowercase hex characters")
    extra = set(d["integrity"]) - {"method", "value"}
    if extra:
        add(f"integrity has unknown fields {sorted(extra)}")
    trace = d.get("trace")
    if trace is not None:
        _trace_problems(trace, add)
    if "edge_origin" in d and d["edge_origin"] not in EDGE_ORIGINS:
        add(f"edge_origin {d['edge_origin']!r} is not one of {sorted(EDGE_ORIGINS)}")
    if "context_delta" in d:
        _context_delta_problems(d["context_delta"], add)
    if "constraints" in d:
        _constraints_problems(d["constraints"], add)
    if "expected_response" in d:
        er = d["expected_response"]
        if not isinstance(er, dict) or set(er) - {"performative", "shape_hint"}:
            add("expected_response must be {performative?, shape_hint?}")
        elif "performative" in er and er["performative"] not in PERFORMATIVES:
            add("expected_response.performative is not one of the ten")
    if "confidence" in d:
        c = d["confidence"]
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 <= c <= 1:
            add("confidence must be a number between 0 and 1")
    if "assumptions" in d:
        a = d["assumptions"]
        if not isinstance(a, list) or not all(isinstance(x, str) for x in a):
            add("assumptions must be an array of strings")
    if "ise" in d:
        if not env.is_v2:
            add("ise block requires envelope_version 2.0 or later")
        _ise_problems(d["ise"], env.envelope_version.startswith("2.1"), add)
    return out


def _artifact_problems(art: Mapping[str, Any], add: Any) -> None:
    for key in ("kind", "schema_version", "path", "sha256", "size_bytes"):
        if key not in art:
            add(f"missing required field artifact.{key}")
    extra = set(art) - {"kind", "schema_version", "path", "sha256", "size_bytes"}
    if extra:
        add(f"artifact has unknown fields {sorted(extra)}")
    if "kind" in art and not (grammar.is_slug(art["kind"])):
        add("artifact.kind must be a slug")
    sv = art.get("schema_version")
    if "schema_version" in art and not (grammar.is_schema_version(sv)):
        add("artifact.schema_version must be MAJOR.MINOR[.PATCH]")
    sha = art.get("sha256")
    if "sha256" in art and not (
        grammar.is_hex64(sha) or (isinstance(sha, str) and is_placeholder(sha))
    ):
        add("artifact.sha256 must be 64 lowercase hex characters")
    size = art.get("size_bytes")
    if "size_bytes" in art and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        add("artifact.size_bytes must be an integer >= 0")


def _trace_problems(trace: Any, add: Any) -> None:
    if not isinstance(trace, dict):
        add("trace must be an object")
        return
    for key in ("ts", "host", "model", "tier"):
        if not isinstance(trace.get(key), str):
            add(f"trace.{key} must be a string")
    if isinstance(trace.get("ts"), str) and not grammar.is_rfc3339(trace["ts"]):
        add("trace.ts must be an RFC 3339 date-time")
    if isinstance(trace.get("tier"), str) and trace["tier"] not in TIERS:
        add("trace.tier must be standard or trance")
    extra = set(trace) - {"ts", "host", "model", "tier"}
    if extra:
        add(f"trace has unknown fields {sorted(extra)}")


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _context_delta_problems(cd: Any, add: Any) -> None:
    if not isinstance(cd, dict):
        add("context_delta must be an object")
        return
    for key in ("token_budget", "tokens_used"):
        if not _is_count(cd.get(key)):
            add(f"context_delta.{key} must be an integer >= 0")
    handles = cd.get("input_handles")
    if not isinstance(handles, list):
        add("context_delta.input_handles must be an array")
    else:
        for h in handles:
            if not isinstance(h, str) or not (
                is_safe_relative_path(h) or grammar.is_message_handle(h)
            ):
                add(f"context_delta.input_handles entry {h!r} is not a relative path or handle")
    summary = cd.get("summary")
    if not (isinstance(summary, str) and summary):
        add("context_delta.summary must be a non-empty string")
    extra = set(cd) - {"token_budget", "tokens_used", "input_handles", "summary"}
    if extra:
        add(f"context_delta has unknown fields {sorted(extra)}")


def _constraints_problems(c: Any, add: Any) -> None:
    if not isinstance(c, dict):
        add("constraints must be an object")
        return
    if set(c) - {"deadline_ts", "trust_level"}:
        add(f"constraints has unknown fields {sorted(set(c) - {'deadline_ts', 'trust_level'})}")
    if "trust_level" in c and c["trust_level"] not in TRUST_LEVELS:
        add("constraints.trust_level must be low, standard or high")
    dl = c.get("deadline_ts")
    if dl is not None and not (grammar.is_rfc3339(dl)):
        add("constraints.deadline_ts must be null or an RFC 3339 date-time")


def _ise_problems(ise: Any, v21: bool, add: Any) -> None:
    if not isinstance(ise, dict):
        add("ise must be an object")
        return
    allowed = {"assertion_grade", "provenance", "receiver_authorization"} | (
        {"verification"} if v21 else set()
    )
    if set(ise) - allowed:
        add(f"ise has unknown fields {sorted(set(ise) - allowed)}")
    if ise.get("assertion_grade") not in ASSERTION_GRADES:
        add(
            "ise.assertion_grade is required and must be one of "
            + "|".join(sorted(ASSERTION_GRADES))
        )
    ra = ise.get("receiver_authorization")
    if ra is not None:
        if not isinstance(ra, dict) or set(ra) - {"auto_route", "auto_merge", "auto_deploy"}:
            add("ise.receiver_authorization must be {auto_route, auto_merge, auto_deploy}")
        elif not all(isinstance(v, bool) for v in ra.values()):
            add("ise.receiver_authorization values must be booleans")
    prov = ise.get("provenance")
    if prov is not None and not (
        isinstance(prov, dict) and isinstance(prov.get("methodology_version"), str)
    ):
        add("ise.provenance.methodology_version is required")
    ver = ise.get("verification")
    if ver is not None:
        if not isinstance(ver, dict):
            add("ise.verification must be an object")
        else:
            if not isinstance(ver.get("fresh_context"), bool):
                add("ise.verification.fresh_context must be a boolean")
            if not (grammar.is_slug(ver.get("checker"))):
                add("ise.verification.checker must be a slug")
            if ver.get("transcript_access") not in ("none", "artifact-only"):
                add("ise.verification.transcript_access must be none or artifact-only")
