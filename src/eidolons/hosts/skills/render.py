"""Render a receiver's verify-incoming skill from the effective contract set. Pure.

:func:`render_skill` fills ``SKILL.template.md`` (the shape of the VIGIL and Gilgamesh
seeds) for one receiver. Rules:

1. **Deterministic**: no clock, no absolute path, no version; edges sorted by sender.
2. **The table is the contracts**: one row per inbound edge of the effective set. Only
   slugs, enums, numbers and code-spanned section names of a contract reach the text,
   never its free text, so a project contract cannot write instructions into a skill.
3. **Marked as generated**: ``metadata`` carries ``generated_by``, ``contracts_sha256``
   and ``content_sha256`` (the file's SHA-256 with that value empty), which
   :func:`generated_state` checks.
4. **Valid front matter** for Claude Code and the Agent Skills spec: ``name``
   (``<receiver>-verify-incoming``), a one-line ``description`` of at most 500 characters
   (Codex's limit) and a string-to-string ``metadata`` map.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from eidolons._text import printable
from eidolons.ecl.grammar import is_slug
from eidolons.ecl.integrity import RefusalCode
from eidolons.errors import EidolonsError
from eidolons.io.files import package_text

if TYPE_CHECKING:
    from eidolons.ecl.contract import Contract, ContractSet

GENERATED_BY = "eidolons skill render"
MAX_RECEIVER = 32  # keeps the description under 500 characters (Codex) and the name under 64
_DIGEST_LINE = re.compile(rb'^  content_sha256: "([0-9a-f]{64})"$', re.M)
_EMPTY_DIGEST = b'  content_sha256: ""'
_FIELD = re.compile(r"\{\{(\w+)\}\}")

#: When each refusal code applies, one line each (the README's table, shortened); the
#: codes and their order are :class:`RefusalCode`'s.
_WHEN: dict[RefusalCode, str] = {
    RefusalCode.INTEGRITY_MISMATCH: "a verify_fail on record, a pass on record for another "
    "digest, method or envelope (swapped envelope), artifact.sha256 differing from the tag, "
    "or the digest recomputed now not matching (also a missing HMAC key or payload)",
    RefusalCode.UNVERIFIED: "no orchestrator verify_pass on record for the message_id, or a "
    "placeholder",
    RefusalCode.SCHEMA_INVALID: "the envelope does not parse strictly, violates the schema or "
    "a conformance MUST; unsupported method; both envelope names exist",
    RefusalCode.UNDECLARED_EDGE: "to.eidolon is not this receiver, no contract for from -> "
    "receiver, or the contract set fails to load",
    RefusalCode.PERFORMATIVE_NOT_ALLOWED: "the performative is not in the edge's contract",
    RefusalCode.ARTIFACT_KIND_NOT_ALLOWED: "artifact.kind is not in the edge's contract",
    RefusalCode.CONTEXT_OVER_BUDGET: "tokens_used above the envelope's token_budget or the "
    "contract's token_budget_max",
    RefusalCode.MISSING_REQUIRED_SECTION: "a Markdown payload lacks a heading for a section the "
    "contract requires",
}
REFUSAL_CODE_WHEN: tuple[tuple[str, str], ...] = tuple(
    (code.value, _WHEN[code]) for code in RefusalCode
)


class SkillError(EidolonsError):
    """A skill that cannot be rendered (unknown receiver, bad name). Exit 2 in the CLI."""

    code = "SKILL"
    exit_code = 2


@dataclass(frozen=True)
class _Profile:
    """What the seeds say per member beyond the contracts (display name and wording)."""

    display: str
    phase: str = "cross-cutting"
    recall_query: str = "artifact GOAL"
    posture_extra: str = ""
    memory_extra: str = ""
    on_success_extra: str = ""


_PROFILES: dict[str, _Profile] = {
    "atlas": _Profile("ATLAS"),
    "spectra": _Profile("SPECTRA"),
    "ramza": _Profile("RAMZA"),
    "apivr": _Profile("APIVR-Δ"),
    "vivi": _Profile("Vivi"),
    "idg": _Profile("IDG"),
    "forge": _Profile("FORGE"),
    "vigil": _Profile("VIGIL", phase="pre-V"),
    "kupo": _Profile("Kupo"),
    "gilgamesh": _Profile(
        "Gilgamesh",
        recall_query="mission objective",
        posture_extra=" A wanderer who wields an unverified blade might be wielding Excalipoor.",
        memory_extra=" Gilgamesh persists nothing — recall sharpens this one mission only.",
        on_success_extra=" (Phase G, gauge.md)",
    ),
}


def skill_name(receiver: str) -> str:
    """The skill's ``name`` and host directory: ``<receiver>-verify-incoming``."""
    return f"{receiver}-verify-incoming"


def receivers(contract_set: ContractSet) -> list[str]:
    """Every receiver of the set (each ``to`` of an edge), sorted."""
    return sorted({c.to for c in contract_set.edges()})


def contracts_digest(inbound: Sequence[Contract]) -> str:
    """SHA-256 over the canonical JSON of the inbound contracts (without their source)."""
    doc = [c.to_dict() for c in sorted(inbound, key=lambda c: c.key)]
    data = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(data.encode("ascii")).hexdigest()


def render_skill(receiver: str, contract_set: ContractSet) -> bytes:
    """The bytes of ``receiver``'s verify-incoming ``SKILL.md`` (module rules 1-4).

    Raises :class:`SkillError` if ``receiver`` is not a slug or no contract of the set
    names it as receiver."""
    if not is_slug(receiver) or len(receiver) > MAX_RECEIVER:
        raise SkillError(
            f"{printable(receiver)!r} is not an eidolon slug of at most {MAX_RECEIVER} characters"
        )
    inbound = contract_set.inbound(receiver)
    if not inbound:
        known = ", ".join(receivers(contract_set))
        raise SkillError(f"no contract names {receiver!r} as receiver (receivers: {known})")
    profile = _PROFILES.get(receiver, _Profile(receiver))
    text = _front_matter(receiver, profile, contracts_digest(inbound)) + _body(
        receiver, profile, inbound
    )
    data = text.encode("utf-8")
    digest = hashlib.sha256(data).hexdigest().encode("ascii")
    return data.replace(_EMPTY_DIGEST, b'  content_sha256: "' + digest + b'"', 1)


def generated_state(data: bytes) -> str:
    """``"generated"`` (written by :func:`render_skill`, unchanged since), ``"modified"``
    (it carries this tool's marker but its bytes were changed) or ``"foreign"``."""
    marker = f'  generated_by: "{GENERATED_BY}"'.encode()
    if not data.startswith(b"---\n") or marker not in data.split(b"\n---\n", 1)[0]:
        return "foreign"
    found = _DIGEST_LINE.findall(data)
    if len(found) != 1:
        return "modified"
    emptied = _DIGEST_LINE.sub(_EMPTY_DIGEST, data, count=1)
    expected = hashlib.sha256(emptied).hexdigest().encode("ascii")
    return "generated" if found[0] == expected else "modified"


# --------------------------------------------------------------------------- text


def _yaml_str(value: str) -> str:
    # a JSON string is a valid YAML double-quoted scalar (json.dumps never writes "\/")
    return json.dumps(value, ensure_ascii=False)


def _description(display: str) -> str:
    # at most 494 characters: a display name is a known one or a receiver of <= 32
    return (
        f"Blocking, symmetric receiver-side integrity gate for inbound ECL hand-offs to "
        f"{display}. Enforces ECL §6.2.2: REFUSES to process any upstream artifact whose "
        f"envelope the orchestrator gate has not verified and passed, or that is off-contract; "
        f"hands back to the orchestrator on failure. Use when reading any upstream artifact "
        f"handed off to {display} that carries a sibling .envelope.json. Do NOT use for "
        f"non-ECL artifacts (no .envelope.json sibling)."
    )


def _front_matter(receiver: str, profile: _Profile, digest: str) -> str:
    lines = [
        "---",
        f"name: {skill_name(receiver)}",
        f"description: {_yaml_str(_description(profile.display))}",
        "metadata:",
        f"  methodology: {_yaml_str(profile.display)}",
        f"  phase: {_yaml_str(profile.phase)}",
        f"  receiver: {_yaml_str(receiver)}",
        f"  generated_by: {_yaml_str(GENERATED_BY)}",
        f'  contracts_sha256: "{digest}"',
        _EMPTY_DIGEST.decode("ascii"),
        "---",
        "",
    ]
    return "\n".join(lines) + "\n"


def _cell(values: Sequence[str]) -> str:
    return ", ".join(values) if values else "—"


def _code_span(name: str) -> str:
    """A contract string (section name, handle) as a code span: printable, no backtick or
    pipe, bounded."""
    safe = printable(name).replace("`", "'").replace("|", "/")
    if len(safe) > 80:
        safe = safe[:77] + "..."
    return f"`{safe}`"


def _sections_cell(contract: Contract) -> str:
    parts = [
        f"{a.kind}: {', '.join(_code_span(s) for s in a.required_sections)}"
        for a in contract.artifacts
        if a.required_sections
    ]
    return "; ".join(parts) if parts else "—"


def _edge_rows(inbound: Sequence[Contract]) -> list[str]:
    rows = [
        "| from | performative(s) | artifact.kind | required sections | required handles "
        "| token budget | trust |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in inbound:
        budget = "—" if c.token_budget_max is None else str(c.token_budget_max)
        trust = c.trust_level or "standard"
        if trust == "high":
            trust = "high (HMAC or sender signature)"
        rows.append(
            f"| {c.from_} | {_cell(c.performatives_allowed)} | {_cell(c.kinds)} | "
            f"{_sections_cell(c)} | {_cell([_code_span(h) for h in c.required_handles])} | "
            f"{budget} | {trust} |"
        )
    return rows


def _lateral_note(receiver: str, inbound: Sequence[Contract]) -> list[str]:
    """Gilgamesh's seed note on the forge consult, kept only while the contract says it."""
    if receiver != "gilgamesh":
        return []
    forge = next((c for c in inbound if c.from_ == "forge"), None)
    if forge is None or forge.performatives_allowed != ("INFORM",):
        return []
    return [
        "The lone lateral edge forge → gilgamesh (a consult) is accepted only as INFORM; a "
        "forge DELEGATE is PERFORMATIVE_NOT_ALLOWED.",
        "",
    ]


def _body(receiver: str, profile: _Profile, inbound: Sequence[Contract]) -> str:
    """The skill's text: ``SKILL.template.md`` with each ``{{field}}`` filled in one pass
    (a value is never searched for fields itself)."""
    lateral = _lateral_note(receiver, inbound)
    values = {
        "r": receiver,
        "name": profile.display,
        "recall_query": profile.recall_query,
        "posture_extra": profile.posture_extra,
        "memory_extra": profile.memory_extra,
        "on_success_extra": profile.on_success_extra,
        "edge_rows": "\n".join(_edge_rows(inbound)),
        "lateral_note": "".join(line + "\n" for line in lateral),
        "codes": ", ".join(code for code, _ in REFUSAL_CODE_WHEN),
        "code_rows": "\n".join(f"| {code} | {when} |" for code, when in REFUSAL_CODE_WHEN),
    }
    template = package_text("hosts", "skills", "SKILL.template.md")
    return _FIELD.sub(lambda m: values[m.group(1)], template)
