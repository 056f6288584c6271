"""The orchestrator gate in the hook (ADR 0015): when the main loop starts subagent R, the
hand-offs addressed to R with no orchestrator verdict on record for their envelope bytes
go through ``verify-envelope --block`` in the hook's process (outside the sandbox, where
the key is); a refusal denies the dispatch. The main loop's read of an unjudged hand-off
runs the same gate first (:func:`gate_one`). :func:`eidolons.gates.orchestrator.run_gate`
decides and records.
"""

from __future__ import annotations

import hashlib
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from eidolons.hosts.hook.events import Layout

#: at most this many envelopes are looked at per dispatch; more fails closed
MAX_ENVELOPES = 2000


def addressed(handoff_dirs: tuple[str, ...], target: str) -> list[str]:
    """The envelopes in ``handoff_dirs`` (recursively, links not followed) whose receiver
    is ``target``; raises :class:`OverflowError` past :data:`MAX_ENVELOPES`."""
    from eidolons.ecl.envelope import parse_envelope
    from eidolons.ecl.grammar import Limits
    from eidolons.errors import EnvelopeError, InputError
    from eidolons.io.paths import ENVELOPE_SUFFIX
    from eidolons.io.payload import read_envelope_bytes

    limits = Limits.from_env(os.environ)
    found: list[str] = []
    seen = 0
    stack = list(handoff_dirs)
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
                continue
            if not entry.name.endswith(ENVELOPE_SUFFIX):
                continue
            seen += 1
            if seen > MAX_ENVELOPES:
                raise OverflowError(f"more than {MAX_ENVELOPES} envelopes in the hand-offs")
            try:
                env = parse_envelope(
                    read_envelope_bytes(entry.path, limits.max_envelope_bytes), limits
                )
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
    except OverflowError as exc:
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
    """The orchestrator gate over one envelope unless a verdict over its exact bytes is on
    record: ``(refusal lines, None)``, ``([], pass line)``, or ``([], None)`` when it was
    judged already."""
    from eidolons._text import printable
    from eidolons.errors import InputError
    from eidolons.gates.orchestrator import run_gate, text_line
    from eidolons.io.config import Limits, hmac_key

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
    from eidolons.ecl.envelope import parse_envelope
    from eidolons.errors import EnvelopeError, InputError
    from eidolons.io.payload import read_envelope_bytes
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
