"""Contract overrides an agent writes in the project: a contract that cannot be built
(an impossible date, a 5,000-digit budget) is an undeclared edge, never a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.security._probes import Cli, no_crash, verified
from tests.test_receiver import incoming


@pytest.mark.parametrize("bad", ["notes: 2020-02-30", "x: 1"], ids=["bad-date", "huge-int"])
def test_unconstructible_contract_scalar_crashes(cli: Cli, project: Path, bad: str) -> None:
    payload = verified(cli, project)
    if bad == "x: 1":  # a token budget of 5000 digits
        bad = "context_delta:\n  token_budget_max: " + "9" * 5000
    contracts = project / ".eidolons" / "contracts"
    contracts.mkdir()
    (contracts / "atlas-to-vigil.yaml").write_text(
        'contract_version: "1.0"\nfrom: atlas\nto: vigil\nedge_origin: implicit\n'
        "performatives_allowed: [PROPOSE, INFORM]\n"
        "artifacts:\n  - kind: scout-report\n    schema_ref: x.json\n" + bad + "\n"
    )
    r = incoming(cli, payload, "vigil")
    no_crash(r)
    assert r.code == 3 and "UNDECLARED_EDGE" in r.err
    no_crash(cli("contracts", "list"))
