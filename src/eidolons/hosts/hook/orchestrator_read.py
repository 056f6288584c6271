"""May the main loop read this hand-off? Only what the orchestrator gate passed.

The receiver gate's rules, called, not copied: the trigger, the record (the latest
orchestrator event for the ``message_id`` is a ``verify_pass`` for this method, tag and
envelope bytes; with a trust store, only a signed receipt), the digest recomputed now
over the file about to be read. Envelopes are readable. Nothing is written to the trace.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from eidolons.ecl.envelope import parse_envelope
from eidolons.ecl.events import utc_now
from eidolons.ecl.integrity import Verdict
from eidolons.ecl.receiver import judge_record
from eidolons.errors import EnvelopeError, InputError
from eidolons.gates.receiver import INTEGRITY_MISMATCH, SCHEMA_INVALID, UNVERIFIED
from eidolons.gates.verify import verify_parsed
from eidolons.io.config import Limits, hmac_key
from eidolons.io.payload import (
    ENVELOPE_SUFFIX,
    AmbiguousEnvelope,
    find_envelope,
    read_envelope_bytes,
)
from eidolons.keys.receipts import receiver_evidence, signed_without_trust_store
from eidolons.keys.store import TrustStoreError, load_trust_store
from eidolons.trace.store import open_store

Refusal = tuple[str, str, str]  # (code, sender, reason)
Verified = tuple[str, str]  # (the payload's SHA-256 verified now, its real path)


def check_orchestrator_read(path: Path, root: Path) -> tuple[Refusal | None, Verified | None]:
    """``(None, verified)`` when the main loop may read ``path`` (``verified`` None for an
    envelope); else ``(refusal, None)``."""
    if path.name.endswith(ENVELOPE_SUFFIX):
        return None, None
    try:
        envelope_path = find_envelope(path)
    except AmbiguousEnvelope as exc:
        return (SCHEMA_INVALID, "unknown", str(exc)), None
    if envelope_path is None:
        return (
            UNVERIFIED,
            "unknown",
            f"{path.name} is in a hand-off directory but has no envelope",
        ), None
    limits = Limits.from_env(os.environ)
    try:
        data = read_envelope_bytes(envelope_path, limits.max_envelope_bytes)
        env = parse_envelope(data, limits)
    except (EnvelopeError, InputError) as exc:
        return (SCHEMA_INVALID, "unknown", str(exc)), None
    sender = env.sender.eidolon
    if env.message_id is None:
        return (UNVERIFIED, sender, "the envelope has no message_id to look up"), None
    try:
        with open_store(root) as store:
            record = store.latest_verdict(env.thread_id, env.message_id)
    except InputError as exc:
        return (UNVERIFIED, sender, f"the trace cannot be read: {exc}"), None
    envelope_sha256 = hashlib.sha256(data).hexdigest()
    try:  # with a trust store only a signed receipt is evidence, as for every receiver
        trust = load_trust_store(root)
    except TrustStoreError as exc:
        return (UNVERIFIED, sender, f"trust store unusable: {exc}"), None
    receipt = None
    if trust is None:
        judged = judge_record(env, record, envelope_sha256)
        if judged is None:
            downgrade = signed_without_trust_store(envelope_path, record)
            judged = (UNVERIFIED, downgrade) if downgrade is not None else None
    else:
        receipt, judged, _ = receiver_evidence(
            envelope_path,
            record,
            trust,
            utc_now(),
            message_id=env.message_id,
            envelope_sha256=envelope_sha256,
        )
    if judged is not None:
        return (judged[0], sender, judged[1]), None
    check = verify_parsed(
        env,
        envelope_path,
        envelope_sha256=envelope_sha256,
        root=root,
        limits=limits,
        key=hmac_key(),
    )
    if check.verdict is not Verdict.PASS:
        return (INTEGRITY_MISMATCH, sender, f"[{check.verdict}] {check.message}"), None
    if receipt is not None and (
        check.digest is None or receipt.subject_sha256 != check.digest.sha256
    ):
        return (INTEGRITY_MISMATCH, sender, "the signed receipt is for other payload bytes"), None
    if not _same_file(path, check.payload_real):
        return (INTEGRITY_MISMATCH, sender, f"{path} is not the payload the envelope names"), None
    assert check.digest is not None and check.payload_real is not None  # a pass hashed them
    return None, (check.digest.sha256, str(check.payload_real))


def _same_file(a: Path, b: Path | str | None) -> bool:
    if b is None:
        return False
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)
