"""The receiver gate (``eidolons verify-incoming ARTEFACT --as RECEIVER``).

Blocking and symmetric: every receiver runs this same code; only the inbound contracts
differ. What the VIGIL and Gilgamesh verify-incoming skills describe, made mechanical.
Checks, in order (``--json`` reports every failed check; the refusal line names the first):

1. Trigger: the envelope is ``${ARTEFACT%.*}.envelope.json``, else
   ``ARTEFACT.envelope.json`` (an ARTEFACT that is itself ``*.envelope.json`` is taken as
   the envelope). Neither: not an ECL hand-off, skipped (exit 0). Both: ambiguous,
   refused as SCHEMA_INVALID.
2. The envelope parses strictly and meets the schema -> else SCHEMA_INVALID. Its own
   integrity fields are judged first: an unsupported method is SCHEMA_INVALID, a
   placeholder digest UNVERIFIED, ``artifact.sha256`` differing from the tag
   INTEGRITY_MISMATCH.
3. Integrity on record: the latest ``verify_pass``/``verify_fail`` event for the
   envelope's ``message_id`` written by the orchestrator gate (``gate: "orchestrator"``)
   in the thread's trace, read from the end. Confirmed only by a ``verify_pass`` whose
   ``integrity_method`` and ``integrity_value`` equal the envelope's (a pass for another
   digest under the same ``message_id`` is a swapped envelope: INTEGRITY_MISMATCH). A
   ``verify_fail`` on record -> INTEGRITY_MISMATCH; nothing on record -> UNVERIFIED.
   Events written by receivers (``gate: "receiver"``), by hand without a gate, or by other
   tools are never integrity evidence.
4. Defense in depth (default): the digest is recomputed now, with the orchestrator's
   resolution and limits; any non-pass -> INTEGRITY_MISMATCH, whatever the trace says.
   With ``reverify=False`` the decision rests on the record, and the payload is read only
   when its bytes are needed (required sections, handing it over); bytes the gate reads
   are always hashed, and bytes that do not match the tag are refused, never judged or
   handed on.
5. Contract conformance for ``from.eidolon -> RECEIVER`` (rules in
   :mod:`eidolons.ecl.conformance`): ``to.eidolon`` is not the receiver or no contract ->
   UNDECLARED_EDGE; C-2 -> PERFORMATIVE_NOT_ALLOWED; C-3 -> ARTIFACT_KIND_NOT_ALLOWED;
   D-1/D-2 -> CONTEXT_OVER_BUDGET; a Markdown payload missing a required section ->
   MISSING_REQUIRED_SECTION. A contract set that fails to load refuses (UNDECLARED_EDGE):
   a broken contract is never an allow.
6. Refusal: a ``verify_fail`` event (``gate: "receiver"``, ``decision: "refused"``) is
   appended, ``[<receiver>-verify-incoming] REFUSE: <CODE> from <sender>`` is printed,
   exit 3, and the payload is never printed.
7. Pass: ``verify_pass`` and ``receive`` events are appended; only then may the payload be
   handed on, and only the exact bytes that were hashed. If the pass cannot be recorded,
   the gate refuses to hand the payload over (exit 3).
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eidolons import senders
from eidolons._text import printable
from eidolons.config import find_handoff, foreign_projects, payload_key
from eidolons.ecl.envelope import Envelope, parse_envelope
from eidolons.ecl.events import EventType, GateName, agent_label, elapsed_ms, trace_event, utc_now
from eidolons.ecl.limits import Limits
from eidolons.ecl.verdict import RefusalCode, Verdict
from eidolons.errors import EnvelopeError, InputError, TraceWriteError
from eidolons.evidence import (
    HMAC,
    SENDER_SIGNATURE,
    SIGNED_RECEIPT,
    UNSIGNED,
    UNSIGNED_WARNING,
    combine,
)
from eidolons.keys.store import TrustStoreError, load_trust_store
from eidolons.payload import (
    ENVELOPE_SUFFIX,
    AmbiguousEnvelope,
    PayloadError,
    find_envelope,
    locate_payload,
    read_envelope_bytes,
)
from eidolons.tracestore import TraceStore, open_store
from eidolons.verify import precheck, verify_parsed

TYPE_CHECKING = False
if TYPE_CHECKING:
    from eidolons.ecl.contract import Contract

GATE = GateName.RECEIVER

INTEGRITY_MISMATCH = RefusalCode.INTEGRITY_MISMATCH
UNVERIFIED = RefusalCode.UNVERIFIED
SCHEMA_INVALID = RefusalCode.SCHEMA_INVALID
UNDECLARED_EDGE = RefusalCode.UNDECLARED_EDGE
MISSING_REQUIRED_SECTION = RefusalCode.MISSING_REQUIRED_SECTION
CONTEXT_OVER_BUDGET = RefusalCode.CONTEXT_OVER_BUDGET
REFUSAL_CODES = tuple(RefusalCode)


def judge_record(
    env: Envelope, record: dict[str, Any] | None, envelope_sha256: str
) -> tuple[str, str] | None:
    """Rule 3, pure: None when the record confirms this envelope's integrity. The record
    must be a pass for this method and tag, over these exact envelope bytes: a sender,
    performative, kind or path rewritten after the orchestrator's pass is not covered."""
    if record is None:
        return UNVERIFIED, "no verify_pass on record for this message_id"
    if record.get("event") == "verify_fail":
        code = record.get("verify_failure_code")
        return INTEGRITY_MISMATCH, f"the orchestrator gate recorded verify_fail ({code})"
    if record.get("integrity_method") != env.integrity_method:
        return INTEGRITY_MISMATCH, (
            f"the pass on record is for integrity_method {record.get('integrity_method')!r}, "
            f"the envelope declares {env.integrity_method!r}"
        )
    if record.get("integrity_value") != env.integrity_value:
        return INTEGRITY_MISMATCH, "the pass on record is for another digest (envelope swapped)"
    if env.integrity_method == "sha256" and record.get("payload_sha256") != env.integrity_value:
        return INTEGRITY_MISMATCH, "the pass on record hashed other bytes"
    if record.get("envelope_sha256") != envelope_sha256:
        return INTEGRITY_MISMATCH, "the envelope is not the one the orchestrator verified"
    return None


def _file_size(path: Path | None) -> int | None:
    try:
        return os.stat(path).st_size if path is not None else None
    except OSError:
        return None


def _same_file(a: Path, b: Path) -> bool:
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


@dataclass(frozen=True, slots=True)
class Failure:
    code: str
    check: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "check": self.check, "message": self.message}


@dataclass(slots=True)
class IncomingResult:
    """The receiver gate's decision. Truthy only on pass."""

    status: str  # "pass" | "refused" | "skipped"
    receiver: str
    artefact: Path
    envelope_path: Path | None = None
    envelope: Envelope | None = None
    failures: list[Failure] = field(default_factory=list)
    record: dict[str, Any] | None = None
    reverified: bool = False
    payload: bytes | None = None  # the exact bytes hashed; set only on pass
    payload_path: Path | None = None
    trace_path: str | None = None  # where the decision was recorded (a file, or the store)
    trace_error: str | None = None
    contract_source: str | None = None
    known_handoff: dict[str, Any] | None = None  # the event naming an envelope-less payload
    evidence: str | None = None  # what the pass rested on (ADR 0030); None unless pass
    notes: list[str] = field(default_factory=list)  # warnings about the evidence
    extra: dict[str, Any] = field(default_factory=dict)

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
        first, *others = self.failures or [Failure(UNVERIFIED, "gate", "refused")]
        line = f"[{self.receiver}-verify-incoming] reason: {printable(first.message)}"
        if others:
            also = ", ".join(f"{f.code} ({f.check})" for f in others)
            line += f" (also: {printable(also)})"
        return line

    def status_lines(self) -> list[str]:
        """What text mode prints on stderr: the REFUSE line and its reason, one PASS line,
        or one line saying the artefact was skipped and why."""
        tag = f"[{self.receiver}-verify-incoming]"
        if self.status == "skipped":
            return [
                f"{tag} SKIP: {printable(str(self.artefact))} has no envelope and is not a "
                "known hand-off (not an ECL hand-off; --require-envelope refuses it)"
            ]
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
            "artefact": str(self.artefact),
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
    result: IncomingResult, kind: str, duration_ms: int | None = None, root: Path | None = None
) -> dict[str, Any]:
    env = result.envelope
    fields: dict[str, Any] = {}
    if kind == EventType.VERIFY_FAIL:
        fields["verify_failure_code"] = result.failure_code
        fields["decision"] = "refused"
        fields["failures"] = [f.code for f in result.failures]
    payload = result.payload_path or (result.artefact if env is None else None)
    return trace_event(
        EventType(kind),
        env,
        gate=GateName.RECEIVER,
        ids=_ids(result),
        payload_path=payload_key(payload, root) if root and payload else None,
        to=_receiver_label(env, result.receiver),
        fields=fields,
        gate_fields={"receiver": result.receiver, **_handback_field(result, kind)},
        reason=result.failures[0].message if kind == EventType.VERIFY_FAIL else None,
        evidence=result.evidence if kind == EventType.VERIFY_PASS else None,
        duration_ms=duration_ms,
    )


def _handback_field(result: IncomingResult, kind: str) -> dict[str, str]:
    written = result.extra.get("handback")
    if kind != EventType.VERIFY_FAIL or not written:
        return {}
    return {"handback": str(written)}


def envelope_failures(env: Envelope, *, signed_sender: bool = False) -> list[Failure]:
    """Rule 2's schema and conformance MUSTs that need no payload nor contract (E-*,
    S-*, I-5): the rules `eidolons check` applies, so a hand-off `check` fails is never
    accepted; a valid sender signature stands in for HMAC at high trust (I-5; ADR 0034).
    Pure; the sender's self-check calls it too."""
    from eidolons.ecl.conformance import envelope_results, hmac_at_high_trust_result, ise_results

    out: list[Failure] = []
    problems = env.schema_problems()
    if problems:
        out.append(Failure(SCHEMA_INVALID, "schema", "; ".join(problems)))
    gates = [
        *envelope_results(env.data),
        *ise_results(env.data),
        *([] if signed_sender else [hmac_at_high_trust_result(env.data)]),
    ]
    for gate in gates:
        if gate.status == "fail" and gate.level == "MUST":
            out.append(Failure(SCHEMA_INVALID, gate.id, f"{gate.name}: {gate.reason}"))
    return out


def needs_payload(env: Envelope, contract: Contract | None) -> bool:
    """Whether :func:`contract_failures` needs the payload's bytes (required sections)."""
    art = contract.artifact_for_kind(env.artifact_kind or "") if contract is not None else None
    return art is not None and bool(art.required_sections)


def budget_estimate(env: Envelope, payload: bytes | None, payload_size: int | None) -> int | None:
    """The receiver's own figure for what a hand-off puts in its context (ADR 0025): the
    payload and the context summary, at the spec's heuristic of 4 characters a token
    (rounded up). From the verified bytes when given, else from ``payload_size`` (bytes,
    an upper bound on characters); None when neither is known."""
    if payload is not None:
        chars = len(payload.decode("utf-8", "replace"))
    elif payload_size is not None:
        chars = payload_size
    else:
        return None
    delta = env.context_delta
    summary = delta.get("summary") if delta is not None else None
    chars += len(summary) if isinstance(summary, str) else 0
    return (chars + 3) // 4


def contract_failures(
    env: Envelope,
    contract: Contract | None,
    payload: bytes | None,
    *,
    signed_sender: bool = False,
    payload_size: int | None = None,
) -> list[Failure]:
    """Rule 5 for an envelope addressed to ``contract``'s receiver, pure: every rule of the
    effective contract that needs no trace record. The receiver gate and the sender's
    self-check (``emit``) both call this, so they refuse with the same codes and reasons.
    ``payload`` is the verified bytes, or None when they are not available (then the
    section rule, which needs them, is not judged here: the caller refuses anyway)."""
    from eidolons.ecl.conformance import (
        RECEIVER_FAILURE_CODES,
        context_results,
        edge_results,
        is_markdown_path,
        section_result,
    )

    out: list[Failure] = []
    # Trust is the higher of the edge's and the envelope's: dropping `constraints` must
    # not downgrade a high-trust edge to a tag anyone can recompute.
    # A valid sender signature stands in for HMAC (ADR 0034).
    high = env.trust_level == "high" or (contract is not None and contract.trust_level == "high")
    if high and env.integrity_method != "hmac-sha256" and not signed_sender:
        out.append(
            Failure(
                UNVERIFIED,
                "trust",
                "trust_level high (edge contract or envelope) requires hmac-sha256 "
                f"integrity or a sender signature, the envelope uses {env.integrity_method}",
            )
        )
    gates = edge_results(env.data, contract) + context_results(env.data, contract)
    if contract is not None and needs_payload(env, contract):
        art = contract.artifact_for_kind(env.artifact_kind or "")
        sections = ", ".join(art.required_sections) if art is not None else ""
        if not is_markdown_path(env.artifact_path):
            out.append(
                Failure(
                    MISSING_REQUIRED_SECTION,
                    "R-1",
                    f"the edge requires sections ({sections}) and {env.artifact_path!r} is not "
                    "a Markdown file (.md or .markdown)",
                )
            )
        elif payload is not None:
            section = section_result(payload, contract, env.artifact_kind, level="MUST")
            if section is not None:
                gates.append(section)
    for gate in gates:
        if gate.status == "fail" and gate.id in RECEIVER_FAILURE_CODES:
            code = RECEIVER_FAILURE_CODES[gate.id]
            out.append(Failure(code, gate.id, f"{gate.name}: {gate.reason}"))
    if contract is not None and contract.token_budget_max is not None:
        # B-1: the declared tokens_used (D-1/D-2) can be left out or set to 1; the
        # receiver's own estimate of the payload and summary cannot
        estimate = budget_estimate(env, payload, payload_size)
        if estimate is not None and estimate > contract.token_budget_max:
            delta = env.context_delta
            declared = delta.get("tokens_used") if delta is not None else None
            out.append(
                Failure(
                    CONTEXT_OVER_BUDGET,
                    "B-1",
                    f"payload and summary ≈{estimate} tokens (characters / 4) exceed the "
                    f"edge's token_budget_max {contract.token_budget_max} (declared "
                    f"tokens_used: {'none' if declared is None else declared})",
                )
            )
    if contract is not None and contract.required_handles:
        delta = env.context_delta
        handles = delta.get("input_handles") if delta is not None else None
        named = set(handles) if isinstance(handles, list) else set()
        missing = [h for h in contract.required_handles if h not in named]
        if missing:
            out.append(
                Failure(
                    SCHEMA_INVALID,
                    "H-1",
                    "required_handles: context_delta.input_handles must name "
                    f"{', '.join(missing)} (the contract requires them)",
                )
            )
    return out


def evaluate(
    artefact: Path,
    receiver: str,
    *,
    root: Path,
    contracts: Any,
    key: bytes | None = None,
    limits: Limits | None = None,
    reverify: bool = True,
    memory: Any = None,
    want_payload: bool = False,
    store: TraceStore | None = None,
    require_envelope: bool = False,
) -> IncomingResult:
    """Rules 1-5, without writing anything. An artefact without an envelope is skipped
    only when the project does not know it as a hand-off
    (:func:`eidolons.config.find_handoff`) and ``require_envelope`` is off; otherwise it is
    refused UNVERIFIED. ``want_payload``: on pass, ``payload`` holds the verified bytes
    even with ``reverify=False``. ``contracts`` is a ContractSet, or an exception
    raised while loading one (then every hand-off is refused). With a ``memory``
    (:mod:`eidolons.memory`), related prior context is recalled once the envelope parses,
    before any verdict; the recall can never change the verdict."""

    limits = limits or Limits()
    result = IncomingResult("refused", receiver, artefact)
    fail = result.failures.append
    try:
        envelope_path = find_envelope(artefact)
    except AmbiguousEnvelope as exc:
        fail(Failure(SCHEMA_INVALID, "trigger", str(exc)))
        return result
    if envelope_path is None:
        known = find_handoff(artefact, root)
        if known is None and not require_envelope:
            result.status = "skipped"
            return result
        why = known[0] if known else "--require-envelope is set"
        result.known_handoff = known[1] if known else None
        fail(Failure(UNVERIFIED, "envelope", f"{artefact} has no envelope and {why}"))
        return result
    result.envelope_path = envelope_path
    try:  # the one read of the envelope: everything below judges these bytes
        envelope_bytes = read_envelope_bytes(envelope_path, limits.max_envelope_bytes)
        env = parse_envelope(envelope_bytes, limits)
    except (EnvelopeError, InputError) as exc:
        fail(Failure(SCHEMA_INVALID, "envelope", str(exc)))
        return result
    envelope_sha256 = hashlib.sha256(envelope_bytes).hexdigest()
    result.envelope = env
    foreign = foreign_projects(envelope_path, root)
    if foreign:
        fail(
            Failure(
                UNVERIFIED,
                "root",
                f"the hand-off lies in the project at {foreign[0]}, not this root "
                f"({os.path.realpath(root)}): it is judged there, with that project's "
                "trust store and trace",
            )
        )
        return result
    now = utc_now()
    if memory is not None:
        from eidolons.memory import recall_before

        result.extra["recall"] = recall_before(memory, env.data, receiver)
    # the trust store, and the sender's signature when it asks for one (ADR 0034)
    try:
        trust = load_trust_store(root)
        store_error = None
    except TrustStoreError as exc:
        trust, store_error = None, str(exc)
    signed_sender = False
    if trust is not None and senders.required(trust, env.sender.eidolon, receiver):
        problem = senders.check(envelope_path, envelope_sha256, env.sender.eidolon, trust, now)
        if problem is None:
            signed_sender = True
        else:
            fail(Failure(problem[0], "sender", problem[1]))
    result.failures.extend(envelope_failures(env, signed_sender=signed_sender))
    early = precheck(env)
    integrity_failed = False
    if early is not None:
        verdict, message = early
        code = {
            Verdict.UNSUPPORTED_ALGO: SCHEMA_INVALID,
            Verdict.UNVERIFIABLE: UNVERIFIED,
        }.get(verdict, INTEGRITY_MISMATCH)
        fail(Failure(code, "integrity", message))
        integrity_failed = True
    # 3. integrity evidence: a signed receipt with a trust store, else the record
    receipt: Any = None  # the receipt the decision rests on (trust store only)
    if store_error is not None:
        fail(Failure(UNVERIFIED, "receipt", f"trust store unusable: {store_error}"))
        integrity_failed = True
    elif env.message_id is None:
        fail(Failure(UNVERIFIED, "record", "the envelope has no message_id to look up"))
        integrity_failed = True
    else:
        lookup = store if store is not None else open_store(root)
        unreadable = False
        try:  # the configured store only: an unreadable one refuses, never a fallback
            result.record = lookup.latest_verdict(env.thread_id, env.message_id)
            judged = judge_record(env, result.record, envelope_sha256) if trust is None else None
        except InputError as exc:  # unreadable trace file, unreachable or misconfigured store
            judged = UNVERIFIED, f"the trace cannot be read: {exc}"
            result.record = None
            unreadable = True
        finally:
            if lookup is not store:
                lookup.close()
        # not even a genuine receipt file beside the envelope stands in for a store that
        # cannot be read: it may be older than the verdict the store holds (ADR 0071)
        if trust is not None and not unreadable:
            from eidolons.receipts import receiver_evidence

            receipt, judged, seen = receiver_evidence(
                envelope_path,
                result.record,
                trust,
                now,
                message_id=env.message_id,
                envelope_sha256=envelope_sha256,
            )
            result.extra["receipts"] = [j.to_dict() for j in seen]
        if trust is None and judged is None:
            from eidolons.receipts import signed_without_trust_store

            downgrade = signed_without_trust_store(envelope_path, result.record)
            judged = (UNVERIFIED, downgrade) if downgrade is not None else None
        if judged is not None:
            fail(Failure(judged[0], "receipt" if trust is not None else "record", judged[1]))
            integrity_failed = True

    # 4. recompute now. Whatever bytes the gate reads it hashes, and only bytes that match
    # the tag are judged or handed on: with --no-reverify the payload is read only when its
    # bytes are needed (a required-section check, --print-payload), and still verified.
    # The file hashed must be ARTEFACT itself (same device and inode): an envelope copied
    # beside other bytes, or an artifact.path pointed at a copy of the good bytes, must not
    # vouch for the file the receiver is about to read.
    names_artefact = not artefact.name.endswith(ENVELOPE_SUFFIX)

    def is_the_artefact(real: Path | None) -> bool:
        if not names_artefact or (real is not None and _same_file(artefact, real)):
            return True
        fail(
            Failure(
                INTEGRITY_MISMATCH,
                "artefact",
                f"{artefact} is not the payload the envelope names ({real or 'unresolved'})",
            )
        )
        return False

    def verified_bytes(check_name: str) -> bytes | None:
        check = verify_parsed(
            env,
            envelope_path,
            envelope_sha256=envelope_sha256,
            root=root,
            limits=limits,
            key=key,
            keep_payload=True,
        )
        result.payload_path = check.payload_path
        if check.verdict is not Verdict.PASS or check.digest is None:
            fail(Failure(INTEGRITY_MISMATCH, check_name, f"[{check.verdict}] {check.message}"))
            return None
        if receipt is not None and receipt.subject_sha256 != check.digest.sha256:
            why = "the signed receipt is for other payload bytes"
            fail(Failure(INTEGRITY_MISMATCH, "receipt", why))
            return None
        return check.digest.data if is_the_artefact(check.payload_real) else None

    payload: bytes | None = None
    if reverify and early is None:
        result.reverified = True
        payload = verified_bytes("reverify")
        integrity_failed = integrity_failed or payload is None
    elif early is None and names_artefact:
        try:
            location = locate_payload(envelope_path, env.artifact_path, root)
            result.payload_path = location.path
            integrity_failed = not is_the_artefact(location.real) or integrity_failed
        except PayloadError as exc:
            fail(Failure(INTEGRITY_MISMATCH, "payload", str(exc)))
            integrity_failed = True
    # 5. contract conformance for from -> receiver
    if env.recipient.eidolon != receiver:
        fail(
            Failure(
                UNDECLARED_EDGE,
                "edge",
                f"to.eidolon is {env.recipient.eidolon!r}, this receiver is {receiver!r}",
            )
        )
    elif isinstance(contracts, Exception):
        fail(Failure(UNDECLARED_EDGE, "contracts", f"contract set failed to load: {contracts}"))
    else:
        contract = contracts.get(env.sender.eidolon, receiver)
        result.contract_source = contract.source if contract is not None else None
        size = None
        if payload is None and contract is not None and contract.token_budget_max is not None:
            size = _file_size(result.payload_path)
            if size is not None and (size + 3) // 4 > contract.token_budget_max:
                size = None  # bytes are an upper bound on characters: count them exactly
                if not reverify and not integrity_failed:
                    payload = verified_bytes("payload")
                    integrity_failed = payload is None
        if needs_payload(env, contract) and payload is None and not reverify:
            if not integrity_failed:
                payload = verified_bytes("payload")
                integrity_failed = payload is None
        result.failures.extend(
            contract_failures(
                env, contract, payload, signed_sender=signed_sender, payload_size=size
            )
        )
    if not result.failures and want_payload and payload is None:
        payload = verified_bytes("payload")
    if not result.failures:
        result.status = "pass"
        result.payload = payload
        hmac_checked = env.integrity_method == "hmac-sha256" and payload is not None
        record_kind = SIGNED_RECEIPT if receipt is not None else UNSIGNED
        result.evidence = combine(
            record_kind, SENDER_SIGNATURE if signed_sender else "", HMAC if hmac_checked else ""
        )
        if trust is None:
            result.notes.append(UNSIGNED_WARNING)
        if env.integrity_method == "hmac-sha256":
            from eidolons.config import hmac_key_warning

            short = hmac_key_warning(key)
            if short is not None:
                result.notes.append(short)
    return result


def verify_incoming(
    artefact: Path,
    receiver: str,
    *,
    root: Path,
    contracts: Any,
    key: bytes | None = None,
    limits: Limits | None = None,
    reverify: bool = True,
    write_trace: bool = True,
    memory: Any = None,
    want_payload: bool = False,
    store: TraceStore | None = None,
    require_envelope: bool = False,
    handback: bool = True,
) -> IncomingResult:
    """Rules 1-7: evaluate, then record the decision in the thread's trace (``store``,
    else the project's configured store). With a
    ``memory``, recall happens before the verdict and the hand-off is ingested only after
    its pass is on record; a refused, skipped or unrecorded hand-off is never ingested.
    ``require_envelope``: an artefact without an envelope is refused (UNVERIFIED), not
    skipped (the hook: a file in the hand-off directory whose envelope was deleted).
    ``handback``: a refusal also writes the hand-back for the orchestrator
    (:mod:`eidolons.gates.handback`), whose envelope path is ``extra["handback"]``."""
    own = store is None
    store = open_store(root) if store is None else store
    start = time.monotonic_ns()
    try:
        result = evaluate(
            artefact,
            receiver,
            root=root,
            contracts=contracts,
            key=key,
            limits=limits,
            reverify=reverify,
            memory=memory,
            want_payload=want_payload,
            store=store,
            require_envelope=require_envelope,
        )
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
    env = result.envelope
    if memory is not None and result and env is not None:
        from eidolons.memory import ingest_after_pass

        if result.payload is not None:
            result.extra["ingest"] = ingest_after_pass(memory, env.data, result.payload)
        else:  # --no-reverify and nothing needed the bytes: nothing verified to ingest
            result.extra["ingest"] = {
                "status": "skipped",
                "reason": "payload bytes not read and verified (no re-verification)",
                "backend": memory.backend,
            }
    return result


def _record(result: IncomingResult, store: TraceStore, took: int, root: Path) -> None:
    """Rules 6-7's records (``took``: the decision's duration in milliseconds). Fail
    closed: an unrecorded pass hands nothing over."""
    thread = _ids(result)[1]
    try:
        if result:
            store.append(thread, receiver_event(result, "verify_pass", took, root))
            appended = store.append(thread, receiver_event(result, "receive", took, root))
        else:
            appended = store.append(thread, receiver_event(result, "verify_fail", took, root))
        result.trace_path = appended.location
    except TraceWriteError as exc:
        result.trace_error = str(exc)
        if result:
            result.status = "refused"
            result.payload = None


def verify_incoming_for_memory(envelope_path: Path, root: Path) -> tuple[bool, str, bytes | None]:
    """The gate as ``eidolons memory ingest`` needs it: (passed, code or "PASS", bytes)."""
    from eidolons.config import hmac_key
    from eidolons.contract import ContractError, ContractSet

    try:
        env = parse_envelope(read_envelope_bytes(envelope_path, Limits().max_envelope_bytes))
    except (EnvelopeError, InputError):
        return False, SCHEMA_INVALID, None
    contracts: Any
    try:
        contracts = ContractSet.load(root)
    except ContractError as exc:
        contracts = exc
    result = verify_incoming(
        envelope_path,
        env.recipient.eidolon,
        root=root,
        contracts=contracts,
        key=hmac_key(),
        want_payload=True,
    )
    if result:
        return True, "PASS", result.payload
    return False, result.failure_code or UNVERIFIED, None
