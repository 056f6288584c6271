"""The refusal hand-back: what a receiver's refusal leaves for the orchestrator (never a
silent retry). A Markdown refusal report and its ECL envelope (``REFUSE`` to
``orchestrator``, ``parent_id`` the refused message, an ``emit`` event in its own
thread), in ``<root>/.eidolons/refusals/`` where only a gate writes (ADR 0017), reached through
no link; one per (receiver, message, code).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from eidolons._text import printable
from eidolons.ecl.envelope import AgentRef
from eidolons.ecl.grammar import is_slug
from eidolons.ecl.integrity import digest_bytes
from eidolons.errors import TraceWriteError
from eidolons.io.files import BeneathError, open_state_path, write_state_file
from eidolons.trace.log import thread_file_name

if TYPE_CHECKING:
    from eidolons.gates.receiver import IncomingResult
    from eidolons.trace.store import TraceStore

REFUSALS_DIR = Path(".eidolons") / "refusals"
ORCHESTRATOR = "orchestrator"
KIND = "refusal-report"


def handback_paths(result: IncomingResult, root: str | os.PathLike[str]) -> tuple[Path, Path]:
    env = result.envelope
    receiver = result.receiver if is_slug(result.receiver) else "receiver"
    if env is not None and env.message_id and thread_file_name(env.message_id) != "unknown":
        ident = env.message_id
    else:
        ident = "unknown-" + hashlib.sha256(os.fsencode(result.artifact)).hexdigest()[:16]
    code = (result.failure_code or "UNVERIFIED").lower().replace("_", "-")
    stem = f"{receiver}-{ident}-{code}"
    directory = Path(root) / REFUSALS_DIR
    return directory / f"{stem}.md", directory / f"{stem}.envelope.json"


def report_bytes(result: IncomingResult) -> bytes:
    env = result.envelope
    lines = [
        f"# Refusal: {result.receiver} refused a hand-off",
        "",
        "```",
        result.refusal_line(),
        "```",
        "",
        f"- receiver: {result.receiver}",
        f"- sender: {printable(result.sender)}",
        f"- message_id: {printable(env.message_id) if env and env.message_id else 'unknown'}",
        f"- thread_id: {printable(env.thread_id) if env and env.thread_id else 'unknown'}",
        f"- artifact: {printable(str(result.artifact))}",
        f"- code: {result.failure_code}",
        "",
        "## Failed checks",
        "",
    ]
    lines += [f"- {f.code} ({f.check}): {printable(f.message)}" for f in result.failures]
    lines += [
        "",
        "## Decision target",
        "",
        "Route this refusal to VIGIL or to the human: never a silent retry, never a silent "
        "process-anyway. The refused payload was not processed.",
        "",
    ]
    return "\n".join(lines).encode("utf-8")


def write_handback(
    result: IncomingResult, root: str | os.PathLike[str], store: TraceStore
) -> Path | None:
    """Write the hand-back for a refusal; return the envelope's path (None if it could not
    be written: the refusal stands either way)."""
    from eidolons.ecl.builder import ContextDelta, build_envelope
    from eidolons.gates.sender import emit_event, uuid7

    report_path, envelope_path = handback_paths(result, root)
    if _present(root, envelope_path):
        return envelope_path
    env = result.envelope
    data = report_bytes(result)
    digest = digest_bytes(data, "sha256")
    version = (
        env.recipient.version
        if env is not None and env.recipient.eidolon == result.receiver
        else "n/a"
    )
    sender = AgentRef(result.receiver if is_slug(result.receiver) else "receiver", version)
    code = result.failure_code or "UNVERIFIED"
    message_id = uuid7()
    thread = message_id  # its own thread, linked by parent_id: the refused thread is untouched
    objective = f"{result.receiver} refused a hand-off from {result.sender}: {code}"[:240]
    envelope = build_envelope(
        digest=digest,
        artifact_path=report_path.name,
        sender=sender,
        recipient=AgentRef(ORCHESTRATOR, "n/a"),
        performative="REFUSE",
        kind=KIND,
        objective=printable(objective),
        message_id=message_id,
        thread_id=thread,
        parent_id=env.message_id if env is not None else None,
        context_delta=ContextDelta(
            token_budget=4000, tokens_used=(len(data) + 3) // 4, summary=result.refusal_line()
        ),
    )
    envelope["assumptions"] = [f"refused: {code}"]
    envelope["expected_response"] = {
        "performative": "DECIDE",
        "shape_hint": "route to VIGIL or to the human; never a silent retry or process-anyway",
    }
    # beneath the root, through no link: the gate (in a hook or an MCP server, outside
    # the agent's sandbox) never writes where a planted link points
    try:
        _write_new(root, report_path, data)
        store.append(thread, emit_event(envelope, digest))
        text = json.dumps(envelope, indent=2, ensure_ascii=False) + "\n"
        _write_new(root, envelope_path, text.encode("utf-8"))
    except (OSError, BeneathError, TraceWriteError):
        return envelope_path if _present(root, envelope_path) else None
    return envelope_path


def _present(root: str | os.PathLike[str], path: Path) -> bool:
    """Whether the hand-back ``path`` is there, reached through no link (what a link
    leads to is no gate's hand-back)."""
    parts = (*REFUSALS_DIR.parts, path.name)
    try:
        os.close(open_state_path(root, parts, os.O_RDONLY | os.O_NONBLOCK, create=False))
    except (OSError, BeneathError):
        return False
    return True


def _write_new(root: str | os.PathLike[str], path: Path, data: bytes) -> None:
    """Write the hand-back file ``path`` atomically, beneath ``root`` following no link (a
    report left by a hand-back whose envelope was never written is replaced)."""
    write_state_file(root, os.path.join(str(REFUSALS_DIR), path.name), data, 0o644)
