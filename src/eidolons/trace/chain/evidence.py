"""What a recorded verdict is worth: its receipt checked, not its line believed.

A trace line's ``evidence`` field is what the writer of the line *claims*; anyone who can
append to the trace can write ``"evidence": "signed-receipt"``. The views that show
evidence (``trace report``, ``trace export --otlp``) therefore check each orchestrator
verdict's receipt against the project's trust store with the one receipt rule
(:func:`eidolons.trace.verify.receipt_status`) and show that status beside the claim.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from eidolons.trace.chain import Hop


def check_receipts(hops: Sequence[Hop], root: Path) -> tuple[bool, str | None]:
    """Set ``receipt_status`` on every orchestrator decision. Returns (the project has a
    trust store, a problem line when the trust store cannot be read)."""
    from eidolons.ecl.events import utc_now
    from eidolons.keys.store import TrustStoreError, load_trust_store
    from eidolons.trace.verify import receipt_status

    problem = None
    try:
        trust = load_trust_store(root)
    except TrustStoreError as exc:
        trust, problem = None, f"{exc}; receipts not checked"
    now = utc_now()
    for hop in hops:
        for d in hop.decisions:
            if d.gate == "orchestrator":
                d.receipt_status = (
                    "unchecked (trust store unreadable)"
                    if problem
                    else receipt_status(dict(d.record), trust, now)
                )
    return trust is not None or problem is not None, problem
