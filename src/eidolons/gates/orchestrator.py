"""The orchestrator's mechanical gate (``eidolons verify-envelope``).

It runs the integrity check (:mod:`eidolons.gates.verify`), appends one ``verify_pass`` or
``verify_fail`` event to the thread's trace, and decides the exit code:

- block is the default mode (:func:`eidolons.io.config.verify_mode`); warn is an opt-in;
- 0 on pass; in warn mode 0 for every verdict except ``malformed``, and every verdict it
  lets through gets a :func:`warning_line`;
- in block mode 3 for every other verdict, ``unverifiable`` (a placeholder digest)
  included, as upstream's block mode; ``strict`` makes schema warnings ``malformed``;
- ``malformed`` exits 2;
- fail closed: if the trace cannot be written, block mode exits 3 even on a pass, since
  the receivers would find no ``verify_pass`` on record;
- in a project whose key must not sign here (not registered for it at this root, an
  older trust store: :func:`eidolons.keys.host.signing_refusal`) nothing is signed,
  a pass becomes ``unregistered`` (a ``verify_fail``), and every mode exits 3.
"""

from __future__ import annotations

import time

from eidolons._text import printable
from eidolons.ecl.events import EventType, GateName, elapsed_ms, trace_event, utc_now
from eidolons.ecl.grammar import Limits
from eidolons.ecl.integrity import (
    EXIT_BLOCKED,
    HMAC,
    SENDER_SIGNATURE,
    SIGNED_RECEIPT,
    UNSIGNED_WARNING,
    Verdict,
    combine,
    exit_code,
)
from eidolons.errors import TraceWriteError
from eidolons.gates.verify import VerificationResult, verify_envelope_file
from eidolons.io.config import hmac_key_warning, payload_key
from eidolons.keys.receipts import (
    build_statement,
    check_sender_signature,
    sender_signature_required,
    sign_statement,
    signing_state,
    write_receipt,
)
from eidolons.trace.store import TraceStore, open_store

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Any

    from eidolons.ecl.integrity import Writable
    from eidolons.io.paths import StrPath

GATE = GateName.ORCHESTRATOR


class GateOutcome:
    """The gate's decision: the check's result, the mode, the exit code and the trace."""

    __slots__ = (
        "evidence",
        "exit_code",
        "mode",
        "notes",
        "receipt",
        "receipt_path",
        "result",
        "strict",
        "trace_error",
        "trace_path",
    )

    def __init__(
        self,
        result: VerificationResult,
        mode: str,
        strict: bool,
        exit_code: int,
        trace_path: str | None = None,
        trace_error: str | None = None,
    ) -> None:
        self.result = result
        self.mode = mode
        self.strict = strict
        self.exit_code = exit_code
        self.trace_path = trace_path
        self.trace_error = trace_error
        self.evidence: str | None = None  # what a pass rested on (ADR 0010); None if no pass
        self.notes: list[str] = []  # warning lines about the evidence (stderr in text mode)
        self.receipt: dict[str, Any] | None = None  # the signed DSSE receipt (ADR 0011)
        self.receipt_path: str | None = None

    @property
    def blocked(self) -> bool:
        return self.mode == "block" and self.exit_code == EXIT_BLOCKED

    def to_json(self) -> dict[str, Any]:
        out = self.result.summary()
        out = {
            "verdict": out.pop("verdict"),
            "mode": self.mode,
            "blocked": self.blocked,
            **out,
            "evidence": self.evidence,
            "evidence_notes": list(self.notes),
            "receipt": str(self.receipt_path) if self.receipt_path else None,
            "receipt_keyid": self.receipt["signatures"][0]["keyid"] if self.receipt else None,
            "trace": self.trace_path,
            "expected_sha": out["expected"],  # the names upstream's consumers read
            "actual_sha": out["actual"],
        }
        if self.trace_error:
            out["trace_error"] = self.trace_error
        return out


def verify_event(
    result: VerificationResult,
    *,
    gate: str,
    mode: str,
    evidence: str | None = None,
    duration_ms: int | None = None,
    root: StrPath | None = None,
) -> dict[str, Any]:
    """The trace event for one verification (seed shapes plus gate, verdict, digests).
    With ``root``, ``payload_path`` names the payload so that it stays known as a
    hand-off even if its envelope is deleted (ADR 0007)."""
    passed = bool(result)
    fields = (
        None
        if passed
        else {
            "verify_failure_code": result.failure_code,
            "decision": "refused" if mode == "block" else "warned",
        }
    )
    return trace_event(
        EventType.VERIFY_PASS if passed else EventType.VERIFY_FAIL,
        result.envelope,
        gate=GateName(gate),
        fields=fields,
        gate_fields={"verdict": str(result.verdict)},
        payload_sha256=result.digest.sha256 if result.digest is not None else None,
        envelope_sha256=result.envelope_sha256,
        payload_path=payload_key(result.payload_path, root)
        if root is not None and result.payload_path is not None
        else None,
        reason=None if passed else result.message,
        evidence=evidence if passed else None,
        duration_ms=duration_ms,
    )


def run_gate(
    envelope_path: StrPath,
    *,
    root: StrPath,
    mode: str,
    strict: bool = False,
    key: bytes | None = None,
    limits: Limits | None = None,
    trace_file: StrPath | None = None,
    write_trace: bool = True,
    keep_payload: bool = False,
    sink: Writable | None = None,
    store: TraceStore | None = None,
    command: str = "verify-envelope",
    envelope_bytes: bytes | None = None,
) -> GateOutcome:
    """Verify, sign the verdict's receipt, record the event (in ``store``, else
    ``trace_file``, else the project's), decide the exit code. ``sink`` receives the exact
    bytes hashed; ``envelope_bytes`` is the route gate's one read of the envelope. With a
    trust store and no reachable orchestrator key, block mode exits 3 (ADR 0011)."""
    start = time.monotonic_ns()
    result = verify_envelope_file(
        envelope_path,
        root=root,
        limits=limits,
        key=key,
        strict=strict,
        keep_payload=keep_payload,
        sink=sink,
        envelope_bytes=envelope_bytes,
    )
    now = utc_now()
    signing = signing_state(root, now)
    env = result.envelope
    signed_sender = False
    if (
        result
        and env is not None
        and sender_signature_required(signing.store, env.sender.eidolon, env.recipient.eidolon)
    ):
        assert signing.store is not None and result.envelope_sha256 is not None
        problem = check_sender_signature(
            result.envelope_path, result.envelope_sha256, env.sender.eidolon, signing.store, now
        )
        if problem is None:
            signed_sender = True
        else:
            result.verdict = (
                Verdict.SENDER_MISMATCH
                if problem[0] == "INTEGRITY_MISMATCH"
                else Verdict.SENDER_UNVERIFIED
            )
            result.message = problem[1]
    if signing.refusal is not None and result:  # a pass the key may not sign is no pass
        result.verdict = Verdict.UNREGISTERED
        result.message = signing.refusal
    code = exit_code(result.verdict, mode)
    outcome = GateOutcome(result, mode, strict, code, None)
    if env is not None and env.integrity_method == "hmac-sha256":
        short = hmac_key_warning(key)
        if short is not None:
            outcome.notes.append(short)
    if result:
        outcome.evidence = combine(
            SENDER_SIGNATURE if signed_sender else "",
            HMAC if env and env.integrity_method == "hmac-sha256" else "",
        )
        if signing.unsigned_mode:
            outcome.notes.append(UNSIGNED_WARNING)
    if signing.refusal is not None:
        if result.verdict is not Verdict.UNREGISTERED:
            outcome.notes.append(f"warning: no signed receipt: {signing.refusal}")
        if result.verdict is not Verdict.MALFORMED:
            outcome.exit_code = EXIT_BLOCKED  # never signed here: in every mode
    elif signing.problem is not None:
        outcome.notes.append(
            f"warning: no signed receipt: {signing.problem}; receivers will refuse this "
            "hand-off (UNVERIFIED)" + ("" if mode == "block" else "; block mode exits 3")
        )
        if mode == "block":
            outcome.exit_code = EXIT_BLOCKED
    elif signing.signer is not None:
        assert signing.store is not None
        project = signing.store.project
        doc = build_statement(result, command=command, time=now, project=project)
        if doc is not None:
            outcome.receipt = sign_statement(doc, signing.signer)
            outcome.evidence = combine(SIGNED_RECEIPT, *(outcome.evidence or "").split("+"))
            try:
                outcome.receipt_path = write_receipt(result.envelope_path, outcome.receipt)
            except OSError as exc:
                outcome.notes.append(f"warning: receipt not written beside the envelope: {exc}")
                if mode == "block":
                    outcome.exit_code = EXIT_BLOCKED
    if not write_trace:
        return outcome
    own = store is None
    store = store if store is not None else open_store(root, file=trace_file)
    try:
        event = verify_event(
            result,
            gate=GATE,
            mode=mode,
            evidence=outcome.evidence,
            duration_ms=elapsed_ms(start),
            root=root,
        )
        if outcome.receipt is not None:
            event["receipt"] = outcome.receipt
        appended = store.append(env.thread_id if env else None, event)
        outcome.trace_path = appended.location
    except TraceWriteError as exc:
        outcome.trace_error = str(exc)
        if mode == "block" and code == 0:
            outcome.exit_code = EXIT_BLOCKED
    finally:
        if own:
            store.close()
    return outcome


def text_line(outcome: GateOutcome, color: bool = False) -> str:
    """``ecl verify [tamper] atlas -> vigil (PROPOSE): <message>``"""
    r = outcome.result
    env = r.envelope
    verdict = str(r.verdict)
    if color:
        shade = "32" if r.verdict is Verdict.PASS else ("33" if outcome.exit_code == 0 else "31")
        verdict = f"\x1b[{shade}m{verdict}\x1b[0m"
    if env is not None:
        who = f"{env.sender.eidolon} -> {env.recipient.eidolon} ({env.performative})"
    else:
        who = str(r.envelope_path)
    line = f"ecl verify [{verdict}] {printable(who)}: {printable(r.message)}"
    if outcome.evidence is not None:
        line += f" (evidence: {outcome.evidence})"
    if outcome.receipt is not None:
        line += f" [receipt {outcome.receipt['signatures'][0]['keyid'][:16]}]"
    if outcome.blocked:
        line += " [blocked]"
    if outcome.trace_error:
        line += f" (trace not written: {printable(outcome.trace_error)})"
    return line


def warning_line(outcome: GateOutcome) -> str | None:
    """The line printed for a verdict the gate lets through (exit 0 without a pass):
    every one of them in warn mode. None for a pass or a verdict that was stopped."""
    r = outcome.result
    if r.verdict is Verdict.PASS or outcome.exit_code != 0:
        return None
    why = "warn mode let it through; block mode (the default) would exit 3"
    return f"eidolons: warning: [{r.verdict}] not blocked: {why}"
