"""Helpers for the skill tests: a project contract writer and the rendered skill's parts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def contract(
    sender: str,
    receiver: str,
    performatives: list[str],
    kind: str,
    *,
    sections: list[str] | None = None,
    notes: str = "a test edge",
    budget: int = 1000,
    trust: str = "standard",
) -> dict[str, Any]:
    return {
        "contract_version": "1.0",
        "from": sender,
        "to": receiver,
        "edge_origin": "implicit",
        "performatives_allowed": performatives,
        "artifacts": [
            {
                "kind": kind,
                "schema_ref": f"../schemas/per-eidolon/{kind}.v1.json",
                "required_sections": sections or [],
                "evidence_anchor_required": False,
            }
        ],
        "context_delta": {"token_budget_max": budget, "required_handles": []},
        "trust_level": trust,
        "notes": notes,
    }


def write_contract(directory: Path, doc: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{doc['from']}-to-{doc['to']}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def front_matter(data: bytes) -> dict[str, Any]:
    assert data.startswith(b"---\n")
    head, _, _ = data[4:].partition(b"\n---\n")
    doc = yaml.safe_load(head.decode("utf-8"))
    assert isinstance(doc, dict)
    return doc


def table_rows(data: bytes) -> dict[str, list[str]]:
    """The inbound-edges table: sender -> its row's cells."""
    text = data.decode("utf-8")
    section = text.split("## Inbound edges", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        if line.startswith("| ") and not line.startswith(("| from ", "|---")):
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            rows[cells[0]] = cells
    return rows
