"""What a pass rested on: the ``evidence`` field of every pass (ADR 0030), strongest
first: ``signed-receipt`` (a verified orchestrator receipt), ``sender-signature``,
``hmac``, ``unsigned`` (nothing an agent could not have produced).
"""

from __future__ import annotations

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
