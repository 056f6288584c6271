"""The receiver gate (``eidolons verify-incoming ARTIFACT --as RECEIVER``): the shell that
reads, once each, what the pure check (:class:`eidolons.ecl.receiver.ReceiverCheck`, whose
docstring lists the rules) decides on, then records the decision (ADR 0005).

1. Trigger: ``${ARTIFACT%.*}.envelope.json``, else ``ARTIFACT.envelope.json``. Neither:
   skipped unless the project knows a hand-off (:mod:`eidolons.gates.trigger`); both: invalid.
2. The envelope's bytes, read once; the evidence on record (a signed receipt with a trust
   store, else the orchestrator's latest verdict in the trace: ADR 0011); the payload,
   read once by descriptor and hashed (``reverify=False``: only when its bytes are needed);
   the effective contract for ``from -> RECEIVER``.
3. Refusal: a ``verify_fail`` event, ``[<receiver>-verify-incoming] REFUSE: <CODE> from
   <sender>``, exit 3, the payload never handed on. Pass: ``verify_pass`` and ``receive``
   events; only then the exact bytes hashed may be handed on, and a pass that cannot be
   recorded is refused (exit 3).
"""

from __future__ import annotations

import os
import time

from eidolons._text import did_you_mean, printable
from eidolons.ecl.contract import Contracts, ContractSet, ContractSetUnavailable, as_contract_set
from eidolons.ecl.envelope import Envelope
from eidolons.ecl.events import (
    EventType,
    GateName,
    agent_label,
    elapsed_ms,
    trace_event,
    utc_now,
)
from eidolons.ecl.grammar import Limits
from eidolons.ecl.integrity import (
    HMAC,
    SENDER_SIGNATURE,
    SIGNED_RECEIPT,
    UNSIGNED,
    UNSIGNED_WARNING,
    Digest,
    RefusalCode,
    Verdict,
    combine,
)
from eidolons.ecl.receiver import (
    CharCount,
    Failure,
    ReceiptJudgement,
    ReceiverCheck,
    budget_estimate,
    edge_budget,
    judge_record,
    reason_line,
    sections_apply,
)
from eidolons.errors import EidolonsError, InputError, TraceWriteError, UsageError
from eidolons.io import paths as pathstr
from eidolons.io.config import payload_key
from eidolons.io.paths import foreign_projects
from eidolons.io.payload import (
    ENVELOPE_SUFFIX,
    AmbiguousEnvelope,
    PayloadError,
    PayloadLocation,
    Sidecars,
    envelope_of,
    hash_payload,
    locate_payload,
    read_envelope_bytes,
)
from eidolons.keys.store import TrustStoreError, load_trust_store
from eidolons.trace.store import TraceStore, open_store

INTEGRITY_MISMATCH = RefusalCode.INTEGRITY_MISMATCH
UNVERIFIED = RefusalCode.UNVERIFIED
SCHEMA_INVALID = RefusalCode.SCHEMA_INVALID
REFUSAL_CODES = tuple(RefusalCode)


class OnPassError(EidolonsError):
    """``on_pass`` raised after the pass was recorded: the record stands; ``result`` is
    the recorded result, the callback's exception the ``__cause__`` (ADR 0022)."""

    code = "ON_PASS_FAILED"

    def __init__(self, message: str, *, result: IncomingResult) -> None:
        super().__init__(message)
        self.result = result


class IncomingResult:
    """The receiver gate's decision. Truthy only on pass. (Not a dataclass: ADR 0022.)"""

    __slots__ = (
        "artifact",
        "contract_source",
        "envelope",
        "envelope_path",
        "envelope_sha256",
        "evidence",
        "extra",
        "failures",
        "known_handoff",
        "notes",
        "payload",
        "payload_path",
        "payload_sha256",
        "receiver",
        "record",
        "reverified",
        "status",
        "trace_error",
        "trace_path",
    )

    def __init__(self, status: str, receiver: str, artifact: StrPath) -> None:
        self.status = status  # "pass" | "refused" | "skipped"
        self.receiver = receiver
        self.artifact = artifact
        self.envelope_path: StrPath | None = None
        self.envelope: Envelope | None = None
        self.failures: list[Failure] = []
        self.record: dict[str, Any] | None = None
        self.reverified = False
        self.payload: bytes | bytearray | None = None  # the exact bytes hashed; only on pass
        self.payload_path: StrPath | None = None
        self.trace_path: str | None = None  # where the decision was recorded (file or store)
        self.trace_error: str | None = None
        self.contract_source: str | None = None
        self.envelope_sha256: str | None = None  # of the envelope bytes judged
        self.payload_sha256: str | None = None  # of the payload bytes judged (when read)
        self.known_handoff: dict[str, Any] | None = None  # the event naming a payload
        self.evidence: str | None = None  # what the pass rested on (ADR 0010), on pass only
        self.notes: list[str] = []  # warnings about the evidence
        self.extra: dict[str, Any] = {}

    def __repr__(self) -> str:
        return (
            f"IncomingResult(status={self.status!r}, receiver={self.receiver!r}, "
            f"artifact={self.artifact!r}, failures={self.failures!r})"
        )

    def __bool__(self) -> bool:
        return self.status == "pass"

    @property
    def failure_code(self) -> str | None:
        return self.failures[0].code if self.failures else None

    @property
    def sender(self) -> str:
        """The envelope's sender; with the envelope gone, the one the trace names."""
        if self.envelope is not None:
            return self.envelope.sender.eidolon
        known = (self.known_handoff or {}).get("from")
        return known.partition("@")[0] or "unknown" if isinstance(known, str) else "unknown"

    def refusal_line(self) -> str:
        """The seeds' line exactly: ``[<receiver>-verify-incoming] REFUSE: <CODE> from <sender>``"""
        sender = printable(self.sender)
        return f"[{self.receiver}-verify-incoming] REFUSE: {self.failure_code} from {sender}"

    def reason_line(self) -> str:
        """The line printed after the REFUSE line: why, in words (escaped)."""
        return reason_line(self.receiver, self.failures)

    def status_lines(self) -> list[str]:
        """What text mode prints on stderr: the REFUSE line and its reason, one PASS line,
        or one line saying the artifact was skipped and why."""
        tag = f"[{self.receiver}-verify-incoming]"
        if self.status == "skipped":
            from eidolons.gates.skip import skip_line

            return [skip_line(self.receiver, str(self.artifact))]
        if self.status == "pass" and self.envelope is not None:
            env = self.envelope
            kind = printable(env.artifact_kind or "?")
            line = f"{tag} PASS: {kind} from {printable(self.sender)}"
            evidence = f", evidence: {self.evidence}" if self.evidence else ""
            contract = f"; contract {printable(self.contract_source or '?')}"
            return [line + f" (message {printable(env.message_id or '?')}{evidence}{contract})"]
        return [self.refusal_line(), self.reason_line()]

    def to_json(self) -> dict[str, Any]:
        env = self.envelope
        out: dict[str, Any] = {
            "status": self.status,
            "receiver": self.receiver,
            "artifact": str(self.artifact),
            "artefact": str(self.artifact),  # the old spelling, kept for one release
            "envelope": str(self.envelope_path) if self.envelope_path else None,
            "message_id": env.message_id if env else None,
            "thread_id": env.thread_id if env else None,
            "from": str(env.sender) if env else None,
            "to": str(env.recipient) if env else None,
            "performative": env.performative if env else None,
            "artifact_kind": env.artifact_kind if env else None,
            "integrity_method": env.integrity_method if env else None,
            "failure_code": self.failure_code,
            "failures": [f.to_dict() for f in self.failures],
            "record": self.record,
            "reverified": self.reverified,
            "contract": self.contract_source,
            "contract_sources": self.contract_source.split(" + ") if self.contract_source else [],
            "payload": str(self.payload_path) if self.payload_path else None,
            "trace": self.trace_path,
            "evidence": self.evidence,
            "evidence_notes": list(self.notes),
        }
        if self.trace_error:
            out["trace_error"] = self.trace_error
        out.update(self.extra)
        return out


def _receiver_label(env: Envelope | None, receiver: str) -> str:
    if env is not None and env.recipient.eidolon == receiver:
        return agent_label(receiver, env.recipient.version)
    return agent_label(receiver, None)


def _ids(result: IncomingResult) -> tuple[str, str]:
    """(message_id, thread_id) of the hand-off: the envelope's, else (envelope gone) those
    of the trace event that named the payload, else unknown."""
    env, known = result.envelope, result.known_handoff or {}
    message = (env.message_id if env else None) or known.get("message_id")
    thread = (env.thread_id if env else None) or known.get("thread_id")
    return (
        message if isinstance(message, str) and message else "unknown",
        thread if isinstance(thread, str) and thread else "unknown",
    )


def receiver_event(
    result: IncomingResult, kind: str, duration_ms: int | None = None, root: StrPath | None = None
) -> dict[str, Any]:
    env = result.envelope
    fields: dict[str, Any] = {}
    if kind == EventType.VERIFY_FAIL:
        fields["verify_failure_code"] = result.failure_code
        fields["decision"] = "refused"
        fields["failures"] = [f.code for f in result.failures]
    payload = result.payload_path or (result.artifact if env is None else None)
    written = result.extra.get("handback")
    handback = {"handback": str(written)} if kind == EventType.VERIFY_FAIL and written else {}
    return trace_event(
        EventType(kind),
        env,
        gate=GateName.RECEIVER,
        ids=_ids(result),
        payload_path=payload_key(payload, root) if root and payload else None,
        to=_receiver_label(env, result.receiver),
        fields=fields,
        gate_fields={"receiver": result.receiver, **handback},
        reason=result.failures[0].message if kind == EventType.VERIFY_FAIL else None,
        evidence=result.evidence if kind == EventType.VERIFY_PASS else None,
        duration_ms=duration_ms,
    )


class Snapshot:
    """What the route gate read once, handed to the receiver gate so both judge the same
    message: the envelope's exact bytes and the orchestrator's read of the payload (its
    digest, with the bytes when they were kept; the file's identity; or why it could not
    be read). Received in memory (:mod:`eidolons.hosts.a2a`): ``payload`` (hashed as a file
    is), ``sidecars`` (suffix -> bytes, never read from disk), ``payload_path`` (kept there)."""

    __slots__ = (
        "digest", "envelope_bytes", "error", "identity", "payload", "payload_path", "sidecars"
    )  # fmt: skip

    def __init__(
        self,
        envelope_bytes: bytes,
        *,
        digest: Digest | None = None,
        payload_path: StrPath | None = None,
        identity: tuple[int, int] | None = None,
        error: str | None = None,
        payload: bytes | None = None,
        sidecars: Mapping[str, bytes] | None = None,
    ) -> None:
        self.envelope_bytes = envelope_bytes
        self.digest = digest
        self.payload_path = payload_path
        self.identity = identity
        self.error = error
        self.payload = payload
        self.sidecars = sidecars


TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, TypeAlias

    from eidolons.io.paths import StrPath

    #: ``on_envelope(envelope) -> fields``: called once the envelope parses, before any
    #: verdict (memory recall); the fields are added to ``--json``. Never changes the
    #: verdict.
    OnEnvelope: TypeAlias = Callable[[Envelope], Mapping[str, Any]]
    #: ``on_pass(envelope, payload bytes or None) -> fields``: called only after the pass
    #: is on record, with the exact bytes that were verified (memory ingest).
    OnPass: TypeAlias = Callable[[Envelope, bytes | bytearray | None], Mapping[str, Any]]
    #: What :func:`eidolons.gates.trigger.find_handoff` answered (not None) for an
    #: artifact with no envelope, when the caller has asked it already.
    Known: TypeAlias = tuple[str, dict[str, object] | None]


def _identity(path: StrPath) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _unread_payload(envelope_path: StrPath, env: Envelope, root: StrPath) -> str | None:
    """Where the envelope's payload lies when the check did not read it (no re-verify), in
    a sealed project only (elsewhere there is nothing to judge it by); None when it cannot
    be located (the hand-off's reader finds that out itself)."""
    from eidolons.io.config import sealed_handoff_dirs

    if sealed_handoff_dirs(root) is None:
        return None
    try:
        return locate_payload(envelope_path, env.artifact_path, root).path_str
    except PayloadError:
        return None


def _unsealed(root: StrPath, *paths: StrPath) -> str | None:
    """Why a sealed project does not receive from these paths (ADR 0015), or None."""
    from eidolons.io.config import outside_sealed

    for path in paths:
        why = outside_sealed(path, root)
        if why is not None:
            return why
    return None


def evaluate(
    artifact: StrPath,
    receiver: str | None,
    *,
    root: StrPath,
    contracts: Contracts,
    key: bytes | None = None,
    limits: Limits | None = None,
    reverify: bool = True,
    want_payload: bool = False,
    store: TraceStore | None = None,
    require_envelope: bool = False,
    snapshot: Snapshot | None = None,
    on_envelope: OnEnvelope | None = None,
    known: Known | None = None,
) -> IncomingResult:
    """The decision, writing nothing: the envelope (read once, or the route's ``snapshot``),
    the evidence and the payload fed to the check. No envelope: skipped unless a known
    hand-off (``known``: :func:`~eidolons.gates.trigger.find_handoff`'s answer) or
    ``require_envelope``; ``receiver`` None judges as the addressed recipient."""
    limits = limits or Limits()
    contract_set = as_contract_set(contracts)
    artifact = pathstr.pure(artifact)  # spelled as a Path prints it, without pathlib
    result = IncomingResult("refused", receiver or "unknown", artifact)
    try:
        envelope_path = envelope_of(artifact)
    except AmbiguousEnvelope as exc:
        result.failures.append(Failure(SCHEMA_INVALID, "trigger", str(exc)))
        return result
    if envelope_path is None:
        if known is None:
            from eidolons.gates.trigger import find_handoff

            known = find_handoff(artifact, root)
        if known is None and not require_envelope:
            result.status = "skipped"
            return result
        why = known[0] if known else "--require-envelope is set"
        result.known_handoff = known[1] if known else None
        result.failures.append(
            Failure(UNVERIFIED, "envelope", f"{artifact} has no envelope and {why}")
        )
        return result
    result.envelope_path = envelope_path
    check = ReceiverCheck(receiver, limits)
    # step 1: the one read of the envelope; everything below judges these bytes
    if snapshot is not None:
        data = snapshot.envelope_bytes
    else:
        try:
            data = read_envelope_bytes(envelope_path, limits.max_envelope_bytes, root)
        except InputError as exc:
            result.failures.append(Failure(SCHEMA_INVALID, "envelope", str(exc)))
            return result
    env = check.feed_envelope(data)
    foreign = foreign_projects(envelope_path, root) if env is not None else []
    if env is not None and foreign:
        result.envelope = env
        where = f"the hand-off lies in the project at {foreign[0]}, not this root"
        why = "it is judged there, with that project's trust store and trace"
        check.end(UNVERIFIED, "root", f"{where} ({pathstr.realpath(root)}): {why}")
    elif env is not None and (unsealed := _unsealed(root, artifact, envelope_path)):
        result.envelope = env
        result.receiver = check.as_receiver
        check.end(UNVERIFIED, "root", unsealed)
    elif env is not None:
        result.envelope = env
        result.receiver = check.as_receiver
        if isinstance(contract_set, ContractSet):  # build the one edge asked (fail closed)
            contract_set = contract_set.checked(env.sender.eidolon, check.as_receiver)
        if on_envelope is not None:
            result.extra.update(on_envelope(env))
        sidecars = Sidecars(envelope_path, snapshot.sidecars if snapshot else None)
        signed = _feed_record(check, env, sidecars, root, store, result)
        result.reverified = _feed_payload(
            check, env, artifact, envelope_path, root, key, limits, reverify,
            keep=want_payload or sections_apply(env, contract_set, check.as_receiver),
            budget=edge_budget(env, contract_set, check.as_receiver),
            snapshot=snapshot, result=result,
        )  # fmt: skip
        payload_at = result.payload_path or _unread_payload(envelope_path, env, root)
        if payload_at is not None and (unsealed := _unsealed(root, payload_at)):
            check.end(UNVERIFIED, "root", unsealed)  # the payload resolves out of the seal
        elif not check.done:
            check.feed_contracts(contract_set)
    decision = check.decision()
    result.failures = decision.failures
    result.record = decision.record
    result.contract_source = decision.contract_source
    result.envelope_sha256 = decision.envelope_sha256
    result.payload_sha256 = decision.payload_sha256
    if decision:
        result.status = "pass"
        result.payload = decision.payload
        result.evidence = combine(
            SIGNED_RECEIPT if signed else UNSIGNED,
            SENDER_SIGNATURE if decision.sender_signed else "",
            HMAC if decision.hmac_checked else "",
        )
        if not signed:
            result.notes.append(UNSIGNED_WARNING)
        if env is not None and env.integrity_method == "hmac-sha256":
            from eidolons.io.config import hmac_key_warning

            short = hmac_key_warning(key)
            if short is not None:
                result.notes.append(short)
    return result


def _feed_record(
    check: ReceiverCheck,
    env: Envelope,
    sidecars: Sidecars,
    root: StrPath,
    store: TraceStore | None,
    result: IncomingResult,
) -> bool:
    """Step 2: a signed receipt with a trust store (:mod:`eidolons.keys.receipts`), else
    the latest orchestrator verdict in the configured store (unreadable: refused, never a
    fallback, ADR 0014). Returns whether the decision rests on a signed receipt."""
    now = utc_now()
    try:
        trust = load_trust_store(root)
    except TrustStoreError as exc:
        problem = (UNVERIFIED, f"trust store unusable: {exc}")
        check.feed_record(None, receipt=ReceiptJudgement(problem))
        return False
    signer: dict[str, Any] = {"sender_signed": False, "sender_problem": None}
    if trust is not None:  # senders' rules exist only with a trust store: imported then
        from eidolons.keys.receipts import check_sender_signature, sender_signature_required

        if sender_signature_required(trust, env.sender.eidolon, check.as_receiver):
            # the sender's signature over the exact envelope bytes, when the store asks for
            # it (ADR 0011); a valid one stands in for HMAC at high trust
            found = check_sender_signature(
                sidecars, check.envelope_sha256 or "", env.sender.eidolon, trust, now
            )
            signer = {"sender_signed": found is None, "sender_problem": found}
    if not check.wants_record or env.message_id is None:
        check.feed_record(None, **signer)
        return False
    lookup = store if store is not None else open_store(root)
    try:
        record = lookup.latest_verdict(env.thread_id, env.message_id)
    except InputError as exc:  # unreadable trace file, unreachable or misconfigured store
        # not even a genuine receipt file beside the envelope stands in for a store that
        # cannot be read: it may be older than the verdict the store holds (ADR 0014)
        check.feed_record(None, unreadable=str(exc), **signer)
        return False
    finally:
        if lookup is not store:
            lookup.close()
    if trust is None:
        downgrade = None
        if judge_record(env, record, check.envelope_sha256 or "") is None:
            # a hand-off carrying a signed receipt in a project without a trust store:
            # the trust store was deleted to downgrade it to unsigned mode (ADR 0011)
            from eidolons.keys.receipts import signed_without_trust_store

            downgrade = signed_without_trust_store(sidecars, record)
        judgement = ReceiptJudgement((UNVERIFIED, downgrade), check="record") if downgrade else None
        check.feed_record(record, receipt=judgement, **signer)
        return False
    from eidolons.keys.receipts import receiver_evidence

    receipt, judged, seen = receiver_evidence(
        sidecars, record, trust, now, message_id=env.message_id,
        envelope_sha256=check.envelope_sha256 or "",
    )  # fmt: skip
    result.extra["receipts"] = [j.to_dict() for j in seen]
    subject = receipt.subject_sha256 if receipt is not None else None
    check.feed_record(record, receipt=ReceiptJudgement(judged, subject), **signer)
    return receipt is not None and judged is None


def _feed_payload(
    check: ReceiverCheck,
    env: Envelope,
    artifact: StrPath,
    envelope_path: StrPath,
    root: StrPath,
    key: bytes | None,
    limits: Limits,
    reverify: bool,
    *,
    keep: bool,
    budget: int | None = None,
    snapshot: Snapshot | None,
    result: IncomingResult,
) -> bool:
    """Step 3: whatever bytes the gate reads it hashes, and only bytes matching the tag
    are judged or handed on (``reverify`` off: read only when ``keep`` or the budget needs
    them). The file hashed must be ARTIFACT itself (same device and inode). Returns
    whether the payload was re-verified."""
    names_artifact = not pathstr.name(artifact).endswith(ENVELOPE_SUFFIX)
    wanted = _identity(artifact) if names_artifact else None

    def same(identity: tuple[int, int] | None) -> bool:
        return not names_artifact or (identity is not None and identity == wanted)

    if not check.wants_payload:
        check.feed_payload(None)
        return False
    received = snapshot.payload if snapshot is not None else None  # a hand-off in memory
    result.payload_path = snapshot.payload_path if snapshot is not None else None
    if snapshot is not None and received is None:  # the route gate's one read of the payload
        if snapshot.error is not None or snapshot.digest is None:
            check.feed_payload(None, error=snapshot.error or "the route gate hashed no payload")
        elif keep and snapshot.digest.data is None:
            check.feed_payload(None, error="the route gate did not keep the bytes to judge")
        else:
            check.feed_payload(
                snapshot.digest, is_artifact=same(snapshot.identity), artifact=str(artifact)
            )
        return True
    # the edge's budget (B-1) is judged on characters, counted while hashing; without
    # re-verification the file's size is an upper bound, and only a size over the budget
    # makes the gate read (and verify) the bytes to count exactly
    if not reverify and not keep and received is None:
        located = None
        if names_artifact or budget is not None:
            try:
                located = locate_payload(envelope_path, env.artifact_path, root)
            except PayloadError as exc:
                check.feed_payload(None, error=str(exc), check="payload")
                return False
            result.payload_path = located.path_str
        size = located.opened.st.st_size if located and located.opened else None
        over = budget is not None and (budget_estimate(env, None, size) or 0) > budget
        if not over:
            is_artifact = same(located.identity) if names_artifact and located else True
            check.feed_payload(None, is_artifact=is_artifact, artifact=str(artifact), size=size)
            return False
    name = "reverify" if reverify else "payload"
    try:  # the one read: hashed here, judged by the check (judge_digest, once)
        source: PayloadLocation | bytes | None = received  # in memory: hashed as a file is
        if source is None:
            source = location = locate_payload(envelope_path, env.artifact_path, root)
            result.payload_path = location.path_str
        if env.integrity_method == "hmac-sha256" and key is None:
            message = "integrity.method is hmac-sha256 but ECL_HMAC_KEY is unset"
            check.feed_payload(None, error=f"[{Verdict.NO_KEY}] {message}", check=name)
            return reverify
        count = CharCount() if budget is not None and not keep else None
        digest = hash_payload(
            source, env.integrity_method, key, max_bytes=limits.max_payload_bytes, keep=keep,
            sink=count,
        )  # fmt: skip
    except PayloadError as exc:
        check.feed_payload(None, error=f"[{Verdict.MISSING_PAYLOAD}] {exc}", check=name)
        return reverify
    in_memory = received is not None  # nothing on disk to compare with ARTIFACT
    check.feed_payload(
        digest, is_artifact=in_memory or same(location.identity), artifact=str(artifact),
        check=name, chars=count.total() if count is not None else None,
    )  # fmt: skip
    return reverify


def verify_incoming(
    artifact: StrPath,
    receiver: str | None,
    *,
    root: StrPath,
    contracts: Contracts,
    key: bytes | None = None,
    limits: Limits | None = None,
    reverify: bool = True,
    write_trace: bool = True,
    want_payload: bool = False,
    store: TraceStore | None = None,
    require_envelope: bool = False,
    snapshot: Snapshot | None = None,
    on_envelope: OnEnvelope | None = None,
    on_pass: OnPass | None = None,
    handback: bool = True,
    known: Known | None = None,
) -> IncomingResult:
    """:func:`evaluate`, then the decision recorded in the thread's trace (``store``, else
    the project's). ``on_envelope`` runs before the verdict (recall), ``on_pass`` only
    after a pass is on record, with the bytes verified (ingest: ADR 0021; if it raises:
    :class:`OnPassError`). ``handback``: a refusal writes the orchestrator's hand-back.
    Raises :class:`UsageError`, recording nothing, for a ``receiver`` no contract names."""
    own = store is None
    store = open_store(root) if store is None else store
    start = time.monotonic_ns()
    try:
        # ingest needs the verified bytes; with --no-reverify they are read only if needed
        want_payload = want_payload or (on_pass is not None and reverify)
        result = evaluate(
            artifact, receiver, root=root, contracts=contracts, key=key, limits=limits,
            reverify=reverify, want_payload=want_payload, store=store,
            require_envelope=require_envelope, snapshot=snapshot, on_envelope=on_envelope,
            known=known,
        )  # fmt: skip
        if not result and result.status != "skipped" and receiver is not None:
            _known_receiver(as_contract_set(contracts), result.receiver)
        if result.status != "skipped" and write_trace:
            if not result and handback and result.failures:
                # before the verify_fail event, which names it: the refusal stays the
                # thread's last word, and whoever reads it finds the hand-back
                from eidolons.gates.handback import write_handback

                written = write_handback(result, root, store)
                if written is not None:
                    result.extra["handback"] = str(written)
            _record(result, store, elapsed_ms(start), root)
    finally:
        if own:
            store.close()
    if result.status == "skipped" or not write_trace:
        return result
    if on_pass is not None and result and result.envelope is not None:
        try:
            result.extra.update(on_pass(result.envelope, result.payload))
        except Exception as exc:  # the pass is on record: it stands, and the caller is told
            why = f"{exc.__class__.__name__}: {exc}"
            result.extra["on_pass_error"] = why
            raise OnPassError(
                f"the pass is on record ({result.trace_path}); on_pass failed: {why}",
                result=result,
            ) from exc
    return result


def _known_receiver(contracts: ContractSet | ContractSetUnavailable, receiver: str) -> None:
    """Raise :class:`UsageError`, naming the nearest, when no contract of a loaded set
    names ``receiver``: a mistyped ``--as``, not a refusal to record (asked on a refusal
    only: a pass names its edge)."""
    known = contracts.receivers() if isinstance(contracts, ContractSet) else {receiver}
    if receiver not in known:
        near = did_you_mean(receiver, known)
        raise UsageError(f"no contract names a receiver {printable(receiver)!r}{near}")


def _record(result: IncomingResult, store: TraceStore, took: int, root: StrPath) -> None:
    """Rules 6-7's records (``took``: the decision's duration in milliseconds). Fail
    closed: an unrecorded pass hands nothing over."""
    thread = _ids(result)[1]
    try:
        if result:
            kinds = (EventType.VERIFY_PASS, EventType.RECEIVE)
            events = [receiver_event(result, kind, took, root) for kind in kinds]
            appended = store.append_all(thread, events)[-1]
        else:
            verdict = receiver_event(result, EventType.VERIFY_FAIL, took, root)
            appended = store.append(thread, verdict)
        result.trace_path = appended.location
    except TraceWriteError as exc:
        result.trace_error = str(exc)
        if result:  # refused as every refusal is: a code, a REFUSE line, a reason
            result.status = "refused"
            result.payload = None
            result.failures.append(
                Failure(UNVERIFIED, "record", "the pass could not be recorded in the trace")
            )
