"""Shared helpers for the contract tests: paths, a valid contract, a YAML writer.

A plain module (imported by name from the test files' directory) rather than a conftest,
so it cannot clash with a conftest elsewhere in the test tree.
"""

from __future__ import annotations

import copy
import importlib.util
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
SHIPPED_DIR = REPO / "src" / "eidolons" / "data" / "contracts"
SCHEMA_DIR = REPO / "src" / "eidolons" / "data" / "schemas"
# Same override as tests/conftest.py: EIDOLONS_SHARED points at a copy of shared/.
SHARED_ECL = Path(os.environ.get("EIDOLONS_SHARED", REPO.parent / "shared")) / "ecl"

VALID: dict[str, Any] = {
    "contract_version": "1.0",
    "from": "atlas",
    "to": "vigil",
    "edge_origin": "roster",
    "performatives_allowed": ["PROPOSE"],
    "artifacts": [
        {
            "kind": "scout-report",
            "schema_ref": "../schemas/per-eidolon/scout-report.v1.json",
            "required_sections": [],
            "evidence_anchor_required": False,
        }
    ],
    "context_delta": {"token_budget_max": 100, "required_handles": []},
    "trust_level": "standard",
    "notes": "test contract",
}


def valid_contract(**changes: Any) -> dict[str, Any]:
    """A fresh valid contract document, with top-level keys replaced (None deletes)."""
    data = copy.deepcopy(VALID)
    for key, value in changes.items():
        key = "from" if key == "from_" else key
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return data


def write_contract(directory: Path, data: Any, name: str | None = None) -> Path:
    """Write ``data`` as YAML named after its edge (or ``name``); return the path."""
    directory.mkdir(parents=True, exist_ok=True)
    if name is None:
        name = f"{data['from']}-to-{data['to']}.yaml"
    path = directory / name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def load_script(name: str) -> ModuleType:
    """Import ``scripts/<name>.py`` (scripts/ is not a package)."""
    path = REPO / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_script_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
