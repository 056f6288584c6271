"""``eidolons check`` over a whole project reads the hand-offs, not the tool's own state:
the hand-backs under ``.eidolons/refusals/`` (and the trace, contracts, memory, keys) are
skipped, while the hand-off directories, ``.eidolons/handoffs/`` included, are always
checked, so a CI ``check .`` stays green after a refusal and still catches a bad hand-off."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import Run, emit_payload

Cli = Callable[..., Run]


def checked(r: Run) -> set[Path]:
    """The envelopes a ``check --json`` run checked."""
    return {Path(x["target"]).resolve() for x in r.json()["results"]}


def refused_once(cli: Cli, project: Path) -> Path:
    """A good hand-off in ``.eidolons/handoffs/`` that a receiver once refused (its
    hand-back is under ``.eidolons/refusals/``); the payload is then put back."""
    payload, envelope, _ = emit_payload(cli, project, ".eidolons/handoffs/r.md")
    assert cli("verify-envelope", envelope).code == 0
    good = payload.read_bytes()
    payload.write_bytes(good + b"tampered\n")
    assert cli("verify-incoming", payload, "--as", "vigil").code == 3
    payload.write_bytes(good)
    assert list((project / ".eidolons" / "refusals").glob("*.envelope.json"))
    return envelope


def test_check_at_the_root_skips_the_tools_hand_backs(cli: Cli, project: Path) -> None:
    envelope = refused_once(cli, project)
    r = cli("check", ".", "--json")
    assert r.code == 0, r.out
    assert checked(r) == {envelope.resolve()}


def test_check_at_the_root_still_checks_the_handoff_directories(cli: Cli, project: Path) -> None:
    envelope = refused_once(cli, project)
    envelope.with_name("r.md").write_bytes(b"rewritten\n")
    r = cli("check", ".", "-q")
    assert r.code == 2 and "I-3 MUST fail integrity_match" in r.out
    assert "refusals" not in r.out


def test_a_state_directory_named_on_its_own_is_checked(cli: Cli, project: Path) -> None:
    refused_once(cli, project)
    r = cli("check", ".eidolons/refusals", "--json")
    assert [p.parent.name for p in checked(r)] == ["refusals"]


def test_a_configured_handoff_directory_under_the_state_is_checked(cli: Cli, project: Path) -> None:
    (project / ".eidolons" / "config.toml").write_text('[handoffs]\ndirs = [".eidolons/inbox"]\n')
    _, envelope, _ = emit_payload(cli, project, ".eidolons/inbox/r.md")
    (project / ".eidolons" / "keys").mkdir()
    (project / ".eidolons" / "keys" / "x.envelope.json").write_text(json.dumps({"not": "ecl"}))
    r = cli("check", ".", "--json")
    assert r.code == 0, r.out
    assert checked(r) == {envelope.resolve()}
