"""Loading contract files and sets: every malformed input is a ContractError naming the file,
and a set holding any broken file never loads (fail closed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from contract_helpers import valid_contract, write_contract

from eidolons.io.contracts import (
    MAX_CONTRACT_BYTES,
    Contract,
    ContractError,
    ContractSet,
    load_contract_dir,
    load_contract_file,
    parse_contract_bytes,
    project_contract_dir,
)

GOOD_YAML = yaml.safe_dump(valid_contract(), sort_keys=False)


def _edit(old: str, new: str, text: str = GOOD_YAML) -> str:
    """``text`` with ``old`` replaced; fails loudly if ``old`` is absent (no silent no-op)."""
    assert old in text, old
    return text.replace(old, new)


# name -> (file name, file text, words the problem must contain)
INVALID_FILES: dict[str, tuple[str, str, str]] = {
    "implicit without notes": (
        "atlas-to-vigil.yaml",
        yaml.safe_dump(valid_contract(edge_origin="implicit", notes=None)),
        "notes",
    ),
    "bad performative": (
        "atlas-to-vigil.yaml",
        yaml.safe_dump(valid_contract(performatives_allowed=["COMMIT"])),
        "performatives_allowed",
    ),
    "empty performatives": (
        "atlas-to-vigil.yaml",
        yaml.safe_dump(valid_contract(performatives_allowed=[])),
        "performatives_allowed",
    ),
    "extra field": (
        "atlas-to-vigil.yaml",
        yaml.safe_dump(valid_contract(allow_all=True)),
        "must not contain",
    ),
    "bad slug": (
        "Atlas-to-vigil.yaml",
        yaml.safe_dump(valid_contract(from_="Atlas")),
        "contract.from",
    ),
    "file name does not match content": (
        "spectra-to-vigil.yaml",
        GOOD_YAML,
        "file name must be 'atlas-to-vigil.yaml'",
    ),
    "duplicate top-level key": (
        "atlas-to-vigil.yaml",
        GOOD_YAML + "performatives_allowed: [PROPOSE, INFORM, DELEGATE]\n",
        "duplicate key 'performatives_allowed'",
    ),
    "duplicate nested key": (
        "atlas-to-vigil.yaml",
        _edit("  schema_ref:", "  kind: spec\n  schema_ref:"),
        "duplicate key 'kind'",
    ),
    "malformed YAML": ("atlas-to-vigil.yaml", "from: atlas\nto: [vigil\n", "invalid YAML"),
    "tab indentation": ("atlas-to-vigil.yaml", "from: atlas\n\tto: vigil\n", "invalid YAML"),
    "top level is a list": ("atlas-to-vigil.yaml", "- from: atlas\n", "must be a mapping"),
    "top level is a scalar": ("atlas-to-vigil.yaml", "atlas\n", "must be a mapping"),
    "empty file": ("atlas-to-vigil.yaml", "", "empty document"),
    "two documents": ("atlas-to-vigil.yaml", GOOD_YAML + "---\n" + GOOD_YAML, "invalid YAML"),
    "alias": (
        "atlas-to-vigil.yaml",
        _edit("performatives_allowed:\n", "performatives_allowed: &p\n") + "x_copy: *p\n",
        "aliases",
    ),
    "merge key": (
        "atlas-to-vigil.yaml",
        _edit("context_delta:\n", "context_delta:\n  <<: {token_budget_max: 5}\n"),
        "merge keys",
    ),
    "non-string key": ("atlas-to-vigil.yaml", GOOD_YAML + "1: one\n", "not a string"),
    "python tag": (
        "atlas-to-vigil.yaml",
        GOOD_YAML + "x: !!python/object/apply:os.system ['true']\n",
        "invalid YAML",
    ),
    "repeated artifact kind": (
        "atlas-to-vigil.yaml",
        yaml.safe_dump(
            valid_contract(
                artifacts=[
                    {"kind": "spec", "schema_ref": "a.json"},
                    {"kind": "spec", "schema_ref": "b.json"},
                ]
            )
        ),
        "artifact kind listed more than once: spec",
    ),
    "date where a string is expected": (
        "atlas-to-vigil.yaml",
        _edit("notes: test contract", "notes: 2026-07-11"),
        "contract.notes must be string",
    ),
}


@pytest.mark.parametrize("name", sorted(INVALID_FILES))
def test_invalid_contract_file_raises_naming_the_file(tmp_path: Path, name: str) -> None:
    file_name, text, words = INVALID_FILES[name]
    path = tmp_path / file_name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ContractError) as info:
        load_contract_file(path)
    assert str(path) in str(info.value)
    assert info.value.source == str(path)
    assert words in info.value.problem
    assert info.value.code == "CONTRACT_INVALID"


@pytest.mark.parametrize("name", sorted(INVALID_FILES))
def test_a_set_with_any_invalid_file_does_not_load(tmp_path: Path, name: str) -> None:
    file_name, text, _ = INVALID_FILES[name]
    directory = tmp_path / "contracts"
    write_contract(directory, valid_contract(from_="kupo"))  # a valid neighbour
    (directory / file_name).write_text(text, encoding="utf-8")
    with pytest.raises(ContractError, match=file_name):
        ContractSet.load(None, [directory])


def test_yaml_error_reports_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "atlas-to-vigil.yaml"
    path.write_text(GOOD_YAML + "notes: again\n", encoding="utf-8")
    with pytest.raises(ContractError) as info:
        load_contract_file(path)
    line_count = GOOD_YAML.count("\n") + 1
    assert f"line {line_count}, column 1" in info.value.problem


def test_non_utf8_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "atlas-to-vigil.yaml"
    path.write_bytes(_edit("test contract", "caf\xe9").encode("latin-1"))
    with pytest.raises(ContractError, match="not valid UTF-8"):
        load_contract_file(path)


def test_oversized_file_is_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "atlas-to-vigil.yaml"
    path.write_text(GOOD_YAML + "#" * MAX_CONTRACT_BYTES + "\n", encoding="utf-8")
    with pytest.raises(ContractError, match="larger than"):
        load_contract_file(path)


def test_deeply_nested_yaml_is_an_error_not_a_crash() -> None:
    data = b"x: " + b"[" * 5000 + b"]" * 5000 + b"\n"
    with pytest.raises(ContractError):
        parse_contract_bytes(data, "deep.yaml")


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks")
def test_symlinked_contract_file_is_refused(tmp_path: Path) -> None:
    real = write_contract(tmp_path / "elsewhere", valid_contract())
    directory = tmp_path / "contracts"
    directory.mkdir()
    (directory / real.name).symlink_to(real)
    with pytest.raises(ContractError, match="symbolic link"):
        ContractSet.load(None, [directory])
    with pytest.raises(ContractError, match="symbolic link"):
        load_contract_file(directory / real.name)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_fifo_named_like_a_contract_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "atlas-to-vigil.yaml")
    with pytest.raises(ContractError, match="not a regular file"):
        load_contract_dir(tmp_path)
    with pytest.raises(ContractError, match="not a regular file"):
        load_contract_file(tmp_path / "atlas-to-vigil.yaml")


def test_directory_named_like_a_contract_is_refused(tmp_path: Path) -> None:
    (tmp_path / "atlas-to-vigil.yaml").mkdir()
    with pytest.raises(ContractError, match="not a regular file"):
        load_contract_dir(tmp_path)


@pytest.mark.parametrize("name", ["atlas-to-vigil.yml", "atlas-to-vigil.YAML", "x.Yml"])
def test_other_yaml_extensions_are_errors_not_silently_ignored(tmp_path: Path, name: str) -> None:
    write_contract(tmp_path, valid_contract(), name=name)
    with pytest.raises(ContractError, match=r"\.yaml"):
        load_contract_dir(tmp_path)


def test_hidden_and_non_yaml_files_are_ignored(tmp_path: Path) -> None:
    write_contract(tmp_path, valid_contract())
    (tmp_path / "README.md").write_text("# not a contract\n", encoding="utf-8")
    (tmp_path / ".atlas-to-vigil.yaml.swp").write_bytes(b"\0\1")
    (tmp_path / ".hidden-to-vigil.yaml").write_text("not: [valid\n", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    write_contract(tmp_path / "sub", valid_contract(from_="kupo"))  # not recursed into
    contracts = load_contract_dir(tmp_path)
    assert [c.key for c in contracts] == [("atlas", "vigil")]


def test_missing_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ContractError, match="does not exist") as info:
        ContractSet.load(None, [tmp_path / "nope"])
    assert str(tmp_path / "nope") in str(info.value)


def test_file_given_as_directory_is_an_error(tmp_path: Path) -> None:
    path = write_contract(tmp_path, valid_contract())
    with pytest.raises(ContractError, match="not a directory"):
        load_contract_dir(path)


def test_missing_project_directory_is_fine(tmp_path: Path) -> None:
    loaded = ContractSet.load(tmp_path)
    assert len(loaded) == len(ContractSet.builtin())
    assert loaded.sources == ("builtin",)


def test_project_contracts_path_that_is_a_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / ".eidolons").mkdir()
    (tmp_path / ".eidolons" / "contracts").write_text("", encoding="utf-8")
    with pytest.raises(ContractError, match="not a directory"):
        ContractSet.load(tmp_path)


# --------------------------------------------------------------------------- precedence


def test_project_directory_narrows_builtin(tmp_path: Path) -> None:
    project = project_contract_dir(tmp_path)
    doc = valid_contract(
        from_="forge", to="gilgamesh", performatives_allowed=["INFORM", "DELEGATE"]
    )
    doc["artifacts"][0]["kind"] = "reasoning-report"
    doc["artifacts"][0]["required_sections"] = ["rollback_plan"]
    path = write_contract(project, doc)
    loaded = ContractSet.load(tmp_path)
    contract = loaded.get("forge", "gilgamesh")
    assert contract is not None
    assert contract.performatives_allowed == ("INFORM",)  # DELEGATE is not added
    assert contract.token_budget_max == 100  # the smaller of 3000 and 100
    assert contract.artifact_for_kind("reasoning-report").required_sections[-1] == "rollback_plan"  # type: ignore[union-attr]
    assert contract.source == f"builtin + {path}"
    assert contract.sources == ("builtin", str(path))
    assert loaded.sources == ("builtin", str(project))
    # Every other edge is still the builtin one.
    other = loaded.get("orchestrator", "gilgamesh")
    assert other is not None and other.source == "builtin"
    assert len(loaded) == len(ContractSet.builtin())


def test_contracts_option_overrides_project_and_later_dirs_override_earlier(
    tmp_path: Path,
) -> None:
    wide = ["PROPOSE", "INFORM", "DECIDE"]
    write_contract(project_contract_dir(tmp_path), valid_contract(performatives_allowed=wide))
    first = tmp_path / "first"
    second = tmp_path / "second"
    write_contract(first, valid_contract(performatives_allowed=["INFORM", "DECIDE"]))
    path = write_contract(second, valid_contract(performatives_allowed=["RESUME", "DECIDE"]))
    write_contract(first, valid_contract(from_="newcomer", to="vigil"))
    write_contract(second, valid_contract(from_="newcomer", to="vigil", trust_level="high"))
    loaded = ContractSet.load(tmp_path, [first, second])
    contract = loaded.get("atlas", "vigil")
    assert contract is not None
    assert contract.performatives_allowed == ()  # nothing left: every hand-off refused
    assert contract.sources[-1] == str(path) and len(contract.sources) == 4
    added = loaded.get("newcomer", "vigil")  # a new edge, then narrowed by a later source
    assert added is not None and added.sources[0] == str(first / "newcomer-to-vigil.yaml")
    assert added.trust_level == "high"
    assert len(loaded) == len(ContractSet.builtin()) + 1
    only_first = ContractSet.load(tmp_path, [first])
    assert only_first.get("atlas", "vigil").performatives_allowed == ("INFORM",)  # type: ignore[union-attr]
    only_project = ContractSet.load(tmp_path)
    assert only_project.get("atlas", "vigil").performatives_allowed == ("PROPOSE", "INFORM")  # type: ignore[union-attr]


def test_broken_override_never_falls_back_to_the_builtin_contract(tmp_path: Path) -> None:
    # The override is meant to restrict forge -> vigil; if it is broken, the permissive
    # builtin must not silently stay in force: the whole load fails.
    project = project_contract_dir(tmp_path)
    broken = valid_contract(from_="forge", performatives_allowed=["INFORM"], trust_level="max")
    path = write_contract(project, broken)
    with pytest.raises(ContractError) as info:
        ContractSet.load(tmp_path)
    assert info.value.source == str(path)
    assert "trust_level" in info.value.problem


def test_a_project_file_cannot_widen_an_edge_or_lower_its_trust(tmp_path: Path) -> None:
    """The issue's 15-line file: the HMAC-only apivr -> vigil edge made a sha256 edge
    that also allows DECIDE. Intersected, the smaller budget, the higher trust."""
    data = valid_contract(
        from_="apivr",
        to="vigil",
        performatives_allowed=["DECIDE", "ESCALATE"],
        context_delta={"token_budget_max": 999999, "required_handles": ["mission.md"]},
        trust_level="low",
    )
    data["artifacts"][0]["kind"] = "repair-failed-report"
    data["artifacts"].append({"kind": "prompt", "schema_ref": "x.json"})
    write_contract(tmp_path, data)
    contract = ContractSet.load(None, [tmp_path]).get("apivr", "vigil")
    assert contract is not None
    assert contract.performatives_allowed == ("ESCALATE",)
    assert contract.kinds == ("repair-failed-report",)
    assert contract.token_budget_max == 4000
    assert contract.trust_level == "high"
    assert contract.required_handles == ("mission.md",)  # the union: narrower still


# --------------------------------------------------------------------------- model


def test_contract_helpers_and_lookup() -> None:
    loaded = ContractSet.builtin()
    contract = loaded.get("apivr", "vigil")
    assert contract is not None
    assert contract.allows_performative("ESCALATE")
    assert not contract.allows_performative("escalate")
    assert not contract.allows_performative("DECIDE")
    artifact = contract.artifact_for_kind("change-summary")
    assert artifact is not None and artifact.kind == "change-summary"
    assert contract.artifact_for_kind("prompt") is None
    assert ("apivr", "vigil") in loaded
    assert loaded.get("vigil", "apivr") is not None  # direction matters
    assert loaded.get("apivr", "nobody") is None
    edges = [c.key for c in loaded.edges()]
    assert edges == sorted(edges)
    assert [c.key for c in loaded] == edges
    inbound = loaded.inbound("gilgamesh")
    assert [c.from_ for c in inbound] == ["forge", "human", "orchestrator"]
    assert loaded.inbound("nobody") == []


def test_contract_is_immutable() -> None:
    contract = ContractSet.builtin().get("forge", "gilgamesh")
    assert contract is not None
    with pytest.raises(AttributeError):
        contract.performatives_allowed = ("DELEGATE",)


def test_from_dict_to_dict_normalises_defaults() -> None:
    data: dict[str, Any] = valid_contract(context_delta=None, trust_level=None, notes=None)
    data["artifacts"] = [{"kind": "spec", "schema_ref": "s.json"}]
    contract = Contract.from_dict(data, "mem")
    assert contract.source == "mem"
    assert contract.to_dict() == {
        "contract_version": "1.0",
        "from": "atlas",
        "to": "vigil",
        "edge_origin": "roster",
        "performatives_allowed": ["PROPOSE"],
        "artifacts": [
            {
                "kind": "spec",
                "schema_ref": "s.json",
                "required_sections": [],
                "evidence_anchor_required": False,
            }
        ],
    }
    budget = Contract.from_dict(valid_contract(context_delta={"token_budget_max": 4000.0}), "m")
    assert budget.token_budget_max == 4000 and isinstance(budget.token_budget_max, int)


def test_from_dict_error_names_the_source_and_path() -> None:
    with pytest.raises(ContractError) as info:
        Contract.from_dict(valid_contract(performatives_allowed=["INFORM", "NOPE"]), "here.yaml")
    assert str(info.value).startswith("here.yaml: does not match handoff-contract.v1: ")
    assert "contract.performatives_allowed[1]" in str(info.value)


def test_loading_builtin_set_imports_neither_yaml_nor_jsonschema() -> None:
    code = (
        "import sys\n"
        "from eidolons.io.contracts import ContractSet\n"
        "s = ContractSet.load()\n"
        "assert len(s) == 65\n"
        "print(sorted(m for m in ('yaml', 'jsonschema', 'fastjsonschema') if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"
