"""The sender's side: build an envelope for a payload and write it beside the payload.

Rules:

- The envelope is written to ``${PAYLOAD%.*}.envelope.json`` (the seeds' naming) or
  ``--out``, atomically (temporary file in the same directory, then link or rename), and
  never over an existing file unless ``force``.
- Ids are UUIDv7; the thread id is the message id when no thread is given.
- ``artifact.sha256`` is always the plain SHA-256 of the payload; ``integrity.value`` is
  the SHA-256 or, with a key, the HMAC-SHA-256. Both come from one read of the payload.
- ``artifact.path`` is relative to the envelope's directory when the payload lies under
  it, else relative to the project root; a payload outside both is refused.
- One ``emit`` event is appended to the thread's trace before the envelope appears; if the
  trace cannot be written nothing is written at all.
- :func:`build_envelope` is pure; :func:`emit` does the I/O.
"""

from __future__ import annotations

import os
import secrets
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eidolons.config import Limits
from eidolons.envelope import (
    AGENT_VERSION_RE,
    EDGE_ORIGINS,
    PERFORMATIVES,
    SCHEMA_VERSION_RE,
    SLUG_RE,
    TIERS,
    TRUST_LEVELS,
    VERSION_RE,
    AgentRef,
    Envelope,
    is_safe_relative_path,
)
from eidolons.errors import InputError, UsageError
from eidolons.integrity import Digest, PayloadTooLarge, digest_stream
from eidolons.payload import (
    ENVELOPE_SUFFIX,
    PayloadError,
    PayloadLocation,
    default_envelope_path,
    open_payload,
)
from eidolons.trace import TOOL, agent_label, append_event, thread_trace_path, utc_now


def uuid7() -> str:
    """A UUIDv7 (RFC 9562): 48-bit Unix milliseconds, version 7, 74 random bits."""
    ms = time.time_ns() // 1_000_000
    rand = secrets.randbits(74)
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= (rand >> 62) << 64  # 12 bits rand_a
    value |= 0b10 << 62  # variant
    value |= rand & ((1 << 62) - 1)
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def parse_agent(spec: str, option: str) -> AgentRef:
    """``atlas`` or ``atlas@1.4.2`` (a missing version is ``n/a``)."""
    eidolon, _, version = spec.partition("@")
    if not SLUG_RE.match(eidolon):
        raise UsageError(f"{option} {spec!r}: the eidolon must match ^[a-z][a-z0-9-]*$")
    version = version or "n/a"
    if not AGENT_VERSION_RE.match(version):
        raise UsageError(f"{option} {spec!r}: the version must be MAJOR.MINOR.PATCH")
    return AgentRef(eidolon, version)


@dataclass(frozen=True, slots=True)
class ContextDelta:
    token_budget: int
    tokens_used: int
    summary: str
    input_handles: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "token_budget": self.token_budget,
            "tokens_used": self.tokens_used,
            "input_handles": list(self.input_handles),
            "summary": self.summary,
        }


def build_envelope(
    *,
    digest: Digest,
    artifact_path: str,
    sender: AgentRef,
    recipient: AgentRef,
    performative: str,
    kind: str,
    objective: str,
    message_id: str,
    thread_id: str,
    parent_id: str | None,
    context_delta: ContextDelta,
    schema_version: str = "1.0",
    envelope_version: str = "2.1",
    trust_level: str | None = None,
    edge_origin: str | None = None,
    ise: Mapping[str, Any] | None = None,
    host: str = "raw",
    model: str = "unknown",
    tier: str = "standard",
    ts: str | None = None,
) -> dict[str, Any]:
    """The envelope as a dict. Pure. Refuses (:class:`UsageError`) to build an envelope
    that violates the schema, or that the receivers would refuse for a conformance MUST:
    at ECL 2.1, ``trust_level: high`` needs HMAC integrity (I-5) and an ``ise`` block
    (S-3)."""
    if performative not in PERFORMATIVES:
        raise UsageError(f"--performative {performative!r} is not one of {sorted(PERFORMATIVES)}")
    if not SLUG_RE.match(kind):
        raise UsageError(f"--kind {kind!r} must match ^[a-z][a-z0-9-]*$")
    if not 1 <= len(objective) <= 240:
        raise UsageError("--objective must be 1 to 240 characters")
    if not VERSION_RE.match(envelope_version):
        raise UsageError(f"--envelope-version {envelope_version!r} is not 1.0-1.2 or 2.0-2.1")
    if not SCHEMA_VERSION_RE.match(schema_version):
        raise UsageError(f"--schema-version {schema_version!r} must be MAJOR.MINOR[.PATCH]")
    if trust_level is not None and trust_level not in TRUST_LEVELS:
        raise UsageError(f"--trust-level must be one of {sorted(TRUST_LEVELS)}")
    if edge_origin is not None and edge_origin not in EDGE_ORIGINS:
        raise UsageError(f"--edge-origin must be one of {sorted(EDGE_ORIGINS)}")
    if tier not in TIERS:
        raise UsageError("tier must be standard or trance")
    if not is_safe_relative_path(artifact_path):
        raise UsageError(f"artifact path {artifact_path!r} is not a safe relative path")
    cd = context_delta
    if cd.tokens_used < 0 or cd.token_budget < 0:
        raise UsageError("--tokens-used and --token-budget must be >= 0")
    if cd.tokens_used > cd.token_budget:
        raise UsageError(
            f"--tokens-used {cd.tokens_used} is above --token-budget {cd.token_budget}"
        )
    if not cd.summary:
        raise UsageError("--summary must not be empty")
    for handle in cd.input_handles:
        if not is_safe_relative_path(handle) and not handle.startswith("ecl://"):
            raise UsageError(f"--input-handle {handle!r} must be a relative path or ecl:// handle")
    envelope: dict[str, Any] = {
        "envelope_version": envelope_version,
        "message_id": message_id,
        "thread_id": thread_id,
        "parent_id": parent_id,
        "from": {"eidolon": sender.eidolon, "version": sender.version},
        "to": {"eidolon": recipient.eidolon, "version": recipient.version},
        "performative": performative,
    }
    if edge_origin is not None:
        envelope["edge_origin"] = edge_origin
    envelope["objective"] = objective
    envelope["artifact"] = {
        "kind": kind,
        "schema_version": schema_version,
        "path": artifact_path,
        "sha256": digest.sha256,
        "size_bytes": digest.size,
    }
    envelope["context_delta"] = cd.to_dict()
    if trust_level is not None:
        envelope["constraints"] = {"trust_level": trust_level}
    if ise is not None:
        envelope["ise"] = dict(ise)
    envelope["integrity"] = {"method": digest.method, "value": digest.value}
    envelope["trace"] = {"ts": ts or utc_now(), "host": host, "model": model, "tier": tier}
    if trust_level == "high" and envelope_version.startswith("2.1"):
        if digest.method != "hmac-sha256":
            raise UsageError(
                "trust_level high at ECL 2.1 requires HMAC integrity (gate I-5): add --hmac"
            )
        if ise is None:
            raise UsageError(
                "trust_level high at ECL 2.1 requires an ise block (gate S-3): add --ise JSON"
            )
    problems = Envelope.from_dict(envelope).schema_problems()
    if problems:
        raise UsageError("the envelope would not be valid: " + "; ".join(problems))
    return envelope


@dataclass(frozen=True, slots=True)
class EmitResult:
    envelope_path: Path
    envelope: dict[str, Any]
    trace_path: Path | None


def _artifact_path(payload: Path, envelope_path: Path, root: Path) -> str:
    payload_abs = Path(os.path.abspath(payload))
    for base in (Path(os.path.abspath(envelope_path)).parent, Path(os.path.abspath(root))):
        if payload_abs.is_relative_to(base):
            return payload_abs.relative_to(base).as_posix()
    raise UsageError(
        f"payload {payload} is neither under the envelope's directory nor under the project "
        f"root {root}; the receiver could not resolve it"
    )


def emit(
    payload: Path,
    *,
    sender: AgentRef,
    recipient: AgentRef,
    performative: str,
    kind: str,
    objective: str,
    root: Path,
    thread_id: str | None = None,
    parent_id: str | None = None,
    schema_version: str = "1.0",
    envelope_version: str = "2.1",
    trust_level: str | None = None,
    edge_origin: str | None = None,
    ise: Mapping[str, Any] | None = None,
    tokens_used: int | None = None,
    token_budget: int = 4000,
    summary: str | None = None,
    input_handles: Sequence[str] = (),
    key: bytes | None = None,
    out: Path | None = None,
    force: bool = False,
    write_trace: bool = True,
    trace_file: Path | None = None,
    env: Mapping[str, str] | None = None,
    limits: Limits | None = None,
) -> EmitResult:
    """Write the envelope for ``payload`` and record the ``emit`` event."""
    env = os.environ if env is None else env
    limits = limits or Limits()
    if payload.name.endswith(ENVELOPE_SUFFIX):
        raise UsageError(f"{payload} is an envelope, not a payload")
    envelope_path = out or default_envelope_path(payload)
    if not envelope_path.name.endswith(ENVELOPE_SUFFIX):
        raise UsageError(f"--out {envelope_path} must be named *{ENVELOPE_SUFFIX}")
    state = Path(os.path.realpath(root)) / ".eidolons"
    if Path(os.path.realpath(envelope_path)).is_relative_to(state):
        raise UsageError(f"{envelope_path} lies in {state}, the gates' own state (trace, memory)")
    if envelope_path.exists() and not force:
        raise UsageError(f"{envelope_path} exists; use --force to replace it")
    artifact_path = _artifact_path(payload, envelope_path, root)
    method = "hmac-sha256" if key is not None else "sha256"
    location = PayloadLocation(payload, Path(os.path.realpath(payload)), "emit")
    try:
        with open_payload(location) as stream:
            digest = digest_stream(stream, method, key, max_bytes=limits.max_payload_bytes)
    except FileNotFoundError:
        raise InputError(f"payload {payload} does not exist") from None
    except (PayloadError, PayloadTooLarge) as exc:
        raise InputError(str(exc)) from None
    except OSError as exc:
        raise InputError(f"cannot read payload {payload}: {exc.strerror or exc}") from None
    summary = summary or objective
    cd = ContextDelta(
        token_budget=token_budget,
        tokens_used=tokens_used if tokens_used is not None else (len(summary.encode()) + 3) // 4,
        summary=summary,
        input_handles=tuple(input_handles),
    )
    message_id = uuid7()
    envelope = build_envelope(
        digest=digest,
        artifact_path=artifact_path,
        sender=sender,
        recipient=recipient,
        performative=performative,
        kind=kind,
        objective=objective,
        message_id=message_id,
        thread_id=thread_id or message_id,
        parent_id=parent_id,
        context_delta=cd,
        schema_version=schema_version,
        envelope_version=envelope_version,
        trust_level=trust_level,
        edge_origin=edge_origin,
        ise=ise,
        host=env.get("ECL_HOST") or "raw",
        model=env.get("ECL_MODEL") or "unknown",
    )
    import json

    data = (json.dumps(envelope, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    directory = envelope_path.parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=".eidolons-", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise InputError(f"cannot write in {directory}: {exc.strerror or exc}") from None
    tmp = Path(tmp_name)
    trace_path: Path | None = None
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; receivers must read it
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if write_trace:
            trace_path = trace_file or thread_trace_path(root, envelope["thread_id"])
            append_event(trace_path, emit_event(envelope, digest))
        if force:
            os.replace(tmp, envelope_path)
        else:
            try:
                os.link(tmp, envelope_path)  # atomic, and fails if the target appeared
            except FileExistsError:
                raise UsageError(f"{envelope_path} exists; use --force to replace it") from None
    except OSError as exc:
        raise InputError(f"cannot write {envelope_path}: {exc.strerror or exc}") from None
    finally:
        if tmp.exists():
            tmp.unlink()
    return EmitResult(envelope_path, envelope, trace_path)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def emit_event(envelope: Mapping[str, Any], digest: Digest) -> dict[str, Any]:
    """The ``emit`` trace event (the bash SDK's keys plus gate and digests)."""
    return {
        "ts": utc_now(),
        "event": "emit",
        "message_id": envelope["message_id"],
        "thread_id": envelope["thread_id"],
        "from": agent_label(envelope["from"]["eidolon"], envelope["from"]["version"]),
        "to": agent_label(envelope["to"]["eidolon"], envelope["to"]["version"]),
        "performative": envelope["performative"],
        "integrity_method": envelope["integrity"]["method"],
        "context_tokens": envelope["context_delta"]["tokens_used"],
        "model": envelope["trace"]["model"],
        "tier": envelope["trace"]["tier"],
        "gate": "sender",
        "integrity_value": digest.value,
        "payload_sha256": digest.sha256,
        "emitter": TOOL,
    }
