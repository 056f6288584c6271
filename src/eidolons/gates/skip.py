"""The receiver gate's SKIP (an artifact with no envelope that the project does not know as
a hand-off): its line and its ``--json`` object, written once for the gate
(:class:`eidolons.gates.receiver.IncomingResult`) and for the command's early decision,
which prints them before anything else is imported (ADR 0022). Imports nothing but
:mod:`eidolons._text`."""

from __future__ import annotations

from eidolons._text import printable

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Any


def skip_line(receiver: str, artifact: str) -> str:
    """What text mode prints on stderr for a skipped artifact."""
    return (
        f"[{receiver}-verify-incoming] SKIP: {printable(artifact)} has no envelope and is not a "
        "known hand-off (not an ECL hand-off; --require-envelope refuses it)"
    )


def skipped_json(receiver: str, artifact: str) -> dict[str, Any]:
    """``IncomingResult("skipped", receiver, Path(artifact)).to_json()``, without the gate
    (a test holds the two equal)."""
    return {
        "status": "skipped",
        "receiver": receiver,
        "artifact": artifact,
        "artefact": artifact,  # the old spelling, kept for one release
        "envelope": None,
        "message_id": None,
        "thread_id": None,
        "from": None,
        "to": None,
        "performative": None,
        "artifact_kind": None,
        "integrity_method": None,
        "failure_code": None,
        "failures": [],
        "record": None,
        "reverified": False,
        "contract": None,
        "contract_sources": [],
        "payload": None,
        "trace": None,
        "evidence": None,
        "evidence_notes": [],
    }
