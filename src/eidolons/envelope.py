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
   ``/``, no ``..`` component, no NUL, no backslash, not empty).

Every other rule of the schema (digest section 2) is reported by
:meth:`Envelope.schema_problems` as a list of strings; the orchestrator gate lists them as
warnings, ``--strict`` turns them into ``malformed``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from eidolons.config import Limits
from eidolons.errors import EnvelopeError

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
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

VERSION_RE = re.compile(r"^(1\.[012]|2\.[01])(\.\d+)?$")
SLUG_RE = re.compile(r"^[a-z][a-z0-9-]*$")
AGENT_VERSION_RE = re.compile(r"^(\d+\.\d+\.\d+|n/a)$")
SCHEMA_VERSION_RE = re.compile(r"^\d+\.\d+(\.\d+)?$")
HEX64_RE = re.compile(r"^[0-9a-f]{64}$")
EXTENSION_RE = re.compile(r"^x_[a-z][a-z0-9_]*$")
RFC3339_RE = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
HANDLE_RE = re.compile(r"^ecl://thread/[0-9a-f-]{36}/message/[0-9a-f-]{36}$")


# --------------------------------------------------------------------------- strict JSON


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _no_constants(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def loads_strict(data: bytes, limits: Limits | None = None) -> Any:
    """Parse untrusted JSON bytes under the rules in the module docstring (1 and 2)."""
    limits = limits or Limits()
    if len(data) > limits.max_envelope_bytes:
        raise EnvelopeError(
            f"envelope is {len(data)} bytes, above the {limits.max_envelope_bytes}-byte cap"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EnvelopeError(
            f"envelope is not valid UTF-8 ({exc.reason} at byte {exc.start})"
        ) from None
    if text.startswith("\ufeff"):
        raise EnvelopeError("envelope starts with a byte-order mark")
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
    except _DuplicateKey as exc:
        raise EnvelopeError(f"duplicate JSON key {str(exc)!r}") from None
    except RecursionError:
        raise EnvelopeError("JSON nesting too deep") from None
    except json.JSONDecodeError as exc:
        raise EnvelopeError(
            f"not valid JSON: {exc.msg} (line {exc.lineno} column {exc.colno})"
        ) from None
    except ValueError as exc:
        raise EnvelopeError(f"not valid JSON: {exc}") from None
    _check_tree(value, limits.max_json_depth)
    return value


def _check_tree(value: Any, max_depth: int) -> None:
    """Bound the nesting depth and refuse lone surrogates, iteratively."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            if depth > max_depth:
                raise EnvelopeError(f"JSON nesting deeper than {max_depth}")
            for key, child in node.items():
                _check_text(key)
                stack.append((child, depth + 1))
        elif isinstance(node, list):
            if depth > max_depth:
                raise EnvelopeError(f"JSON nesting deeper than {max_depth}")
            stack.extend((child, depth + 1) for child in node)
        elif isinstance(node, str):
            _check_text(node)


def _check_text(text: str) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise EnvelopeError("JSON string holds a lone surrogate escape") from None


# --------------------------------------------------------------------------- model


def is_safe_relative_path(path: str) -> bool:
    """A relative POSIX path with no ``..`` component, NUL or backslash."""
    if not path or path.startswith("/") or "\x00" in path or "\\" in path:
        return False
    return ".." not in path.split("/")


def is_placeholder(value: str) -> bool:
    """Digest values a parent still has to fill: empty, ``PARENT_FILLS_*``, ``<...>``,
    ``TODO*`` (case-insensitive)."""
    stripped = value.strip()
    return (
        stripped == ""
        or stripped.startswith("PARENT_FILLS_")
        or (stripped.startswith("<") and stripped.endswith(">"))
        or stripped.upper().startswith("TODO")
    )


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
                "(no leading '/', no '..', no NUL, no backslash)"
            )
        integrity = _need_obj(data, "integrity")
        method = _need_str(integrity, "method", "integrity.method")
        value = _need_str(integrity, "value", "integrity.value")
        return cls(version, sender, recipient, performative, path, method, value, data)

    def to_dict(self) -> dict[str, Any]:
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


def json_type(value: Any) -> str:
    """The JSON type name of a parsed value (as ``jq type`` names it)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


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
            and not EXTENSION_RE.match(key)
        ):
            add(f"unknown top-level field {key!r} (extensions must match x_<vendor>_<field>)")
    if not VERSION_RE.match(env.envelope_version):
        add(f"envelope_version {env.envelope_version!r} is not 1.0-1.2 or 2.0-2.1")
    for key in ("message_id", "thread_id"):
        if key in d and d[key] is not None and not (isinstance(d[key], str) and d[key]):
            add(f"{key} must be a non-empty string")
    if d.get("parent_id") is not None and not (isinstance(d["parent_id"], str) and d["parent_id"]):
        add("parent_id must be null or a non-empty string")
    for key in ("from", "to"):
        ref = d[key]
        if not (SLUG_RE.match(ref["eidolon"]) or ref["eidolon"] in ("human", "orchestrator")):
            add(f"{key}.eidolon {ref['eidolon']!r} is not a slug")
        version = ref.get("version")
        if not isinstance(version, str) or not AGENT_VERSION_RE.match(version):
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
    if not HEX64_RE.match(env.integrity_value) and not is_placeholder(env.integrity_value):
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
    if "kind" in art and not (isinstance(art["kind"], str) and SLUG_RE.match(art["kind"])):
        add("artifact.kind must be a slug")
    sv = art.get("schema_version")
    if "schema_version" in art and not (isinstance(sv, str) and SCHEMA_VERSION_RE.match(sv)):
        add("artifact.schema_version must be MAJOR.MINOR[.PATCH]")
    sha = art.get("sha256")
    if "sha256" in art and not (
        isinstance(sha, str) and (HEX64_RE.match(sha) or is_placeholder(sha))
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
    if isinstance(trace.get("ts"), str) and not RFC3339_RE.match(trace["ts"]):
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
            if not isinstance(h, str) or not (is_safe_relative_path(h) or HANDLE_RE.match(h)):
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
    if dl is not None and not (isinstance(dl, str) and RFC3339_RE.match(dl)):
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
            if not (isinstance(ver.get("checker"), str) and SLUG_RE.match(ver["checker"])):
                add("ise.verification.checker must be a slug")
            if ver.get("transcript_access") not in ("none", "artifact-only"):
                add("ise.verification.transcript_access must be none or artifact-only")
