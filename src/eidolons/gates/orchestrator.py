"""The orchestrator's mechanical gate (``eidolons verify-envelope``).

It runs the integrity check (:mod:`eidolons.verify`), appends one ``verify_pass`` or
``verify_fail`` event to the thread's trace, and decides the exit code:

- block is the default mode (:func:`eidolons.config.verify_mode`); warn is an opt-in;
- 0 on pass; in warn mode 0 for every verdict except ``malformed``, and every verdict it
  lets through gets a :func:`warning_line`;
- in block mode 3 for tamper, inconsistent, missing_payload, unsupported_algo, no_key;
  ``unverifiable`` exits 0 unless ``strict`` (then every non-pass exits 3);
- ``malformed`` exits 2;
- fail closed: if the trace cannot be written, block mode exits 3 even on a pass, since
  the receivers would find no ``verify_pass`` on record.
"""

from __future__ import annotations

from pathlib import Path

from eidolons._text import printable
from eidolons.config import Limits
from eidolons.errors import TraceWriteError
from eidolons.evidence import HMAC, UNSIGNED_WARNING, combine
from eidolons.trace import (
    TOOL,
    UNKNOWN_THREAD,
    agent_label,
    append_event,
    thread_trace_path,
    utc_now,
)
from eidolons.verdict import EXIT_BLOCKED, Verdict, exit_code
from eidolons.verify import VerificationResult, verify_envelope_file

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Any

    from eidolons.integrity import Writable

GATE = "orchestrator"


class GateOutcome:
    """The gate's decision: the check's result, the mode, the exit code and the trace."""

    __slots__ = (
        "evidence",
        "exit_code",
        "mode",
        "notes",
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
        trace_path: Path | None = None,
        trace_error: str | None = None,
    ) -> None:
        self.result = result
        self.mode = mode
        self.strict = strict
        self.exit_code = exit_code
        self.trace_path = trace_path
        self.trace_error = trace_error
        self.evidence: str | None = None  # what a pass rested on (ADR 0030); None if no pass
        self.notes: list[str] = []  # warning lines about the evidence (stderr in text mode)

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
            "trace": str(self.trace_path) if self.trace_path else None,
        }
        if self.trace_error:
            out["trace_error"] = self.trace_error
        return out


def verify_event(
    result: VerificationResult,
    *,
    gate: str,
    mode: str,
    verifier: str = TOOL,
    evidence: str | None = None,
) -> dict[str, Any]:
    """The trace event for one verification (seed shapes plus gate, verdict, digests)."""
    env = result.envelope
    passed = bool(result)
    event: dict[str, Any] = {
        "ts": utc_now(),
        "event": "verify_pass" if passed else "verify_fail",
        "message_id": (env.message_id if env else None) or "unknown",
        "thread_id": (env.thread_id if env else None) or UNKNOWN_THREAD,
        "from": agent_label(env.sender.eidolon, env.sender.version) if env else "unknown@n/a",
        "to": agent_label(env.recipient.eidolon, env.recipient.version) if env else "unknown@n/a",
    }
    if env is not None:  # unknown when the envelope cannot be parsed: omitted, not invented
        event["performative"] = env.performative
    event["integrity_method"] = env.integrity_method if env else "unknown"
    if not passed:
        event["verify_failure_code"] = result.failure_code
        event["decision"] = "refused" if mode == "block" else "warned"
    event["gate"] = gate
    event["verdict"] = str(result.verdict)
    if env is not None:
        event["integrity_value"] = env.integrity_value
    if result.digest is not None:
        event["payload_sha256"] = result.digest.sha256
    if result.envelope_sha256 is not None:
        event["envelope_sha256"] = result.envelope_sha256
    event["verifier"] = verifier
    if passed and evidence is not None:
        event["evidence"] = evidence
    if not passed:
        event["reason"] = result.message
    return event


def run_gate(
    envelope_path: Path,
    *,
    root: Path,
    mode: str,
    strict: bool = False,
    key: bytes | None = None,
    limits: Limits | None = None,
    trace_file: Path | None = None,
    write_trace: bool = True,
    keep_payload: bool = False,
    sink: Writable | None = None,
) -> GateOutcome:
    """Verify, record the event, decide the exit code. ``sink`` receives the exact bytes
    hashed (the route gate hands COMMAND that snapshot, never the live file)."""
    result = verify_envelope_file(
        envelope_path,
        root=root,
        limits=limits,
        key=key,
        strict=strict,
        keep_payload=keep_payload,
        sink=sink,
    )
    code = exit_code(result.verdict, mode, strict)
    outcome = GateOutcome(result, mode, strict, code, None)
    if result:
        env = result.envelope
        outcome.evidence = combine(HMAC if env and env.integrity_method == "hmac-sha256" else "")
        outcome.notes.append(UNSIGNED_WARNING)
    if not write_trace:
        return outcome
    env = result.envelope
    path = trace_file or thread_trace_path(root, env.thread_id if env else None)
    try:
        append_event(path, verify_event(result, gate=GATE, mode=mode, evidence=outcome.evidence))
        outcome.trace_path = path
    except TraceWriteError as exc:
        outcome.trace_error = str(exc)
        if mode == "block" and code == 0:
            outcome.exit_code = EXIT_BLOCKED
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
    if outcome.blocked:
        line += " [blocked]"
    if outcome.trace_error:
        line += f" (trace not written: {printable(outcome.trace_error)})"
    return line


def warning_line(outcome: GateOutcome) -> str | None:
    """The line printed for a verdict the gate lets through (exit 0 without a pass):
    every one of them in warn mode, ``unverifiable`` in block mode without ``--strict``.
    None for a pass or a verdict that was stopped."""
    r = outcome.result
    if r.verdict is Verdict.PASS or outcome.exit_code != 0:
        return None
    if outcome.mode == "block":
        why = "block mode lets a placeholder digest through (--strict blocks it)"
    else:
        why = "warn mode let it through; block mode (the default) would exit 3"
    return f"eidolons: warning: [{r.verdict}] not blocked: {why}"
