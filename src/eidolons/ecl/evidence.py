"""What a pass rested on: the ``evidence`` field of every pass (ADR 0030).

Vocabulary, strongest first: ``signed-receipt`` (an orchestrator receipt verified against
the trust store), ``sender-signature`` (the sender's signature over the exact envelope
bytes), ``hmac`` (an HMAC-SHA-256 tag recomputed with the shared key), ``unsigned``
(nothing an agent could not have produced: a bare SHA-256 and an unsigned trace line).
A receiver's evidence starts with the kind of record it decided on (``signed-receipt`` or
``unsigned``); the orchestrator's names only what authenticated the sender's bytes.
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
