"""S-1..S-4: the ise block (ECL §6.5), in upstream's order (S-1, S-2, S-4, S-3)."""

from __future__ import annotations

from collections.abc import Mapping

from eidolons.ecl import grammar
from eidolons.ecl.rules.common import GateResult, Recorder, get, is_v21, text, trust_level, truthy
from eidolons.ecl.rules.envelope import AUTHZ_FIELDS, is_grade, is_transcript_access
from eidolons.ecl.strict_json import json_type

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Any

S1_MISSING_REASON = "ise.assertion_grade is required when ise block is present (spec §6.5.2)"
S3_REASONS = (
    "trust_level=high requires an ise.* block at ECL v2.1 (spec §6.5.5); ise absent",
    "trust_level=high without ise.* block; see spec §6.5.5. [PROMOTION-CANDIDATE: MUST at v2.1]",
)


def ise_results(env: Mapping[str, Any], *, target: str | None = None) -> list[GateResult]:
    """S-1, S-2 and S-4 when ``ise`` is present (S-4 for 2.1 envelopes), then S-3."""
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
    problem = None if is_grade(grade) else S1_MISSING_REASON
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
    if not isinstance(authz, Mapping):
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
    elif not is_transcript_access(access):
        problems.append(
            f"transcript_access invalid (got '{text(access)}'; must be none|artifact-only)"
        )
    problem = "; ".join(problems) + ";" if problems else None  # upstream's trailing ";"
    rec.judge("S-4", "MUST", "ise_verification_shape", problem)
