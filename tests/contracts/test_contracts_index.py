"""``data/contracts/index.json`` (what the gates load) is in sync with the YAML files."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from contract_helpers import SHIPPED_DIR, load_script

from eidolons.io.contracts import INDEX_FORMAT, ContractSet

INDEX = SHIPPED_DIR / "index.json"


def test_index_is_what_the_build_script_writes_for_the_yaml_files() -> None:
    build = load_script("build_contracts")
    assert build.build_index(SHIPPED_DIR) == INDEX.read_text(encoding="utf-8"), (
        "data/contracts/index.json is stale: run scripts/build_contracts.py"
    )


def test_index_records_every_yaml_file_and_its_sha256() -> None:
    index = json.loads(INDEX.read_text(encoding="utf-8"))
    assert index["format"] == INDEX_FORMAT
    files = {entry["file"]: entry["sha256"] for entry in index["contracts"].values()}
    on_disk = {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in SHIPPED_DIR.glob("*.yaml")
    }
    assert files == on_disk


def edited_copy(tmp_path: Path, old: str, new: str) -> Path:
    """A copy of the shipped contracts with ``old`` replaced by ``new`` in forge-to-gilgamesh."""
    copy = tmp_path / "contracts"
    shutil.copytree(SHIPPED_DIR, copy)
    path = copy / "forge-to-gilgamesh.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    return copy


def test_an_edited_yaml_file_makes_the_index_stale(tmp_path: Path) -> None:
    copy = edited_copy(tmp_path, "  - INFORM\n", "  - INFORM\n  - DELEGATE\n")
    build = load_script("build_contracts")
    assert build.build_index(copy) != INDEX.read_text(encoding="utf-8")


def test_a_non_canonical_yaml_file_is_refused_by_the_build(tmp_path: Path) -> None:
    copy = edited_copy(tmp_path, "    evidence_anchor_required: false\n", "")
    build = load_script("build_contracts")
    with pytest.raises(SystemExit, match="canonical"):
        build.build_index(copy)


def test_builtin_set_comes_from_the_index() -> None:
    index = json.loads(INDEX.read_text(encoding="utf-8"))
    builtin = ContractSet.builtin()
    assert sorted(index["contracts"]) == [f"{c.from_}->{c.to}" for c in builtin.edges()]
    for contract in builtin.edges():
        entry = index["contracts"][f"{contract.from_}->{contract.to}"]
        assert entry["contract"] == contract.to_dict()
        assert entry["file"] == contract.file_name
