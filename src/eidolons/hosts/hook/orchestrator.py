"""The orchestrator gate in the hook (ADR 0015): when the main loop starts subagent R, the
hand-offs addressed to R with no orchestrator verdict on record for their envelope bytes
go through ``verify-envelope --block`` in the hook's process (outside the sandbox, where
the key is), and a refusal denies the dispatch; the main loop reads a hand-off only as
the orchestrator gate passed it (:func:`orchestrator_read`).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from eidolons.ecl.envelope import parse_envelope
from eidolons.ecl.integrity import RefusalCode
from eidolons.errors import EnvelopeError, InputError
from eidolons.io.config import Limits, hmac_key
from eidolons.io.payload import (
    ENVELOPE_SUFFIX,
    AmbiguousEnvelope,
    find_envelope,
    read_envelope_bytes,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from eidolons.hosts.hook.events import Layout

INTEGRITY_MISMATCH = RefusalCode.INTEGRITY_MISMATCH
UNVERIFIED = RefusalCode.UNVERIFIED
SCHEMA_INVALID = RefusalCode.SCHEMA_INVALID


#: at most this many envelopes are looked at per dispatch; more fails closed
MAX_ENVELOPES = 2000


class Unscanned(Exception):
    """The hand-offs could not all be looked at: past :data:`MAX_ENVELOPES`, or a directory
    that cannot be listed (its hand-offs would go undecided)."""


def addressed(handoff_dirs: tuple[str, ...], target: str) -> list[str]:
    """The envelopes in ``handoff_dirs`` (recursively, links not followed) whose receiver
    is ``target``; raises :class:`Unscanned` when they cannot all be looked at."""

    limits = Limits.from_env(os.environ)
    found: list[str] = []
    seen = 0
    stack = list(handoff_dirs)
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except FileNotFoundError:
            continue  # a configured hand-off directory not made yet (or one just removed)
        except OSError as exc:
            raise Unscanned(f"cannot list {directory} ({exc.strerror})") from None
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
                continue
            if not entry.name.endswith(ENVELOPE_SUFFIX):
                continue
            seen += 1
            if seen > MAX_ENVELOPES:
                raise Unscanned(f"more than {MAX_ENVELOPES} envelopes in the hand-offs")
            try:
                data = read_envelope_bytes(entry.path, limits.max_envelope_bytes)
                env = parse_envelope(data, limits)
            except (EnvelopeError, InputError):
                found.append(entry.path)  # unreadable: the gate says why
                continue
            if env.recipient.eidolon == target:
                found.append(entry.path)
    return found


def gate_pending(layout: Layout, target: str) -> tuple[list[str], list[str]]:
    """``(refusal lines, pass lines)`` of the orchestrator gate run now over the hand-offs
    addressed to ``target`` that have no verdict on record for their envelope bytes."""
    try:
        pending = addressed(layout.handoff_dirs, target)
    except Unscanned as exc:
        return [f"eidolons hook: {exc}; run `eidolons verify-envelope` on them yourself"], []
    refusals: list[str] = []
    passed: list[str] = []
    for path in pending:
        refused, line = gate_one(layout.root, path)
        if refused:
            refusals.extend(refused)
        elif line:
            passed.append(line)
    return refusals, passed


def gate_one(root: str, envelope: str) -> tuple[list[str], str | None]:
    """The orchestrator gate (:func:`eidolons.gates.orchestrator.run_gate`) over one envelope
    unless a verdict over its exact bytes is on record: ``(refusal lines, None)``, ``([],
    pass line)``, or ``([], None)`` when it was judged already."""
    from eidolons._text import printable
    from eidolons.gates.orchestrator import run_gate, text_line

    limits = Limits.from_env(os.environ)
    try:
        if _on_record(envelope, root, limits.max_envelope_bytes):
            return [], None
    except InputError:
        pass  # the trace cannot be read: the gate below says so and refuses
    outcome = run_gate(envelope, root=root, mode="block", key=hmac_key(), limits=limits)
    line = text_line(outcome)
    if outcome.exit_code == 0:
        return [], line
    env = outcome.result.envelope
    sender = env.sender.eidolon if env is not None else "unknown"
    code = outcome.result.verdict.failure_code or "SCHEMA_INVALID"
    return [
        f"[orchestrator-verify-incoming] REFUSE: {code} from {printable(sender)}",
        f"reason: {line}",
    ], None


def _on_record(path: str, root: str, max_bytes: int) -> bool:
    """Whether the latest orchestrator verdict for the envelope's message is over these
    exact envelope bytes (a pass or a refusal already decided)."""
    from eidolons.trace.store import open_store

    try:
        data = read_envelope_bytes(path, max_bytes)
        env = parse_envelope(data)
    except (EnvelopeError, InputError):
        return False
    if env.message_id is None:
        return False
    with open_store(root) as store:
        record = store.latest_verdict(env.thread_id, env.message_id)
    return record is not None and record.get("envelope_sha256") == hashlib.sha256(data).hexdigest()


def orchestrator_read(
    path: Path, root: Path
) -> tuple[tuple[str, str, str] | None, tuple[str, str] | None]:
    """Rule 4, with the receiver gate's rules called, not copied (the record, a signed
    receipt with a trust store, the digest recomputed now): ``(None, (sha256, real path))``
    when the main loop may read ``path`` (``(None, None)`` for an envelope), else
    ``((code, sender, reason), None)``. Writes nothing to the trace."""
    from eidolons.ecl.events import utc_now
    from eidolons.ecl.integrity import Verdict
    from eidolons.ecl.receiver import judge_record
    from eidolons.gates.verify import verify_parsed
    from eidolons.keys.receipts import receiver_evidence, signed_without_trust_store
    from eidolons.keys.store import TrustStoreError, load_trust_store
    from eidolons.trace.store import open_store

    if path.name.endswith(ENVELOPE_SUFFIX):
        return None, None
    try:
        envelope_path = find_envelope(path)
    except AmbiguousEnvelope as exc:
        return (SCHEMA_INVALID, "unknown", str(exc)), None
    if envelope_path is None:
        why = f"{path.name} is in a hand-off directory but has no envelope"
        return (UNVERIFIED, "unknown", why), None
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
