"""The receiver's decision as a stepwise checker (python-tuf's ``TrustedMetadataSet``).

Pure: the shell (:mod:`eidolons.gates.receiver`) feeds it what it read, in this order:

1. :meth:`ReceiverCheck.feed_envelope`: the envelope's bytes as read once. Strict parse
   and schema, the E-/S- MUSTs (SCHEMA_INVALID), then its own integrity fields: an
   unsupported method is SCHEMA_INVALID, a placeholder digest UNVERIFIED,
   ``artifact.sha256`` differing from the tag INTEGRITY_MISMATCH. No parse ends the check.
2. :meth:`ReceiverCheck.feed_record`: the latest orchestrator verdict on record for the
   ``message_id``. Only a ``verify_pass`` for this method, tag, payload digest and these
   exact envelope bytes confirms; a fail or another envelope is INTEGRITY_MISMATCH,
   nothing on record (or an unreadable trace) UNVERIFIED.
3. :meth:`ReceiverCheck.feed_payload`: the digest of the one read of the payload and
   whether the file read is the artifact asked about (device and inode); a mismatch
   either way is INTEGRITY_MISMATCH. Bytes the shell read it must feed.
4. :meth:`ReceiverCheck.feed_contracts`: the contract set (or its typed failure:
   UNDECLARED_EDGE). ``to.eidolon`` must be the receiver and the edge declared; the
   high-trust rule (UNVERIFIED); C-2/C-3/D-1/D-2, B-1, H-1 and R-1.

Then :meth:`ReceiverCheck.decision`. A step fed twice or out of order, or a decision
asked for early (unless the check is :attr:`done`), raises :class:`CheckOrderError`. The
decision holds the payload bytes only when every rule passed.
"""

from __future__ import annotations

from enum import IntEnum

from eidolons._text import plural, printable
from eidolons.ecl.contract import (
    Contract,
    ContractSet,
    ContractSetUnavailable,
    context_results,
    edge_results,
    high_trust_problem,
    section_result,
)
from eidolons.ecl.envelope import Envelope, envelope_results, ise_results, parse_envelope
from eidolons.ecl.grammar import Limits, is_markdown_path
from eidolons.ecl.integrity import (
    Digest,
    RefusalCode,
    Verdict,
    judge_digest,
    precheck,
    sha256_hex,
)
from eidolons.errors import EidolonsError, EnvelopeError

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


class CheckOrderError(EidolonsError):
    """The shell fed the checker out of order (a programming error, never a verdict)."""

    code = "CHECK_ORDER"


class Step(IntEnum):
    START = 0
    ENVELOPE = 1
    RECORD = 2
    PAYLOAD = 3
    CONTRACTS = 4


class _Record:
    """A plain ``__slots__`` record with value equality and a readable ``repr``: the
    receiver's records are not dataclasses, because importing :mod:`dataclasses` pulls in
    :mod:`inspect` on every gate's start-up (ADR 0022)."""

    __slots__: tuple[str, ...] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._values() == self._values()

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({inner})"


class Failure(_Record):
    """One failed check: its refusal code, the check's name and why."""

    __slots__ = ("check", "code", "message")

    def __init__(self, code: str, check: str, message: str) -> None:
        self.code = code
        self.check = check
        self.message = message

    def __hash__(self) -> int:
        return hash(self._values())

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "check": self.check, "message": self.message}


class ReceiptJudgement(_Record):
    """What the shell's check of a signed receipt found (a trust store is configured):
    ``problem`` None when a valid receipt confirms this envelope, and the payload digest
    it vouches for (``subject_sha256``), which step 3's digest must equal."""

    __slots__ = ("check", "problem", "subject_sha256")

    def __init__(
        self,
        problem: tuple[str, str] | None,
        subject_sha256: str | None = None,
        check: str = "receipt",  # the failure's check name
    ) -> None:
        self.problem = problem
        self.subject_sha256 = subject_sha256
        self.check = check

    def __hash__(self) -> int:
        return hash(self._values())


class ReceiverDecision(_Record):
    """What the checker decided. Truthy only when every rule passed. ``hmac_checked``: an
    HMAC tag was recomputed over bytes read; ``sender_signed``: a verified sender
    signature; ``payload``: the bytes fed at step 3, only on pass."""

    __slots__ = (
        "contract_source",
        "envelope",
        "envelope_sha256",
        "failures",
        "hmac_checked",
        "passed",
        "payload",
        "payload_sha256",
        "record",
        "sender_signed",
    )
    contract_source: str | None
    envelope: Envelope | None
    envelope_sha256: str | None
    failures: list[Failure]
    hmac_checked: bool
    passed: bool
    payload: bytes | bytearray | None
    payload_sha256: str | None
    record: dict[str, Any] | None
    sender_signed: bool

    def __init__(self, check: ReceiverCheck, passed: bool) -> None:
        for name in self.__slots__:  # every slot but ``passed`` is the check's own
            setattr(self, name, passed if name == "passed" else getattr(check, name))
        self.failures = list(check.failures)
        self.payload = check.payload if passed else None

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self) -> bool:
        return self.passed


def reason_line(receiver: str, failures: list[Failure]) -> str:
    """The line printed after the REFUSE line: why, in words (escaped)."""
    first, *others = failures or [Failure(RefusalCode.UNVERIFIED, "gate", "refused")]
    line = f"[{receiver}-verify-incoming] reason: {printable(first.message)}"
    if others:
        also = ", ".join(f"{f.code} ({f.check})" for f in others)
        line += f" (also: {printable(also)})"
    return line


def judge_record(
    env: Envelope, record: Mapping[str, Any] | None, envelope_sha256: str
) -> tuple[str, str] | None:
    """Step 2's rule: None when the record confirms this envelope's integrity. The record
    must be a pass for this method and tag, over these exact envelope bytes: a sender,
    performative, kind or path rewritten after the orchestrator's pass is not covered."""
    if record is None:
        return RefusalCode.UNVERIFIED, "no verify_pass on record for this message_id"
    if record.get("event") == "verify_fail":
        code = record.get("verify_failure_code")
        return (
            RefusalCode.INTEGRITY_MISMATCH,
            f"the orchestrator gate recorded verify_fail ({code})",
        )
    if record.get("integrity_method") != env.integrity_method:
        return RefusalCode.INTEGRITY_MISMATCH, (
            f"the pass on record is for integrity_method {record.get('integrity_method')!r}, "
            f"the envelope declares {env.integrity_method!r}"
        )
    if record.get("integrity_value") != env.integrity_value:
        return (
            RefusalCode.INTEGRITY_MISMATCH,
            "the pass on record is for another digest (envelope swapped)",
        )
    if env.integrity_method == "sha256" and record.get("payload_sha256") != env.integrity_value:
        return RefusalCode.INTEGRITY_MISMATCH, "the pass on record hashed other bytes"
    if record.get("envelope_sha256") != envelope_sha256:
        return (
            RefusalCode.INTEGRITY_MISMATCH,
            "the envelope is not the one the orchestrator verified",
        )
    return None


def sections_apply(
    env: Envelope, contracts: ContractSet | ContractSetUnavailable, receiver: str
) -> bool:
    """Whether step 4 will need the payload's bytes (R-1 applies to this hand-off): the
    shell asks before step 3, so it keeps the bytes only when they will be judged."""
    if isinstance(contracts, ContractSetUnavailable) or env.recipient.eidolon != receiver:
        return False
    contract = contracts.get(env.sender.eidolon, receiver)
    return needs_payload(env, contract) and is_markdown_path(env.artifact_path)


def edge_budget(
    env: Envelope, contracts: ContractSet | ContractSetUnavailable, receiver: str
) -> int | None:
    """The edge's ``token_budget_max`` (B-1) when this hand-off is addressed to
    ``receiver`` and its edge declares one: the shell asks before step 3 (a budget is
    judged on the payload's characters, so the bytes may have to be kept)."""
    if isinstance(contracts, ContractSetUnavailable) or env.recipient.eidolon != receiver:
        return None
    contract = contracts.get(env.sender.eidolon, receiver)
    return contract.token_budget_max if contract is not None else None


def envelope_failures(env: Envelope, *, signed_sender: bool = False) -> list[Failure]:
    """Step 1's schema and E-/S- MUSTs, the rules ``eidolons check`` applies (``emit``
    calls it too). ``signed_sender`` changes nothing here (the callers' symmetry)."""
    out: list[Failure] = []
    problems = env.schema_problems()
    if problems:
        out.append(Failure(RefusalCode.SCHEMA_INVALID, "schema", "; ".join(problems)))
    for gate in [*envelope_results(env.data), *ise_results(env.data)]:
        if gate.status == "fail" and gate.level == "MUST":
            message = f"{gate.name}: {gate.reason}"
            out.append(Failure(RefusalCode.SCHEMA_INVALID, gate.id, message))
    return out


def needs_payload(env: Envelope, contract: Contract | None) -> bool:
    """Whether :func:`contract_failures` needs the payload's bytes (required sections)."""
    art = contract.artifact_for_kind(env.artifact_kind or "") if contract is not None else None
    return art is not None and bool(art.required_sections)


class CharCount:
    """A sink (``write(chunk)``) counting the characters of UTF-8 bytes fed in slices,
    as one ``decode("utf-8", "replace")`` of the whole would; :meth:`total` ends it."""

    __slots__ = ("_chars", "_decode")

    def __init__(self) -> None:
        from codecs import getincrementaldecoder

        self._decode = getincrementaldecoder("utf-8")("replace").decode
        self._chars = 0

    def write(self, chunk: bytes | bytearray | memoryview) -> None:
        self._chars += len(self._decode(chunk))

    def total(self) -> int:
        return self._chars + len(self._decode(b"", True))


def utf8_length(data: bytes | bytearray) -> int:
    """``len(data.decode("utf-8", "replace"))``, decoded a slice at a time, so a large
    payload is never held twice (as bytes and as one string)."""
    if data.isascii():
        return len(data)
    count, view, step = CharCount(), memoryview(data), 1 << 20
    for at in range(0, len(data), step):
        count.write(view[at : at + step])
    return count.total()


def budget_estimate(
    env: Envelope, payload: bytes | bytearray | None, payload_size: int | None
) -> int | None:
    """The receiver's own figure for a hand-off's context (ADR 0005): the payload (or
    ``payload_size``) and the summary, 4 characters a token, rounded up; None if unknown."""
    if payload is not None:
        chars = utf8_length(payload)
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
    payload: bytes | bytearray | None,
    *,
    signed_sender: bool = False,
    payload_size: int | None = None,
) -> list[Failure]:
    """Step 4's rules of the effective contract for this envelope (the receiver gate and
    ``emit`` alike). ``payload``: the verified bytes or None (R-1 then not judged here); a
    valid sender signature stands in for HMAC at high trust (ADR 0011)."""
    out: list[Failure] = []
    problem = high_trust_problem(env.data, contract)
    if problem is not None and not signed_sender:
        out.append(Failure(RefusalCode.UNVERIFIED, "trust", problem))
    gates = edge_results(env.data, contract) + context_results(env.data, contract)
    if contract is not None and needs_payload(env, contract):
        art = contract.artifact_for_kind(env.artifact_kind or "")
        sections = ", ".join(art.required_sections) if art is not None else ""
        if not is_markdown_path(env.artifact_path):
            out.append(
                Failure(
                    RefusalCode.MISSING_REQUIRED_SECTION,
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
    if contract is not None and contract.required_handles:
        delta = env.context_delta
        handles = delta.get("input_handles") if delta is not None else None
        named = set(handles) if isinstance(handles, list) else set()
        missing = [h for h in contract.required_handles if h not in named]
        if missing:
            out.append(
                Failure(
                    RefusalCode.SCHEMA_INVALID,
                    "H-1",
                    "required_handles: context_delta.input_handles must name "
                    f"{', '.join(missing)} (the contract requires them)",
                )
            )
    if contract is not None and contract.token_budget_max is not None:
        # B-1: the declared tokens_used (D-1/D-2) can be left out or set to 1; the
        # receiver's own estimate of the payload and summary cannot
        estimate = budget_estimate(env, payload, payload_size)
        if estimate is not None and estimate > contract.token_budget_max:
            delta = env.context_delta
            declared = delta.get("tokens_used") if delta is not None else None
            out.append(
                Failure(
                    RefusalCode.CONTEXT_OVER_BUDGET,
                    "B-1",
                    f"payload and summary ≈{plural(estimate, 'token')} (characters / 4) exceed the "
                    f"edge's token_budget_max {contract.token_budget_max} (declared "
                    f"tokens_used: {'none' if declared is None else declared})",
                )
            )
    return out


#: The receiver gate's refusal code for a failed gate (ECL §5.3 names).
RECEIVER_FAILURE_CODES: dict[str, RefusalCode] = {
    "C-1": RefusalCode.UNDECLARED_EDGE,
    "C-2": RefusalCode.PERFORMATIVE_NOT_ALLOWED,
    "C-3": RefusalCode.ARTIFACT_KIND_NOT_ALLOWED,
    "D-1": RefusalCode.CONTEXT_OVER_BUDGET,
    "D-2": RefusalCode.CONTEXT_OVER_BUDGET,
    "R-1": RefusalCode.MISSING_REQUIRED_SECTION,
}


_EARLY_CODES: dict[Verdict, RefusalCode] = {
    Verdict.UNSUPPORTED_ALGO: RefusalCode.SCHEMA_INVALID,
    Verdict.UNVERIFIABLE: RefusalCode.UNVERIFIED,
}


class ReceiverCheck:
    """The stepwise receiver check for ``receiver`` (see the module docstring).

    ``receiver`` None judges the hand-off as its addressed recipient (``to.eidolon``):
    what ``eidolons memory ingest`` does."""

    __slots__ = (
        "contract_source",
        "done",
        "envelope",
        "envelope_sha256",
        "failures",
        "hmac_checked",
        "integrity_failed",
        "integrity_judgeable",
        "limits",
        "payload",
        "payload_sha256",
        "payload_size",
        "receipt_sha256",
        "receiver",
        "record",
        "sender_signed",
        "step",
    )

    def __init__(self, receiver: str | None, limits: Limits | None = None) -> None:
        self.receiver = receiver
        self.limits = limits if limits is not None else Limits()
        self.failures: list[Failure] = []
        self.step = Step.START
        self.done = False  # a failure ended the check early (the envelope did not parse)
        self.envelope: Envelope | None = None
        self.envelope_sha256: str | None = None
        self.record: dict[str, Any] | None = None
        self.integrity_judgeable = False  # the envelope's own integrity fields are sound
        self.integrity_failed = False
        self.payload: bytes | bytearray | None = None
        self.payload_sha256: str | None = None
        self.hmac_checked = False
        self.contract_source: str | None = None
        self.receipt_sha256: str | None = None  # the payload digest a signed receipt vouches for
        self.sender_signed = False  # a verified sender signature (stands in for HMAC)
        self.payload_size: int | None = None  # characters, or bytes hashed (an upper bound)

    def _advance(self, step: Step) -> None:
        if self.done:
            raise CheckOrderError(f"the check ended early; {step.name} cannot be fed")
        if step != self.step + 1:
            raise CheckOrderError(f"{step.name} fed after {self.step.name}")
        self.step = step

    def _fail(self, code: str, check: str, message: str) -> None:
        self.failures.append(Failure(code, check, message))

    def end(self, code: str, check: str, message: str) -> None:
        """Refuse and end the check now, with a failure the shell found between steps
        (the hand-off belongs to another project): no later step may be fed."""
        self._fail(code, check, message)
        self.done = True

    @property
    def as_receiver(self) -> str:
        if self.receiver is not None:
            return self.receiver
        return self.envelope.recipient.eidolon if self.envelope is not None else "unknown"

    # ----------------------------------------------------------------- step 1

    def feed_envelope(self, data: bytes) -> Envelope | None:
        """Step 1. Returns the parsed envelope, or None (the check is then done)."""
        self._advance(Step.ENVELOPE)
        try:
            env = parse_envelope(data, self.limits)
        except EnvelopeError as exc:
            self._fail(RefusalCode.SCHEMA_INVALID, "envelope", str(exc))
            self.done = True
            return None
        self.envelope = env
        self.envelope_sha256 = sha256_hex(data)  # builtin SHA-256 first (ADR 0022)
        self.failures.extend(envelope_failures(env))
        early = precheck(env)
        if early is not None:
            verdict, message = early
            code = _EARLY_CODES.get(verdict, RefusalCode.INTEGRITY_MISMATCH)
            self._fail(code, "integrity", message)
            self.integrity_failed = True
        self.integrity_judgeable = early is None
        return env

    @property
    def wants_record(self) -> bool:
        """Whether step 2 needs a look-up (the envelope has a ``message_id``)."""
        return self.envelope is not None and self.envelope.message_id is not None

    # ----------------------------------------------------------------- step 2

    def feed_record(
        self,
        record: Mapping[str, Any] | None,
        *,
        unreadable: str | None = None,
        receipt: ReceiptJudgement | None = None,
        sender_signed: bool = False,
        sender_problem: tuple[str, str] | None = None,
    ) -> None:
        """Step 2: the orchestrator record (None: nothing on record) or why the trace is
        ``unreadable``; with a trust store the shell's ``receipt`` judgement instead.
        ``sender_signed``/``sender_problem``: the sender signature's check (ADR 0011)."""
        self._advance(Step.RECORD)
        env = self.envelope
        assert env is not None and self.envelope_sha256 is not None
        self.sender_signed = sender_signed
        if sender_problem is not None:
            self._fail(sender_problem[0], "sender", sender_problem[1])
        if receipt is not None:
            self.record = dict(record) if record is not None else None
            self.receipt_sha256 = receipt.subject_sha256
            if receipt.problem is not None:
                self._fail(receipt.problem[0], receipt.check, receipt.problem[1])
                self.integrity_failed = True
            return
        if env.message_id is None:
            self._fail(
                RefusalCode.UNVERIFIED, "record", "the envelope has no message_id to look up"
            )
            self.integrity_failed = True
            return
        self.record = dict(record) if record is not None else None
        judged = (
            (RefusalCode.UNVERIFIED, f"the trace cannot be read: {unreadable}")
            if unreadable is not None
            else judge_record(env, record, self.envelope_sha256)
        )
        if judged is not None:
            self._fail(judged[0], "record", judged[1])
            self.integrity_failed = True

    # ----------------------------------------------------------------- step 3

    @property
    def wants_payload(self) -> bool:
        """Whether step 3 can judge a payload (the envelope's integrity fields are sound)."""
        return self.integrity_judgeable

    def feed_payload(
        self,
        digest: Digest | None,
        *,
        error: str | None = None,
        is_artifact: bool = True,
        artifact: str = "",
        check: str = "reverify",
        size: int | None = None,
        chars: int | None = None,
    ) -> None:
        """Step 3: the digest of the one read of the payload, or ``error``; ``is_artifact``
        False: another file was read. No digest and no error: only the identity was
        checked, ``size`` bounding its characters (B-1); ``chars`` counted while hashing."""
        self._advance(Step.PAYLOAD)
        self.payload_size = size
        env = self.envelope
        assert env is not None
        if not self.integrity_judgeable:
            return  # step 1 already refused the integrity fields; nothing to judge
        if error is not None:
            self._fail(RefusalCode.INTEGRITY_MISMATCH, check, error)
            self.integrity_failed = True
            return
        if digest is not None:
            verdict, message = judge_digest(env, digest)
            if verdict is not Verdict.PASS:
                self._fail(RefusalCode.INTEGRITY_MISMATCH, check, f"[{verdict}] {message}")
                self.integrity_failed = True
                return
            if self.receipt_sha256 is not None and digest.sha256 != self.receipt_sha256:
                message = "the signed receipt is for other payload bytes"
                self._fail(RefusalCode.INTEGRITY_MISMATCH, "receipt", message)
                self.integrity_failed = True
                return
            self.payload_sha256 = digest.sha256
            self.payload = digest.data
            self.payload_size = digest.size if chars is None else chars
            self.hmac_checked = env.integrity_method == "hmac-sha256"
        if not is_artifact:
            self._fail(
                RefusalCode.INTEGRITY_MISMATCH,
                "artifact",
                f"{artifact} is not the payload the envelope names",
            )
            self.integrity_failed = True
            self.payload = None

    # ----------------------------------------------------------------- step 4

    def feed_contracts(self, contracts: ContractSet | ContractSetUnavailable) -> None:
        """Step 4: contract conformance for ``from -> receiver``."""
        self._advance(Step.CONTRACTS)
        env = self.envelope
        assert env is not None
        receiver = self.as_receiver
        if env.recipient.eidolon != receiver:
            self._fail(
                RefusalCode.UNDECLARED_EDGE,
                "edge",
                f"to.eidolon is {env.recipient.eidolon!r}, this receiver is {receiver!r}",
            )
            return
        if isinstance(contracts, ContractSetUnavailable):
            self._fail(
                RefusalCode.UNDECLARED_EDGE,
                "contracts",
                f"contract set failed to load: {contracts.reason}",
            )
            return
        contract = contracts.get(env.sender.eidolon, receiver)
        self.contract_source = contract.source if contract is not None else None
        sections = needs_payload(env, contract) and is_markdown_path(env.artifact_path)
        if sections and not self.integrity_failed:
            if self.payload is None:
                self._fail(
                    RefusalCode.MISSING_REQUIRED_SECTION,
                    "R-1",
                    "required sections cannot be checked: the payload bytes were not read",
                )
        judged = self.payload if not self.integrity_failed else None
        self.failures.extend(
            contract_failures(
                env,
                contract,
                judged,
                signed_sender=self.sender_signed,
                payload_size=self.payload_size if judged is None else None,
            )
        )

    # ----------------------------------------------------------------- result

    def decision(self) -> ReceiverDecision:
        if not self.done and self.step != Step.CONTRACTS:
            raise CheckOrderError(f"the decision was asked for after {self.step.name}")
        return ReceiverDecision(self, passed=not self.failures and not self.done)
