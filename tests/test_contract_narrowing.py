"""Project contracts can only narrow: intersected performatives and kinds,
the smaller budget, the union of sections and handles, the higher trust; every pass
names the contract files it used; ``required_handles`` enforced; advisory fields marked."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import yaml

from tests.conftest import Run, clean_env, emit_cmd, emit_payload

Cli = Callable[..., Run]
KEYED = clean_env(ECL_HMAC_KEY="k" * 32, EIDOLONS_MEMORY="off")

LOOSENING = {  # the 15-line file: apivr -> vigil made sha256-only with DECIDE
    "contract_version": "1.0",
    "from": "apivr",
    "to": "vigil",
    "edge_origin": "roster",
    "performatives_allowed": ["DECIDE", "PROPOSE"],
    "artifacts": [{"kind": "change-summary", "schema_ref": "x.json"}],
    "context_delta": {"token_budget_max": 100000, "required_handles": []},
    "trust_level": "low",
    "notes": "loosen it",
}


def write(project: Path, doc: Mapping[str, object]) -> Path:
    directory = project / ".eidolons" / "contracts"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{doc['from']}-to-{doc['to']}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_a_project_file_cannot_loosen_a_high_trust_edge(cli: Cli, project: Path) -> None:
    write(project, LOOSENING)
    payload = project / "cs.md"
    payload.write_text("# Change summary\n")
    emit = emit_cmd(
        payload, "--no-check", "--trust-level", "standard", sender="apivr",
        performative="DECIDE", kind="change-summary",
    )  # fmt: skip
    assert cli(*emit, env=KEYED).code == 0
    assert cli("verify-envelope", project / "cs.envelope.json", env=KEYED).code == 0
    r = cli("verify-incoming", payload, "--as", "vigil", "--json", env=KEYED)
    assert r.code == 3
    codes = {f["code"] for f in r.json()["failures"]}
    assert {"UNVERIFIED", "PERFORMATIVE_NOT_ALLOWED"} <= codes  # still HMAC-only, no DECIDE
    shown = cli("contracts", "show", "apivr", "vigil", "--json").json()
    assert shown["trust_level"] == "high" and "DECIDE" not in shown["performatives_allowed"]
    assert shown["performatives_allowed"] == ["PROPOSE"]
    assert shown["context_delta"]["token_budget_max"] == 4000


def test_narrowing_applies_and_the_pass_names_its_contract_files(cli: Cli, project: Path) -> None:
    doc = {
        **LOOSENING,
        "from": "atlas",
        "performatives_allowed": ["INFORM"],
        "trust_level": "standard",
    }
    doc["artifacts"] = [{"kind": "scout-report", "schema_ref": "x.json"}]
    path = write(project, doc)
    payload, envelope, _ = emit_payload(cli, project, "r.md", "# R\n", "--no-check")  # PROPOSE
    assert cli("verify-envelope", envelope).code == 0
    r = cli("verify-incoming", payload, "--as", "vigil", "--no-memory")
    assert r.code == 3
    assert (
        r.err.splitlines()[0]
        == "[vigil-verify-incoming] REFUSE: PERFORMATIVE_NOT_ALLOWED from atlas"
    )
    payload, envelope, _ = emit_payload(cli, project, "i.md", "# I\n", performative="INFORM")
    assert cli("verify-envelope", envelope).code == 0
    r = cli("verify-incoming", payload, "--as", "vigil", "--no-memory")
    assert r.code == 0, r.err
    assert r.err.splitlines()[0].endswith(f"; contract builtin + {path})")
    doc2 = cli("verify-incoming", payload, "--as", "vigil", "--no-memory", "--json").json()
    assert doc2["contract_sources"] == ["builtin", str(path)]


def test_required_handles_are_enforced(cli: Cli, project: Path) -> None:
    body = "# S\n\n## Decision target\n## Findings\n## Gaps\n## Scope\n"
    payload, envelope, _ = emit_payload(
        cli, project, "s.md", body, "--no-check", to="spectra@4.11.0"
    )
    assert cli("verify-envelope", envelope).code == 0
    r = cli("verify-incoming", payload, "--as", "spectra", "--no-memory")
    lines = r.err.splitlines()
    assert r.code == 3 and lines[0] == "[spectra-verify-incoming] REFUSE: SCHEMA_INVALID from atlas"
    assert "input_handles must name mission.md" in lines[1]
    payload, envelope, _ = emit_payload(
        cli, project, "t.md", body, "--input-handle", "mission.md", to="spectra@4.11.0"
    )
    assert cli("verify-envelope", envelope).code == 0
    assert cli("verify-incoming", payload, "--as", "spectra", "--no-memory").code == 0


def test_contracts_show_marks_what_is_advisory(cli: Cli, project: Path) -> None:
    r = cli("contracts", "show", "atlas", "spectra")
    assert r.code == 0
    line = next(x for x in r.out.splitlines() if "evidence_anchor_required" in x)
    assert "advisory" in line
    assert "advisory" in next(x for x in r.out.splitlines() if "schema_ref" in x)
    assert "advisory" not in next(x for x in r.out.splitlines() if "required_sections" in x)
    doc = cli("contracts", "show", "atlas", "spectra", "--json").json()
    assert "artifacts[].evidence_anchor_required" in doc["advisory"]
