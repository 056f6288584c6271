"""No silent skip of a hand-off: an artifact the project knows is a hand-off
is refused when its envelope is gone; ``--require-envelope``; missing file or directory
is a usage error; one PASS/SKIP line; a reason line after each REFUSE line."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from eidolons.errors import UsageError
from eidolons.gates.trigger import find_handoff
from eidolons.io.config import handoff_dirs
from tests.conftest import Run, clean_env, emit_cmd, emit_payload, read_trace

Cli = Callable[..., Run]
REFUSED_UNVERIFIED = "[vigil-verify-incoming] REFUSE: UNVERIFIED from "


def incoming(cli: Cli, artifact: Path | str, *extra: str, env: dict[str, str] | None = None) -> Run:
    return cli("verify-incoming", artifact, "--as", "vigil", "--no-memory", *extra, env=env)


def refused(r: Run, sender: str = "unknown") -> list[str]:
    lines = r.err.splitlines()
    assert r.code == 3 and r.out == "", r
    assert lines[0] == REFUSED_UNVERIFIED + sender, r.err
    assert len(lines) == 2 and lines[1].startswith("[vigil-verify-incoming] reason: "), r.err
    return lines


def test_payload_under_the_default_handoff_dir_without_envelope_is_refused(
    cli: Cli, project: Path
) -> None:
    drop = project / ".eidolons" / "handoffs" / "t1" / "scout-report.md"
    drop.parent.mkdir(parents=True)
    drop.write_text("# never emitted, or its envelope deleted\n")
    lines = refused(incoming(cli, drop, "--print-payload"))
    assert "has no envelope" in lines[1] and "hand-off directory" in lines[1]
    events = read_trace(project / ".eidolons" / ".trace" / "unknown.jsonl")
    assert (
        events[-1]["event"] == "verify_fail" and events[-1]["verify_failure_code"] == "UNVERIFIED"
    )
    # the same file elsewhere is not a hand-off: skipped, and it says so
    plain = project / "notes.md"
    plain.write_text("x")
    r = incoming(cli, plain)
    assert r.code == 0 and r.err.startswith("[vigil-verify-incoming] SKIP: ")


def test_handoff_named_by_the_trace_is_refused_once_its_envelope_is_deleted(
    cli: Cli, project: Path
) -> None:
    payload, envelope, env = emit_payload(cli, project, "out/report.md")
    envelope.unlink()  # emitted, never verified: the emit event names the payload
    payload.write_text("# rewritten\n")
    lines = refused(incoming(cli, payload), sender="atlas")
    assert "the trace names it (emit of message " + env["message_id"] in lines[1]
    last = read_trace(project / ".eidolons" / ".trace" / f"{env['thread_id']}.jsonl")[-1]
    assert last["gate"] == "receiver" and last["message_id"] == env["message_id"]


def test_swapping_in_a_symlink_does_not_move_a_handoff_out_of_protection(
    cli: Cli, project: Path, tmp_path: Path
) -> None:
    payload, envelope, _ = emit_payload(cli, project, "out/report.md")
    envelope.unlink()
    outside = tmp_path / "evil.md"
    outside.write_text("# evil\n")
    payload.unlink()
    payload.symlink_to(outside)
    refused(incoming(cli, payload), sender="atlas")
    # a directory link: handoffs/ pointing elsewhere is still the hand-off directory
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "r.md").write_text("x")
    (project / ".eidolons" / "handoffs").symlink_to(elsewhere)
    refused(incoming(cli, project / ".eidolons" / "handoffs" / "r.md"))


def test_require_envelope_refuses_every_artifact_without_one(cli: Cli, project: Path) -> None:
    (project / "notes.md").write_text("x")
    lines = refused(incoming(cli, project / "notes.md", "--require-envelope"))
    assert "--require-envelope" in lines[1]
    r = incoming(cli, project / "notes.md", "--require-envelope", "--json")
    assert r.code == 3 and r.json()["failure_code"] == "UNVERIFIED"
    assert r.err.startswith(REFUSED_UNVERIFIED)  # stderr even in JSON mode


@pytest.mark.parametrize("what", ["missing", "directory"])
def test_missing_file_or_directory_is_a_usage_error(cli: Cli, project: Path, what: str) -> None:
    target = project / "thing.md"
    if what == "directory":
        target.mkdir()
    r = incoming(cli, target)
    assert r.code == 2 and r.out == ""
    assert r.err.startswith("eidolons: ") and r.err.count("\n") == 1


def test_configuration_adds_handoff_dirs_and_never_removes_the_default(
    cli: Cli, project: Path
) -> None:
    (project / ".eidolons" / "config.toml").write_text('[handoffs]\ndirs = ["drop"]\n')
    for rel in ("drop/a.md", ".eidolons/handoffs/b.md", "env-drop/c.md"):
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text("x")
    refused(incoming(cli, project / "drop/a.md"))
    refused(incoming(cli, project / ".eidolons/handoffs/b.md"))  # the default stays
    assert incoming(cli, project / "env-drop/c.md").code == 0
    refused(
        incoming(cli, project / "env-drop/c.md", env=clean_env(EIDOLONS_HANDOFF_DIRS="env-drop"))
    )
    # an empty list, or any other setting, cannot remove the default
    (project / ".eidolons" / "config.toml").write_text("[handoffs]\ndirs = []\n")
    refused(incoming(cli, project / ".eidolons/handoffs/b.md"))
    assert handoff_dirs(project)[0] == project / ".eidolons" / "handoffs"


@pytest.mark.parametrize(
    "text", ["[handoffs\n", '[handoffs]\ndirs = "drop"\n', "dirs = [1]\n[handoffs]\ndirs=[2]\n"]
)
def test_broken_configuration_fails_closed(cli: Cli, project: Path, text: str) -> None:
    (project / ".eidolons" / "config.toml").write_text(text)
    (project / "notes.md").write_text("x")
    r = incoming(cli, project / "notes.md")
    assert r.code == 2 and "config.toml" in r.err
    with pytest.raises(UsageError):
        find_handoff(project / "notes.md", project)


def test_find_handoff_is_the_one_rule_for_hooks(cli: Cli, project: Path) -> None:
    payload, _, _ = emit_payload(cli, project, "out/report.md")
    assert find_handoff(payload, project) is not None  # named by the emit event
    # a path under the hand-off directory need not exist
    assert find_handoff(project / ".eidolons/handoffs/x/y.md", project) is not None
    assert find_handoff(project / "README.md", project) is None
    found = find_handoff(payload, project)
    assert found is not None and found[1] is not None and found[1]["event"] == "emit"


def test_trace_too_large_to_search_fails_closed(cli: Cli, project: Path) -> None:
    (project / "notes.md").write_text("x")
    trace = project / ".eidolons" / ".trace" / "big.jsonl"
    trace.parent.mkdir(parents=True)
    with trace.open("wb") as fh:
        fh.truncate(1 << 40)  # a sparse terabyte
    bounded = clean_env(EIDOLONS_MAX_TRACE_SCAN_BYTES=str(1 << 20))
    lines = refused(incoming(cli, project / "notes.md", env=bounded))
    assert "cannot rule it out" in lines[1] and "scan bound" in lines[1]


def test_backward_record_scan_is_bounded(cli: Cli, project: Path) -> None:
    payload, envelope, env = emit_payload(cli, project)
    assert cli("verify-envelope", envelope, "--block").code == 0
    trace = project / ".eidolons" / ".trace" / f"{env['thread_id']}.jsonl"
    with trace.open("ab") as fh:
        fh.write(b"\n")
        fh.truncate(trace.stat().st_size + (1 << 40))  # the record is now a terabyte back
    bounded = clean_env(EIDOLONS_MAX_TRACE_SCAN_BYTES=str(1 << 20))
    r = incoming(cli, payload, env=bounded)
    lines = r.err.splitlines()
    assert r.code == 3 and lines[0] == "[vigil-verify-incoming] REFUSE: UNVERIFIED from atlas"
    assert "scan bound" in lines[1]


def test_pass_line_names_kind_sender_and_message(cli: Cli, project: Path) -> None:
    payload, envelope, env = emit_payload(cli, project)
    assert cli("verify-envelope", envelope).code == 0
    r = incoming(cli, payload)
    assert r.code == 0
    first = r.err.splitlines()[0]
    assert (
        first
        == f"[vigil-verify-incoming] PASS: scout-report from atlas (message {env['message_id']}, "
        "evidence: unsigned; contract builtin)"
    )


def test_reason_line_names_the_missing_sections(cli: Cli, project: Path) -> None:
    body = "# Report\n\n## Decision target\nx\n## Scope\ny\n"
    payload, envelope, _ = emit_payload(
        cli, project, "r.md", body, "--no-check", to="spectra@4.11.0"
    )
    assert cli("verify-envelope", envelope).code == 0
    r = cli("verify-incoming", payload, "--as", "spectra", "--no-memory")
    assert r.code == 3
    lines = r.err.splitlines()
    assert lines[0] == "[spectra-verify-incoming] REFUSE: MISSING_REQUIRED_SECTION from atlas"
    assert "findings" in lines[1] and "gaps" in lines[1] and "decision_target" not in lines[1]


def test_reason_line_says_the_contracts_directory_does_not_exist(cli: Cli, project: Path) -> None:
    payload, envelope, _ = emit_payload(cli, project)
    assert cli("verify-envelope", envelope).code == 0
    r = incoming(cli, payload, "--contracts", "no-such-dir")
    lines = r.err.splitlines()
    assert lines[0] == "[vigil-verify-incoming] REFUSE: UNDECLARED_EDGE from atlas"
    assert "no-such-dir" in lines[1] and "does not exist" in lines[1]


def test_reason_line_says_the_edge_needs_hmac(cli: Cli, project: Path) -> None:
    payload = project / "rf.md"
    payload.write_text("# Repair failed\n")
    emit = emit_cmd(
        payload, "--no-check", "--trust-level", "standard", sender="apivr",
        performative="ESCALATE", kind="repair-failed-report",
    )  # fmt: skip
    assert cli(*emit).code == 0
    assert cli("verify-envelope", project / "rf.envelope.json").code == 0
    lines = incoming(cli, payload).err.splitlines()
    assert lines[0] == "[vigil-verify-incoming] REFUSE: UNVERIFIED from apivr"
    assert "trust_level high" in lines[1] and "hmac-sha256" in lines[1]


def test_emit_may_write_into_the_handoff_dir(cli: Cli, project: Path) -> None:
    payload = project / ".eidolons" / "handoffs" / "t" / "scout-report.md"
    payload.parent.mkdir(parents=True)
    payload.write_text("# Report\n\n## Decision target\nx\n")
    r = cli(*emit_cmd(payload, "--json", performative="PROPOSE"))
    assert r.code == 0, r.err
    envelope = Path(r.json()["envelope_path"])
    assert envelope.parent == payload.parent
    assert cli("verify-envelope", envelope).code == 0
    assert incoming(cli, payload).code == 0
    # the rest of .eidolons/ stays the gates' own state
    (project / ".eidolons" / "x.md").write_text("x")
    r = cli(*emit_cmd(project / ".eidolons" / "x.md"))
    assert r.code == 2 and "gates' own state" in r.err


def test_receiver_events_name_the_payload(cli: Cli, project: Path) -> None:
    payload, envelope, env = emit_payload(cli, project, "out/report.md")
    assert cli("verify-envelope", envelope).code == 0
    assert incoming(cli, payload).code == 0
    events = read_trace(project / ".eidolons" / ".trace" / f"{env['thread_id']}.jsonl")
    assert [e.get("payload_path") for e in events] == ["out/report.md"] * 4
    assert os.path.exists(project / "out/report.md")
