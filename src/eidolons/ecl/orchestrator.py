"""The orchestrator's decision over a parsed envelope and a digest (checks 2-4 and 7 of
the mechanical integrity check, ECL section 6.2.2). Pure; :mod:`eidolons.gates.verify` reads
the files and calls these in order:

2. ``integrity.method`` not sha256 or hmac-sha256 -> ``unsupported_algo``;
3. ``integrity.value`` is a placeholder -> ``unverifiable``;
4. method sha256 and a real ``artifact.sha256`` differs from ``integrity.value`` ->
   ``inconsistent``;
7. the recomputed tag equals ``integrity.value`` (constant time) -> ``pass``, else
   ``tamper``.

The receiver's checker (:mod:`eidolons.ecl.receiver`) applies the same two functions.
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
