"""The generated contract validator is in sync with the schema and agrees with jsonschema.

``eidolons.ecl._contract_schema`` is what runs; ``jsonschema`` (a reference implementation,
dev-only here) is the judge. Both see the same table of documents and every shipped contract.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from contract_helpers import REPO, SCHEMA_DIR, SHIPPED_DIR, load_script, valid_contract
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from eidolons.ecl._contract_schema import JsonSchemaValueException, validate_contract
from eidolons.io.contracts import load_contract_dir


def _reference_validator() -> Draft202012Validator:
    schemas = [json.loads(p.read_text(encoding="utf-8")) for p in SCHEMA_DIR.glob("*.json")]
    registry: Registry[Any] = Registry().with_resources(
        (doc["$id"], Resource.from_contents(doc)) for doc in schemas
    )
    contract_schema = json.loads((SCHEMA_DIR / "handoff-contract.v1.json").read_text("utf-8"))
    return Draft202012Validator(contract_schema, registry=registry)


REFERENCE = _reference_validator()


def _generated_accepts(data: Any) -> bool:
    try:
        validate_contract(data)
    except JsonSchemaValueException:
        return False
    return True


def _artifact(**changes: Any) -> list[dict[str, Any]]:
    artifact: dict[str, Any] = {"kind": "scout-report", "schema_ref": "x.json"}
    artifact.update(changes)
    return [artifact]


VALID_CASES: dict[str, Any] = {
    "full": valid_contract(),
    "minimal": valid_contract(context_delta=None, trust_level=None, notes=None),
    "emitted-request origin": valid_contract(edge_origin="emitted-request"),
    "composition origin": valid_contract(edge_origin="composition"),
    "implicit with notes": valid_contract(edge_origin="implicit", notes="why"),
    "version with patch": valid_contract(contract_version="1.0.3"),
    "float budget that is an integer": valid_contract(context_delta={"token_budget_max": 4000.0}),
    "zero budget": valid_contract(context_delta={"token_budget_max": 0}),
    "empty context_delta": valid_contract(context_delta={}),
    "reserved senders": valid_contract(from_="orchestrator", to="gilgamesh"),
    "all ten performatives": valid_contract(
        performatives_allowed="REQUEST INFORM PROPOSE CRITIQUE DECIDE DELEGATE ACKNOWLEDGE "
        "ESCALATE RESUME REFUSE".split()
    ),
    "two artifacts": valid_contract(
        artifacts=[*_artifact(), {"kind": "spec", "schema_ref": "s.json"}]
    ),
    "artifact without optional fields": valid_contract(artifacts=_artifact()),
}

INVALID_CASES: dict[str, Any] = {
    "implicit without notes": valid_contract(edge_origin="implicit", notes=None),
    "implicit with empty notes": valid_contract(edge_origin="implicit", notes=""),
    "implicit with blank notes": valid_contract(edge_origin="implicit", notes="  \n "),
    "unknown performative": valid_contract(performatives_allowed=["QUERY"]),
    "lowercase performative": valid_contract(performatives_allowed=["inform"]),
    "empty performatives": valid_contract(performatives_allowed=[]),
    "repeated performative": valid_contract(performatives_allowed=["INFORM", "INFORM"]),
    "performatives not a list": valid_contract(performatives_allowed="INFORM"),
    "extra top-level field": valid_contract(default_ise={"assertion_grade": "validated"}),
    "extra artifact field": valid_contract(artifacts=_artifact(schema_version="1.0")),
    "uppercase slug": valid_contract(from_="Atlas"),
    "slug starting with a digit": valid_contract(to="9vigil"),
    "slug with a space": valid_contract(to="vi gil"),
    "slug with an arrow": valid_contract(to="→vigil"),
    "empty slug": valid_contract(from_=""),
    "missing from": valid_contract(from_=None),
    "missing artifacts": valid_contract(artifacts=None),
    "empty artifacts": valid_contract(artifacts=[]),
    "artifact without schema_ref": valid_contract(artifacts=[{"kind": "spec"}]),
    "artifact with bad kind": valid_contract(artifacts=_artifact(kind="Scout_Report")),
    "contract_version 2.0": valid_contract(contract_version="2.0"),
    "contract_version as a number": valid_contract(contract_version=1.0),
    "unknown edge_origin": valid_contract(edge_origin="upstream"),
    "negative budget": valid_contract(context_delta={"token_budget_max": -1}),
    "budget as a string": valid_contract(context_delta={"token_budget_max": "4000"}),
    "budget as a boolean": valid_contract(context_delta={"token_budget_max": True}),
    "fractional budget": valid_contract(context_delta={"token_budget_max": 4000.5}),
    "context_delta extra key": valid_contract(context_delta={"token_budget": 1}),
    "required_handles not a list": valid_contract(context_delta={"required_handles": "a"}),
    "required_sections not a list": valid_contract(artifacts=_artifact(required_sections="a")),
    "required_sections item not a string": valid_contract(
        artifacts=_artifact(required_sections=[1])
    ),
    "evidence flag as a string": valid_contract(
        artifacts=_artifact(evidence_anchor_required="yes")
    ),
    "unknown trust level": valid_contract(trust_level="medium"),
    "notes not a string": valid_contract(notes=123),
    "top level is a list": [valid_contract()],
    "top level is a string": "contract",
    "top level is null": None,
}


@pytest.mark.parametrize("name", sorted(VALID_CASES))
def test_valid_documents_are_accepted_by_both(name: str) -> None:
    data = VALID_CASES[name]
    assert REFERENCE.is_valid(data), list(REFERENCE.iter_errors(data))
    assert _generated_accepts(data)


@pytest.mark.parametrize("name", sorted(INVALID_CASES))
def test_invalid_documents_are_rejected_by_both(name: str) -> None:
    data = INVALID_CASES[name]
    assert not REFERENCE.is_valid(data)
    assert not _generated_accepts(data)


def test_every_shipped_contract_is_accepted_by_both() -> None:
    contracts = load_contract_dir(SHIPPED_DIR)
    assert len(contracts) == 65
    for contract in contracts:
        data = contract.to_dict()
        assert REFERENCE.is_valid(data), contract.key
        assert _generated_accepts(data), contract.key


def test_pinned_divergence_on_a_trailing_newline() -> None:
    """JSON Schema patterns are ECMA-262, where ``$`` matches only at the very end.

    fastjsonschema compiles ``$`` to ``\\Z`` (correct); jsonschema uses Python's ``$``,
    which also matches before a final newline. The runtime validator is the strict one,
    so ``"vigil\\n"`` is refused where it matters. If either library changes, look again.
    """
    data = valid_contract(to="vigil\n")
    assert REFERENCE.is_valid(data)
    assert not _generated_accepts(data)


def test_validation_does_not_modify_the_document() -> None:
    data = valid_contract(artifacts=_artifact())
    before = json.dumps(data, sort_keys=True)
    validate_contract(data)
    assert json.dumps(data, sort_keys=True) == before  # no schema defaults written in


def test_generated_module_is_in_sync_with_the_schema() -> None:
    pytest.importorskip("fastjsonschema")
    script = load_script("gen_contract_validator")
    committed = (REPO / "src" / "eidolons" / "ecl" / "_contract_schema.py").read_text(
        encoding="utf-8"
    )
    assert script.generate() == committed, (
        "src/eidolons/ecl/_contract_schema.py is stale: run scripts/gen_contract_validator.py "
        "(with the pinned fastjsonschema version)"
    )


def test_generated_module_has_no_runtime_dependency() -> None:
    text = (REPO / "src" / "eidolons" / "ecl" / "_contract_schema.py").read_text(encoding="utf-8")
    assert text.startswith("# GENERATED FILE")
    assert "scripts/gen_contract_validator.py" in text.splitlines()[1]
    imports = [
        line.strip()
        for line in text.splitlines()
        if line.startswith(("import ", "from ")) and "__future__" not in line
    ]
    assert imports == ["from decimal import Decimal", "import re", "from typing import Any"]
