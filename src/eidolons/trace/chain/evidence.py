"""What a recorded verdict is worth: its receipt checked, never the line's ``evidence``
claim (anyone who can append can write one).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from eidolons.ecl.events import utc_now
from eidolons.keys.store import TrustStoreError, load_trust_store
from eidolons.trace.chain import Hop
from eidolons.trace.verify import receipt_status


def check_receipts(hops: Sequence[Hop], root: Path) -> tuple[bool, str | None]:
    """Set ``receipt_status`` on every orchestrator decision. Returns (the project has a
    trust store, a problem line when the trust store cannot be read)."""
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
