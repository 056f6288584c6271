"""The sender's envelope builder: the envelope for one payload, as a dict. Pure.

Every value is checked with the grammar and the schema; the builder refuses what breaks
a 2.1 MUST (I-5, S-3). ``artifact.sha256`` is the plain SHA-256, ``integrity`` the tag of
the same read. :mod:`eidolons.gates.sender` does the I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eidolons.ecl import grammar
from eidolons.ecl.contract import high_trust_problem
from eidolons.ecl.envelope import (
    EDGE_ORIGINS,
    PERFORMATIVES,
    TIERS,
    TRUST_LEVELS,
    AgentRef,
    Envelope,
)
from eidolons.ecl.events import utc_now
from eidolons.ecl.grammar import is_safe_relative_path
from eidolons.ecl.integrity import Digest
from eidolons.errors import UsageError


def parse_agent(spec: str, option: str) -> AgentRef:
    """``atlas`` or ``atlas@1.4.2`` (a missing version is ``n/a``)."""
    eidolon, _, version = spec.partition("@")
    if not grammar.is_slug(eidolon):
        raise UsageError(f"{option} {spec!r}: the eidolon must match ^[a-z][a-z0-9-]*$")
    version = version or "n/a"
    if not grammar.is_agent_version(version):
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
    sender_signed: bool = False,
) -> dict[str, Any]:
    """The envelope as a dict. Raises :class:`UsageError` for one that breaks the schema
    or, at 2.1 and trust high, lacks HMAC (I-5; ``sender_signed`` stands in, ADR 0011)
    or an ``ise`` block (S-3)."""
    if performative not in PERFORMATIVES:
        raise UsageError(f"--performative {performative!r} is not one of {sorted(PERFORMATIVES)}")
    if not grammar.is_slug(kind):
        raise UsageError(f"--kind {kind!r} must match ^[a-z][a-z0-9-]*$")
    if not 1 <= len(objective) <= 240:
        raise UsageError("--objective must be 1 to 240 characters")
    if not grammar.is_envelope_version(envelope_version):
        raise UsageError(f"--envelope-version {envelope_version!r} is not 1.0-1.2 or 2.0-2.1")
    if not grammar.is_schema_version(schema_version):
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
    v21 = grammar.is_v21_version(envelope_version)
    if v21 and high_trust_problem(envelope) is not None and not sender_signed:
        raise UsageError(
            "trust_level high at ECL 2.1 requires HMAC integrity (gate I-5): add --hmac "
            "(or --sign, which this tool's receivers accept instead)"
        )
    if v21 and trust_level == "high" and ise is None:
        raise UsageError(
            "trust_level high at ECL 2.1 requires an ise block (gate S-3): add --ise JSON"
        )
    problems = Envelope.from_dict(envelope).schema_problems()
    if problems:
        raise UsageError("the envelope would not be valid: " + "; ".join(problems))
    return envelope
