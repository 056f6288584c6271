"""Memory around the receiver gate: recall before the verdict, ingest only after a pass.

Every refusal code is produced by a real scenario and the store is checked to hold
nothing afterwards; memory failures never change the verdict.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from eidolons.gates.receiver import REFUSAL_CODES
from tests.conftest import Run, clean_env, emit_payload
from tests.test_receiver import handoff, markdown_for

Cli = Callable[..., Run]
Scenario = Callable[[Cli, Path], tuple[Path, str]]


def _emit_only(cli: Cli, project: Path, body: str = "# r\n") -> Path:
    return emit_payload(cli, project, "p.md", body, objective="install.sh race report")[0]


def integrity_mismatch(cli: Cli, project: Path) -> tuple[Path, str]:
    payload = handoff(cli, project, "atlas", "vigil", "PROPOSE", "scout-report")
    payload.write_text("tampered")
    return payload, "vigil"


def unverified(cli: Cli, project: Path) -> tuple[Path, str]:
    return _emit_only(cli, project), "vigil"


def schema_invalid(cli: Cli, project: Path) -> tuple[Path, str]:
    payload = handoff(cli, project, "atlas", "vigil", "PROPOSE", "scout-report")
    env_path = payload.with_suffix(".envelope.json")
    doc = json.loads(env_path.read_text())
    doc["performative"] = "SHOUT"
    env_path.write_text(json.dumps(doc))
    return payload, "vigil"


def undeclared_edge(cli: Cli, project: Path) -> tuple[Path, str]:
    return handoff(cli, project, "ramza", "vigil", "INFORM", "spec"), "vigil"


def performative_not_allowed(cli: Cli, project: Path) -> tuple[Path, str]:
    return handoff(cli, project, "forge", "gilgamesh", "DELEGATE", "reasoning-report"), "gilgamesh"


def artifact_kind_not_allowed(cli: Cli, project: Path) -> tuple[Path, str]:
    return handoff(cli, project, "atlas", "vigil", "INFORM", "spec"), "vigil"


def context_over_budget(cli: Cli, project: Path) -> tuple[Path, str]:
    return handoff(
        cli,
        project,
        "forge",
        "vigil",
        "INFORM",
        "reasoning-report",
        "--tokens-used",
        "3500",
        "--token-budget",
        "4000",
    ), "vigil"


def missing_required_section(cli: Cli, project: Path) -> tuple[Path, str]:
    return handoff(
        cli, project, "forge", "vigil", "INFORM", "reasoning-report", body="# only a title\n"
    ), "vigil"


SCENARIOS: dict[str, Scenario] = {
    "INTEGRITY_MISMATCH": integrity_mismatch,
    "UNVERIFIED": unverified,
    "SCHEMA_INVALID": schema_invalid,
    "UNDECLARED_EDGE": undeclared_edge,
    "PERFORMATIVE_NOT_ALLOWED": performative_not_allowed,
    "ARTIFACT_KIND_NOT_ALLOWED": artifact_kind_not_allowed,
    "CONTEXT_OVER_BUDGET": context_over_budget,
    "MISSING_REQUIRED_SECTION": missing_required_section,
}


def crystals(cli: Cli) -> int:
    r = cli("memory", "stats", "--json")
    assert r.code in (0, 4), r.err
    return int(r.json().get("crystals", 0))


def test_every_refusal_code_has_a_scenario() -> None:
    assert set(SCENARIOS) == set(REFUSAL_CODES)


@pytest.mark.parametrize("code", sorted(SCENARIOS))
def test_refused_hand_off_is_never_ingested(cli: Cli, project: Path, code: str) -> None:
    payload, receiver = SCENARIOS[code](cli, project)
    r = cli("verify-incoming", payload, "--as", receiver, "--json")
    assert r.code == 3
    doc = r.json()
    assert doc["failure_code"] == code
    assert "ingest" not in doc
    assert "recall" in doc  # recall ran before the verdict, whatever the verdict
    assert crystals(cli) == 0


def test_skipped_artifact_is_never_ingested(cli: Cli, project: Path) -> None:
    (project / "plain.md").write_text("no envelope")
    assert cli("verify-incoming", project / "plain.md", "--as", "vigil").code == 0
    assert crystals(cli) == 0


def test_pass_is_ingested_once_and_recalled_later(cli: Cli, project: Path) -> None:
    first = handoff(cli, project, "atlas", "vigil", "PROPOSE", "scout-report", name="a/first.md")
    r = cli("verify-incoming", first, "--as", "vigil", "--json")
    assert r.code == 0
    doc = r.json()
    assert doc["memory"] == "local"
    assert doc["ingest"]["status"] == "ingested" and doc["ingest"]["backend"] == "local"
    assert doc["recall"]["records"] == []  # nothing known before the first hand-off
    assert crystals(cli) == 1
    assert cli("verify-incoming", first, "--as", "vigil").code == 0  # again: idempotent
    assert crystals(cli) == 1
    second = handoff(cli, project, "atlas", "vigil", "INFORM", "scout-report", name="a/second.md")
    doc = cli("verify-incoming", second, "--as", "vigil", "--json").json()
    recalled = doc["recall"]["records"]
    assert len(recalled) == 1 and len(recalled) <= 5
    r = cli("verify-incoming", second, "--as", "vigil", "--show-recall")
    assert r.code == 0 and "recall (local): 2 records" in r.err


def test_no_memory_neither_recalls_nor_ingests(cli: Cli, project: Path) -> None:
    payload = handoff(cli, project, "atlas", "vigil", "PROPOSE", "scout-report")
    doc = cli("verify-incoming", payload, "--as", "vigil", "--no-memory", "--json").json()
    assert doc["status"] == "pass" and "recall" not in doc and "ingest" not in doc
    assert not (project / ".eidolons/memory").exists()


def test_memory_off_by_environment(cli: Cli, project: Path) -> None:
    payload = handoff(cli, project, "atlas", "vigil", "PROPOSE", "scout-report")
    r = cli(
        "verify-incoming", payload, "--as", "vigil", "--json", env=clean_env(EIDOLONS_MEMORY="off")
    )
    assert r.json()["status"] == "pass" and r.json()["memory"] == "off"
    assert not (project / ".eidolons/memory").exists()


def test_unreachable_server_never_changes_the_verdict(cli: Cli, project: Path) -> None:
    env = clean_env(
        EIDOLONS_MEMORY="mcp",
        EIDOLONS_MEMORY_COMMAND=f"{sys.executable} -c 'raise SystemExit(1)'",
        EIDOLONS_MEMORY_FIRST_TIMEOUT="10",
    )
    good = handoff(cli, project, "atlas", "vigil", "PROPOSE", "scout-report", name="g.md")
    r = cli("verify-incoming", good, "--as", "vigil", "--json", env=env)
    assert r.code == 0 and r.json()["status"] == "pass"
    assert r.json()["recall"]["status"] == "skipped"
    bad = handoff(cli, project, "atlas", "vigil", "PROPOSE", "scout-report", name="b.md")
    bad.write_text("tampered")
    r = cli("verify-incoming", bad, "--as", "vigil", env=env)
    assert r.code == 3 and r.err == (
        "[vigil-verify-incoming] REFUSE: INTEGRITY_MISMATCH from atlas\n"
        "[vigil-verify-incoming] reason: [tamper] payload SHA-256 does not match integrity tag\n"
    )


def test_broken_memory_configuration_never_changes_the_verdict(cli: Cli, project: Path) -> None:
    env = clean_env(EIDOLONS_MEMORY="sometimes")
    good = handoff(cli, project, "atlas", "vigil", "PROPOSE", "scout-report", name="g.md")
    r = cli("verify-incoming", good, "--as", "vigil", "--json", env=env)
    assert r.code == 0 and r.json()["memory"].startswith("skipped")
    bad = handoff(cli, project, "atlas", "vigil", "PROPOSE", "scout-report", name="b.md")
    bad.write_text("tampered")
    assert cli("verify-incoming", bad, "--as", "vigil", env=env).code == 3


def test_unwritable_store_never_blocks_a_pass(cli: Cli, project: Path) -> None:
    (project / ".eidolons/memory").write_text("a file where the store directory should be")
    payload = handoff(cli, project, "atlas", "vigil", "PROPOSE", "scout-report")
    r = cli("verify-incoming", payload, "--as", "vigil", "--json", "--print-payload")
    assert r.code == 2  # --json with --print-payload is a usage error
    r = cli("verify-incoming", payload, "--as", "vigil", "--print-payload")
    assert r.code == 0 and r.out == markdown_for("atlas", "vigil", "scout-report")
    doc = cli("verify-incoming", payload, "--as", "vigil", "--json").json()
    assert doc["status"] == "pass"
    assert doc["ingest"]["status"] == "skipped" and doc["ingest"]["backend"] == "unavailable"


def test_a_hand_off_that_passed_both_gates_is_stored_validated_once(
    cli: Cli, project: Path
) -> None:
    import sqlite3

    first = handoff(cli, project, "atlas", "vigil", "PROPOSE", "scout-report")
    doc = cli("verify-incoming", first, "--as", "vigil", "--json").json()
    assert (doc["ingest"]["trust_tier"], doc["ingest"]["validation_state"]) == ("T1", "validated")
    assert doc["ingest"]["commit_status"] == "committed"
    old_id = json.loads(first.with_suffix(".envelope.json").read_text())["message_id"]
    # re-emitted: same bytes, sender, receiver, act, kind, objective; a new message id
    again = handoff(cli, project, "atlas", "vigil", "PROPOSE", "scout-report", "--force")
    assert again == first
    new_id = json.loads(first.with_suffix(".envelope.json").read_text())["message_id"]
    assert new_id != old_id
    doc2 = cli("verify-incoming", first, "--as", "vigil", "--json").json()
    assert doc2["ingest"]["commit_status"] == "merged"
    assert doc2["ingest"]["id"] == doc["ingest"]["id"]
    with sqlite3.connect(project / ".eidolons" / "memory" / "memory.sqlite3") as conn:
        rows = conn.execute("SELECT trust_tier, validation_state FROM crystals").fetchall()
    assert rows == [("T1", "validated")]
    # another act on the same bytes is another episode
    other = handoff(cli, project, "atlas", "vigil", "INFORM", "scout-report", name="b/o.md")
    doc3 = cli("verify-incoming", other, "--as", "vigil", "--json").json()
    assert doc3["ingest"]["commit_status"] == "committed"


def _access_counts(project: Path) -> list[int]:
    import sqlite3

    store = project / ".eidolons" / "memory" / "memory.sqlite3"
    with sqlite3.connect(store) as conn:
        return [n for (n,) in conn.execute("SELECT access_count FROM crystals ORDER BY id")]


def test_a_recall_nobody_is_shown_is_not_made(cli: Cli, project: Path) -> None:
    # ADR 0021: plain verify-incoming delivers no recall (only --json and --show-recall
    # do), so it makes none: no query, and no crystal counted as surfaced to anyone
    first = handoff(cli, project, "atlas", "vigil", "PROPOSE", "scout-report", name="a/first.md")
    assert cli("verify-incoming", first, "--as", "vigil").code == 0
    second = handoff(cli, project, "atlas", "vigil", "INFORM", "scout-report", name="a/second.md")
    plain = cli("verify-incoming", second, "--as", "vigil")
    assert plain.code == 0 and "PASS" in plain.err
    assert crystals(cli) == 2  # the ingest still ran
    assert _access_counts(project) == [0, 0]
    shown = cli("verify-incoming", second, "--as", "vigil", "--show-recall")
    assert shown.code == 0 and "recall (local): 2 records" in shown.err
    assert _access_counts(project) == [1, 1]
    doc = cli("verify-incoming", second, "--as", "vigil", "--json").json()
    assert len(doc["recall"]["records"]) == 2
    assert _access_counts(project) == [2, 2]
