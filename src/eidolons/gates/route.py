"""The orchestrator's route gate (``eidolons run --verify ENVELOPE [-- COMMAND ...]``).

The orchestrator gate (then with ``--as`` the receiver gate) judges one read of the
envelope and payload; anything but exit 0 blocks the route (exit 3, COMMAND not run), and
in block mode only a ``pass`` is routed. COMMAND gets ``ECL_*`` variables naming
read-only snapshots of the bytes judged, and the route exits with its code.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eidolons.gates.orchestrator import GateOutcome
from eidolons.gates.receiver import IncomingResult
from eidolons.io.paths import realpath

if TYPE_CHECKING:
    from collections.abc import Mapping

    from eidolons.ecl.envelope import Envelope
    from eidolons.io.paths import StrPath


@dataclass(slots=True)
class RouteDecision:
    outcome: GateOutcome
    incoming: IncomingResult | None = None

    @property
    def allowed(self) -> bool:
        if self.outcome.exit_code != 0:
            return False
        if self.outcome.mode == "block" and not self.outcome.result:
            return False  # block mode routes only a pass (a placeholder digest included)
        if self.incoming is None:
            return True
        return bool(self.incoming) and self.same_message() is None

    def same_message(self) -> str | None:
        """Why the two gates did not judge the same hand-off (None when they did): the
        same ``message_id``, the same envelope bytes and the same payload bytes."""
        r, i = self.outcome.result, self.incoming
        if i is None:
            return None
        mine = r.envelope.message_id if r.envelope else None
        theirs = i.envelope.message_id if i.envelope else None
        if mine is None or mine != theirs:
            return "the two gates judged different messages"
        if r.envelope_sha256 is None or r.envelope_sha256 != i.envelope_sha256:
            return "the two gates judged different envelope bytes"
        if r.digest is not None and i.payload_sha256 != r.digest.sha256:
            return "the two gates judged different payload bytes"
        return None

    def reason(self) -> str:
        if self.outcome.exit_code != 0 or (
            self.outcome.mode == "block" and not self.outcome.result
        ):
            r = self.outcome.result
            if r and self.outcome.trace_error:  # e.g. a login that may not record verdicts
                return (
                    f"orchestrator gate [{r.verdict}] but not recorded: {self.outcome.trace_error}"
                )
            if r and self.outcome.receipt is None and self.outcome.notes:
                return f"orchestrator gate [{r.verdict}] but {self.outcome.notes[-1]}"
            return f"orchestrator gate [{r.verdict}] {r.message}"
        if self.incoming is not None and not self.incoming:
            if self.incoming.failures:  # its REFUSE and reason lines follow the route line
                return f"receiver gate [{self.incoming.failure_code}] refused it"
            return f"receiver gate could not record its pass: {self.incoming.trace_error}"
        mismatch = self.same_message()
        if mismatch is not None:
            return mismatch
        return (
            "integrity verified"
            if self.outcome.result
            else f"[{self.outcome.result.verdict}] (warn mode)"
        )

    def command_env(
        self,
        snapshot: Path | None = None,
        envelope_snapshot: Path | None = None,
        base: dict[str, str] | None = None,
    ) -> dict[str, str]:
        """COMMAND's environment. ``ECL_PAYLOAD`` is ``snapshot`` (a read-only copy of the
        bytes the gate hashed) when given; ``ECL_PAYLOAD_SOURCE`` is where they came from.
        ``ECL_ENVELOPE`` is likewise ``envelope_snapshot``, the envelope bytes both gates
        judged; ``ECL_ENVELOPE_SOURCE`` the envelope file."""
        r = self.outcome.result
        payload = snapshot or r.payload_path
        return dispatch_env(
            r.envelope, envelope_snapshot or r.envelope_path, payload, source=r.envelope_path,
            payload_source=r.payload_path, base=base,
        )  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "route": "allowed" if self.allowed else "blocked",
            "reason": self.reason(),
            "incoming_verify": self.outcome.to_json(),
        }
        if self.incoming is not None:
            out["receiver_verify"] = self.incoming.to_json()
        return out


def dispatch_env(
    env: Envelope | None,
    envelope: StrPath,
    payload: StrPath | None,
    *,
    source: StrPath,
    payload_source: StrPath | None,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment a receiver's dispatch COMMAND runs in (``run --verify``, ``a2a
    serve``): the hand-off's ``ECL_*`` variables, the copies judged (``envelope``,
    ``payload``) and where they came from, and never the gate's secrets."""
    from eidolons.io.config import is_secret_env

    # COMMAND is the receiver's dispatch: it gets the hand-off, never the gate's
    # secrets (the HMAC key would let it mint tags for any bytes)
    source_env = os.environ if base is None else base
    out = {k: v for k, v in source_env.items() if not is_secret_env(k)}
    out.update(
        {
            "ECL_ENVELOPE": realpath(envelope),
            "ECL_ENVELOPE_SOURCE": realpath(source),
            "ECL_PAYLOAD": realpath(payload) if payload else "",
            "ECL_PAYLOAD_SOURCE": realpath(payload_source) if payload_source else "",
            "ECL_MESSAGE_ID": (env.message_id if env else None) or "",
            "ECL_THREAD_ID": (env.thread_id if env else None) or "",
            "ECL_FROM": str(env.sender) if env else "",
            "ECL_TO": str(env.recipient) if env else "",
        }
    )
    return out
