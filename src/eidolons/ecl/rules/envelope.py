"""E-1..E-8 and E-3.compat: the envelope's own gates."""

from __future__ import annotations

from eidolons.ecl import grammar
from eidolons.ecl.rules.common import GateResult, Recorder, get, text
from eidolons.ecl.rules.schema import is_performative, is_tier, missing_fields
from eidolons.ecl.strict_json import loads_strict
from eidolons.errors import EnvelopeError

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from eidolons.ecl.limits import Limits

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
