"""The shipped contract index is built without validating each entry on every call
(ADR 0022): this proves the fast form gives exactly the contracts validating gives, the
same as the YAML sources, that a damaged index still fails closed, and that the fast
load imports neither the validator, ``decimal``, ``importlib.resources`` nor
``dataclasses``, while a project contract is still validated (and can only narrow)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from contract_helpers import SHIPPED_DIR

from eidolons.ecl.contract import Contract, index_contract, index_entries
from eidolons.io.contracts import (
    BUILTIN_SOURCE,
    ContractError,
    ContractSet,
    load_builtin_contracts,
    load_contract_dir,
)

INDEX = SHIPPED_DIR / "index.json"


def contracts_from_index(raw: bytes, source: str, *, validate: bool) -> tuple[Contract, ...]:
    """Every contract of a shipped ``index.json`` (bytes), built at once; with ``validate``,
    each entry validated as a file would be."""
    entries = index_entries(raw, source)
    return tuple(index_contract(key, entry, validate=validate) for key, entry in entries.items())


def without_source(contract: object) -> dict[str, object]:
    return contract.to_dict()  # type: ignore[attr-defined,no-any-return]


def test_fast_form_equals_the_validated_index_and_the_yaml_sources() -> None:
    raw = INDEX.read_bytes()
    fast = contracts_from_index(raw, "index", validate=False)
    validated = contracts_from_index(raw, "index", validate=True)
    assert fast == validated  # every field, source included
    assert load_builtin_contracts() == fast
    sources = {c.key: c for c in load_contract_dir(SHIPPED_DIR)}
    assert {c.key for c in fast} == set(sources)
    for contract in fast:
        assert contract.source == BUILTIN_SOURCE
        assert without_source(contract) == without_source(sources[contract.key])
    assert len(fast) >= 60


@pytest.mark.parametrize(
    "damage",
    [
        lambda e: e["contract"].pop("artifacts"),
        lambda e: e["contract"].update(artifacts=[{"schema_ref": "x"}]),
        lambda e: e["contract"].update(context_delta={"token_budget_max": "many"}),
        lambda e: e["contract"].update(context_delta={"token_budget_max": float("inf")}),
        lambda e: e["contract"].update(to="somebody-else"),
        lambda e: e.update(contract=None),
        lambda e: e["contract"].update(
            artifacts=[e["contract"]["artifacts"][0], e["contract"]["artifacts"][0]]
        ),
    ],
)
def test_a_damaged_index_fails_closed(damage: object) -> None:
    index = json.loads(INDEX.read_text(encoding="utf-8"))
    entry = next(iter(index["contracts"].values()))
    damage(entry)  # type: ignore[operator]
    with pytest.raises(ContractError):
        contracts_from_index(json.dumps(index).encode(), "index", validate=False)


def test_fast_load_imports_no_validator(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from eidolons.io.contracts import ContractSet\n"
        f"s = ContractSet.load(Path({str(tmp_path)!r}))\n"
        "assert s.get('atlas', 'vigil') is not None\n"
        "heavy = ('decimal', 'eidolons.ecl._contract_schema', 'importlib.resources',\n"
        "         'dataclasses', 'json', 'yaml', 'inspect')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_project_contract_is_still_validated_and_only_narrows(tmp_path: Path) -> None:
    project = tmp_path / ".eidolons" / "contracts"
    project.mkdir(parents=True)
    (project / "atlas-to-vigil.yaml").write_text(
        "contract_version: '1.0'\nfrom: atlas\nto: vigil\nedge_origin: implicit\n"
        "performatives_allowed: [PROPOSE, REQUEST]\nartifacts: []\nbogus: 1\n"
    )
    with pytest.raises(ContractError, match="handoff-contract"):
        ContractSet.load(tmp_path)
    (project / "atlas-to-vigil.yaml").write_text(
        "contract_version: '1.0'\nfrom: atlas\nto: vigil\nedge_origin: implicit\n"
        "performatives_allowed: [PROPOSE, REQUEST]\n"
        "artifacts:\n- kind: scout-report\n  schema_ref: x.json\nnotes: narrower\n"
    )
    narrowed = ContractSet.load(tmp_path).get("atlas", "vigil")
    assert narrowed is not None
    assert narrowed.performatives_allowed == ("PROPOSE",)  # REQUEST is not added


def test_the_lazy_set_builds_only_the_edge_asked_and_a_damaged_one_is_unavailable() -> None:
    from eidolons.ecl.contract import ContractSetUnavailable, index_entries

    entries = index_entries(INDEX.read_bytes(), "index")
    lazy = ContractSet((), [BUILTIN_SOURCE], index=entries)
    assert lazy.get("atlas", "vigil") == ContractSet(load_builtin_contracts()).get("atlas", "vigil")
    assert lazy.get("atlas", "nobody") is None
    assert lazy.edges() == ContractSet(load_builtin_contracts()).edges()
    damaged = dict(entries)
    damaged["atlas->vigil"] = {"file": "atlas-to-vigil.yaml", "contract": None}
    unavailable = ContractSet((), [BUILTIN_SOURCE], index=damaged).checked("atlas", "vigil")
    assert isinstance(unavailable, ContractSetUnavailable)
    assert "damaged index entry 'atlas->vigil'" in unavailable.reason
