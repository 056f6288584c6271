"""Verdicts of the mechanical integrity check, their ECL §5.3 failure codes
(``verify_failure_code``, :data:`_FAILURE_CODES`), the orchestrator gate's exit code and
what a pass rested on (its ``evidence``, ADR 0010).
``sender_*``: a required sender signature missing, untrusted or over other bytes (ADR
0034); ``unregistered``: the orchestrator's key must not sign for this root (ADR 0011).
"""

from __future__ import annotations

from enum import StrEnum


class RefusalCode(StrEnum):
    """The ECL section 5.3 failure codes: ``verify_failure_code`` in the trace and the
    ``<CODE>`` of the receiver's refusal line. The one enumeration of them."""

    INTEGRITY_MISMATCH = "INTEGRITY_MISMATCH"
    UNVERIFIED = "UNVERIFIED"
    SCHEMA_INVALID = "SCHEMA_INVALID"
    UNDECLARED_EDGE = "UNDECLARED_EDGE"
    PERFORMATIVE_NOT_ALLOWED = "PERFORMATIVE_NOT_ALLOWED"
    ARTIFACT_KIND_NOT_ALLOWED = "ARTIFACT_KIND_NOT_ALLOWED"
    CONTEXT_OVER_BUDGET = "CONTEXT_OVER_BUDGET"
    MISSING_REQUIRED_SECTION = "MISSING_REQUIRED_SECTION"


class Verdict(StrEnum):
    PASS = "pass"
    MALFORMED = "malformed"
    UNSUPPORTED_ALGO = "unsupported_algo"
    UNVERIFIABLE = "unverifiable"
    INCONSISTENT = "inconsistent"
    MISSING_PAYLOAD = "missing_payload"
    NO_KEY = "no_key"
    TAMPER = "tamper"
    SENDER_UNVERIFIED = "sender_unverified"
    SENDER_MISMATCH = "sender_mismatch"
    UNREGISTERED = "unregistered"

    @property
    def failure_code(self) -> RefusalCode | None:
        return _FAILURE_CODES.get(self)


_FAILURE_CODES: dict[Verdict, RefusalCode] = {
    Verdict.TAMPER: RefusalCode.INTEGRITY_MISMATCH,
    Verdict.INCONSISTENT: RefusalCode.INTEGRITY_MISMATCH,
    Verdict.MISSING_PAYLOAD: RefusalCode.INTEGRITY_MISMATCH,
    Verdict.NO_KEY: RefusalCode.INTEGRITY_MISMATCH,
    Verdict.UNVERIFIABLE: RefusalCode.UNVERIFIED,
    Verdict.MALFORMED: RefusalCode.SCHEMA_INVALID,
    Verdict.UNSUPPORTED_ALGO: RefusalCode.SCHEMA_INVALID,
    Verdict.SENDER_UNVERIFIED: RefusalCode.UNVERIFIED,
    Verdict.SENDER_MISMATCH: RefusalCode.INTEGRITY_MISMATCH,
    Verdict.UNREGISTERED: RefusalCode.UNVERIFIED,
}

# Verdicts that block in block mode without --strict (unverifiable is let through: the
# parent still has to fill the digest, and the receiver gate refuses it as UNVERIFIED).
BLOCKING: frozenset[Verdict] = frozenset(
    {
        Verdict.TAMPER,
        Verdict.INCONSISTENT,
        Verdict.MISSING_PAYLOAD,
        Verdict.UNSUPPORTED_ALGO,
        Verdict.NO_KEY,
        Verdict.SENDER_UNVERIFIED,
        Verdict.SENDER_MISMATCH,
        Verdict.UNREGISTERED,
    }
)

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_BLOCKED = 3


def exit_code(verdict: Verdict, mode: str, strict: bool) -> int:
    """The orchestrator gate's exit code (see the README's table)."""
    if verdict is Verdict.PASS:
        return EXIT_OK
    if verdict is Verdict.MALFORMED:
        return EXIT_USAGE
    if verdict is Verdict.UNREGISTERED:  # not the hand-off's verdict: nothing to warn through
        return EXIT_BLOCKED
    if mode != "block":
        return EXIT_OK
    if strict or verdict in BLOCKING:
        return EXIT_BLOCKED
    return EXIT_OK


# What a pass rested on, strongest first: ``signed-receipt`` (a verified orchestrator
# receipt), ``sender-signature``, ``hmac``, ``unsigned`` (nothing an agent could not
# have produced).
SIGNED_RECEIPT = "signed-receipt"
SENDER_SIGNATURE = "sender-signature"
HMAC = "hmac"
UNSIGNED = "unsigned"
ORDER = (SIGNED_RECEIPT, UNSIGNED, SENDER_SIGNATURE, HMAC)

UNSIGNED_WARNING = (
    "warning: evidence: unsigned: this project has no trust store (.eidolons/trust.json), "
    "so any writer of the trace could have written this pass (run `eidolons keys init`)"
)


def combine(*parts: str) -> str:
    """``signed-receipt+hmac``: the parts in vocabulary order, ``unsigned`` if none."""
    kept = [p for p in ORDER if p in parts]
    if len(kept) > 1 and UNSIGNED in kept and kept[0] != UNSIGNED:
        kept.remove(UNSIGNED)
    return "+".join(kept) if kept else UNSIGNED
