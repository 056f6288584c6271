"""A budget that cannot be dodged (ADR 0005): the receiver estimates the payload and
summary itself (characters / 4) against the edge's token_budget_max, so leaving
context_delta out or declaring tokens_used: 1 hides nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import emit_cmd, emit_payload
from tests.security._probes import Cli

BIG = "# Scout report\n\n" + "x" * 20_000 + "\n"  # ≈5,000 tokens on a 4,000-token edge


def emitted(cli: Cli, project: Path, body: str, *extra: str) -> tuple[Path, Path]:
    payload, envelope, _ = emit_payload(
        cli, project, "r.md", body, "--tokens-used", "1", "--no-check", *extra,
        performative="INFORM",
    )  # fmt: skip
    return payload, envelope


@pytest.mark.parametrize("how", ["tokens_used-1", "no-context-delta"])
@pytest.mark.parametrize("mode", [[], ["--no-reverify"]])
def test_an_over_budget_payload_is_refused_whatever_is_declared(
    cli: Cli, project: Path, how: str, mode: list[str]
) -> None:
    payload, envelope = emitted(cli, project, BIG)
    if how == "no-context-delta":
        doc = json.loads(envelope.read_text())
        del doc["context_delta"]
        envelope.write_text(json.dumps(doc))
    assert cli("verify-envelope", envelope).code == 0
    r = cli("verify-incoming", payload, "--as", "vigil", "--no-memory", *mode)
    lines = r.err.splitlines()
    assert (
        r.code == 3 and lines[0] == "[vigil-verify-incoming] REFUSE: CONTEXT_OVER_BUDGET from atlas"
    )
    assert "exceed the edge's token_budget_max 4000" in lines[1]


def test_the_sender_is_told_first(cli: Cli, project: Path) -> None:
    (project / "r.md").write_text(BIG)
    r = cli(*emit_cmd("r.md", "--tokens-used", "1"))
    assert r.code == 3 and "REFUSE: CONTEXT_OVER_BUDGET" in r.err
    assert not (project / "r.envelope.json").exists()


@pytest.mark.parametrize("mode", [[], ["--no-reverify"]])
def test_characters_not_bytes_are_counted(cli: Cli, project: Path, mode: list[str]) -> None:
    payload, envelope = emitted(cli, project, "# R\n" + "é" * 10_000 + "\n")  # 20 kB, 2.5k tokens
    assert cli("verify-envelope", envelope).code == 0
    assert cli("verify-incoming", payload, "--as", "vigil", "--no-memory", *mode).code == 0
