"""The orchestrator's decision over a parsed envelope and a digest (checks 2-4 and 7 of
the integrity check, ECL §6.2.2), pure: :func:`precheck` (method, placeholder,
``artifact.sha256`` against the tag), then :func:`judge_digest` (the recomputed tag).
The orchestrator gate and the receiver both apply them.
"""

from __future__ import annotations

from eidolons.ecl.envelope import Envelope
from eidolons.ecl.grammar import is_placeholder
from eidolons.ecl.integrity import SUPPORTED_METHODS, Digest, tags_equal
from eidolons.ecl.verdict import Verdict

__all__ = ["judge_digest", "precheck"]


def precheck(env: Envelope, strict: bool = False) -> tuple[Verdict, str] | None:
    """Checks 1 (strict part) to 4, over the parsed envelope alone. None = go on."""
    if strict:
        problems = env.schema_problems()
        if problems:
            return Verdict.MALFORMED, "schema: " + "; ".join(problems)
    if env.integrity_method not in SUPPORTED_METHODS:
        return (
            Verdict.UNSUPPORTED_ALGO,
            f"integrity.method {env.integrity_method!r} is not sha256 or hmac-sha256",
        )
    if is_placeholder(env.integrity_value):
        return Verdict.UNVERIFIABLE, "integrity.value is a placeholder; the digest is not filled"
    declared = env.artifact.get("sha256")
    if env.integrity_method == "sha256" and declared is not None:
        # never laxer than the upstream gate: a non-hex value is a mismatch, not ignored;
        # only a placeholder (the parent has not filled it) is not compared (ADR 0026)
        if not isinstance(declared, str) or (
            not is_placeholder(declared) and declared != env.integrity_value
        ):
            return Verdict.INCONSISTENT, "artifact.sha256 differs from integrity.value"
    return None


def judge_digest(env: Envelope, digest: Digest) -> tuple[Verdict, str]:
    """Check 7: compare the recomputed tag with ``integrity.value``."""
    name = "SHA-256" if env.integrity_method == "sha256" else "HMAC-SHA-256"
    if tags_equal(env.integrity_value, digest.value):
        return Verdict.PASS, f"payload {name} matches integrity tag"
    return Verdict.TAMPER, f"payload {name} does not match integrity tag"
