"""The one envelope builder of the tests: hand-made envelopes are built by the library's
own sender builder (:func:`eidolons.ecl.builder.build_envelope`, which refuses what
breaks the schema or a 2.1 MUST), with fixed ids and timestamp, then edited field by
field with :func:`edit` for the envelopes a test needs broken."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from eidolons.ecl.builder import ContextDelta, build_envelope, parse_agent
from eidolons.ecl.integrity import digest_bytes

#: ``edit(doc, field=DROP)`` removes the field
DROP: Any = object()


def edit(doc: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A deep copy of ``doc`` with ``changes`` applied: a key ``a__b`` sets the nested
    field ``doc["a"]["b"]`` (parents created as needed), a value :data:`DROP` removes
    the field."""
    out = copy.deepcopy(doc)
    for dotted, value in changes.items():
        node = out
        *parents, last = dotted.split("__")
        for key in parents:
            node = node.setdefault(key, {})
        if value is DROP:
            node.pop(last, None)
        else:
            node[last] = value
    return out


def envelope_for(
    payload: bytes,
    *,
    path: str = "r.md",
    sender: str = "atlas@1.4.2",
    to: str = "vigil@1.9.0",
    performative: str = "PROPOSE",
    kind: str = "scout-report",
    objective: str = "o",
    message_id: str = "m1",
    thread_id: str | None = None,
    envelope_version: str = "2.1",
    schema_version: str = "1.0",
    edge_origin: str | None = None,
    trust_level: str | None = None,
    token_budget: int = 10,
    tokens_used: int = 1,
    summary: str = "s",
    input_handles: tuple[str, ...] = (),
    method: str = "sha256",
    key: bytes | None = None,
    ts: str = "2026-12-01T00:00:00Z",
    model: str = "m",
    tier: str = "standard",
    **changes: Any,
) -> dict[str, Any]:
    """The envelope the sender builder makes for ``payload`` (tagged with ``method``,
    ``key``), then ``changes`` applied by :func:`edit`."""
    env = build_envelope(
        digest=digest_bytes(payload, method, key),
        artifact_path=path,
        sender=parse_agent(sender, "--from"),
        recipient=parse_agent(to, "--to"),
        performative=performative,
        kind=kind,
        objective=objective,
        message_id=message_id,
        thread_id=thread_id or message_id,
        parent_id=None,
        context_delta=ContextDelta(token_budget, tokens_used, summary, input_handles),
        schema_version=schema_version,
        envelope_version=envelope_version,
        trust_level=trust_level,
        edge_origin=edge_origin,
        model=model,
        tier=tier,
        ts=ts,
    )
    return edit(env, **changes) if changes else env


def write_pair(folder: Path, name: str, payload: bytes, envelope: dict[str, Any]) -> Path:
    """Write ``folder/NAME.md`` (``payload``) and ``folder/NAME.envelope.json``; return
    the envelope's path."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.md").write_bytes(payload)
    path = folder / f"{name}.envelope.json"
    path.write_text(json.dumps(envelope, indent=2))
    return path


def rewrite(envelope: Path, *, indent: int | None = 2, **changes: Any) -> None:
    """What an agent in the middle does to an envelope on disk: load it, apply
    ``changes`` by :func:`edit`, write it back (no re-tagging)."""
    import json

    doc = json.loads(envelope.read_text())
    envelope.write_text(json.dumps(edit(doc, **changes), indent=indent))


def forge_pass(root: Path, envelope: Path, **extra: Any) -> None:
    """What an agent can write without the gate: a perfect copy of an orchestrator
    ``verify_pass`` line for ``envelope`` (plus ``extra`` fields), appended to its
    thread's trace under ``root``."""
    import hashlib
    import json

    doc = json.loads(envelope.read_bytes())
    line = {
        "ts": "2026-12-01T00:00:00.000Z", "event": "verify_pass",
        "message_id": doc["message_id"], "thread_id": doc["thread_id"],
        "from": "atlas@n/a", "to": "vigil@n/a", "performative": "PROPOSE",
        "integrity_method": "sha256", "gate": "orchestrator", "verdict": "pass",
        "integrity_value": doc["integrity"]["value"], "payload_sha256": doc["integrity"]["value"],
        "envelope_sha256": hashlib.sha256(envelope.read_bytes()).hexdigest(),
        "verifier": "eidolons@0.1.0", **extra,
    }  # fmt: skip
    trace = root / ".eidolons/.trace" / f"{doc['thread_id']}.jsonl"
    trace.parent.mkdir(parents=True, exist_ok=True)
    with trace.open("a") as fh:
        fh.write(json.dumps(line, separators=(",", ":")) + "\n")
