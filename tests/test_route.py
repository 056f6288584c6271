"""``eidolons run --verify``: the route gate runs COMMAND only after the gate allows it."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from tests.conftest import Run, clean_env, emit_payload, read_trace

Cli = Callable[..., Run]
DUMP_ENV = (
    "import json, os; "
    "print(json.dumps({k: v for k, v in os.environ.items() if k.startswith('ECL_')}))"
)


def run_python(
    cli: Cli, envelope: Path, *options: str, code: str, env: dict[str, str] | None = None
) -> Run:
    """``eidolons run --verify ENVELOPE [OPTIONS] -- python -c CODE``."""
    return cli("run", "--verify", envelope, *options, "--", sys.executable, "-c", code, env=env)


def test_allowed_route_runs_command_with_ecl_env(cli: Cli, project: Path) -> None:
    payload, envelope, env = emit_payload(cli, project)
    r = run_python(cli, envelope, "--verify-block", code=DUMP_ENV)
    assert r.code == 0, r.err
    seen = json.loads(r.out)
    assert seen["ECL_ENVELOPE_SOURCE"] == str(envelope.resolve())
    assert seen["ECL_PAYLOAD_SOURCE"] == str(payload.resolve())
    # ECL_ENVELOPE is a snapshot of the envelope bytes the gates judged, gone after COMMAND
    assert Path(seen["ECL_ENVELOPE"]) != envelope.resolve()
    assert not Path(seen["ECL_ENVELOPE"]).exists()
    snapshot = Path(seen["ECL_PAYLOAD"])
    assert snapshot != payload.resolve() and not snapshot.exists()  # removed after COMMAND
    assert seen["ECL_MESSAGE_ID"] == env["message_id"] and seen["ECL_THREAD_ID"] == env["thread_id"]
    assert seen["ECL_FROM"] == "atlas@1.4.2" and seen["ECL_TO"] == "vigil@1.9.0"
    events = read_trace(project / ".eidolons/.trace" / f"{env['thread_id']}.jsonl")
    assert events[-1]["event"] == "verify_pass"  # recorded before COMMAND ran


def test_exit_code_is_the_commands(cli: Cli, project: Path) -> None:
    _, envelope, _ = emit_payload(cli, project)
    r = run_python(cli, envelope, "--verify-block", code="raise SystemExit(7)")
    assert r.code == 7


def test_blocked_route_never_runs_command(cli: Cli, project: Path) -> None:
    payload, envelope, _ = emit_payload(cli, project)
    payload.write_text("tampered")
    marker = project / "ran"
    r = run_python(cli, envelope, "--verify-block", code=f"open({str(marker)!r}, 'w').write('x')")
    assert r.code == 3 and "blocked" in r.err
    assert not marker.exists()


def test_block_is_the_default_and_warn_an_explicit_opt_in(cli: Cli, project: Path) -> None:
    payload, envelope, _ = emit_payload(cli, project)
    payload.write_text("tampered")
    marker = project / "ran"
    touch = f"open({str(marker)!r}, 'w').write('x')"
    r = run_python(cli, envelope, code=touch)  # no flag, no environment: block
    assert r.code == 3 and "route blocked" in r.err and not marker.exists()
    r = run_python(cli, envelope, code=touch, env=clean_env(EIDOLONS_ECL_VERIFY_MODE="block"))
    assert r.code == 3 and not marker.exists()
    r = run_python(cli, envelope, code=touch, env=clean_env(EIDOLONS_ECL_VERIFY_MODE="warn"))
    assert r.code == 0 and marker.exists()  # warn mode: the gate warns, the route proceeds
    assert "eidolons: warning: [tamper] not blocked" in r.err


def test_mode_flags_conflict_is_a_usage_error(cli: Cli, project: Path) -> None:
    _, envelope, _ = emit_payload(cli, project)
    r = cli("run", "--verify", envelope, "--verify-block", "--mode", "warn")
    assert r.code == 2 and "contradicts" in r.err
    assert cli("run", "--verify", envelope, "--mode", "loud").code == 2


def test_as_receiver_blocks_even_in_warn_mode(cli: Cli, project: Path) -> None:
    payload, envelope, _ = emit_payload(cli, project)
    payload.write_text("tampered")
    r = run_python(cli, envelope, "--mode", "warn", "--as", "vigil", code="print('ran')")
    assert r.code == 3 and "ran" not in r.out
    assert "[vigil-verify-incoming] REFUSE: INTEGRITY_MISMATCH from atlas" in r.err


def test_as_receiver_refuses_undeclared_edge(cli: Cli, project: Path) -> None:
    _, envelope, _ = emit_payload(
        cli, project, "h/spec.md", "# Spec\n", "--no-check", sender="ramza@1.0.0", kind="spec"
    )
    r = cli("run", "--verify", envelope, "--verify-block", "--as", "vigil", "--json")
    assert r.code == 3
    doc = r.json()
    assert doc["route"] == "blocked"
    assert doc["incoming_verify"]["verdict"] == "pass"
    assert doc["receiver_verify"]["failure_code"] == "UNDECLARED_EDGE"


def test_a_receiver_refusal_prints_the_route_line_then_the_refuse_and_reason_lines(
    cli: Cli, project: Path
) -> None:
    _, envelope, _ = emit_payload(cli, project)
    for extra in ((), ("--", sys.executable, "-c", "print('ran')")):
        r = cli("run", "--verify", envelope, "--as", "gilgamesh", *extra)
        assert r.code == 3 and "ran" not in r.out
        lines = r.err.splitlines()
        at = lines.index("eidolons run: route blocked: receiver gate [UNDECLARED_EDGE] refused it")
        assert lines[at + 1] == "[gilgamesh-verify-incoming] REFUSE: UNDECLARED_EDGE from atlas"
        assert lines[at + 2].startswith("[gilgamesh-verify-incoming] reason: to.eidolon is")
        assert lines[at + 3].startswith("eidolons run: hand-back for the orchestrator: ")
        assert len(lines) == at + 4 and not any("REFUSE" in line for line in lines[:at])


def test_an_orchestrator_refusal_prints_the_route_line_and_no_receiver_ran(
    cli: Cli, project: Path
) -> None:
    payload, envelope, env = emit_payload(cli, project)
    payload.write_text("tampered")
    r = cli("run", "--verify", envelope, "--as", "vigil")
    assert r.code == 3
    assert r.err.splitlines() == [
        "eidolons run: route blocked: orchestrator gate [tamper] payload SHA-256 does not "
        "match integrity tag"
    ]
    events = read_trace(project / ".eidolons/.trace" / f"{env['thread_id']}.jsonl")
    assert [e.get("gate") for e in events] == ["sender", "orchestrator"]


def test_fail_closed_on_missing_or_malformed_envelope(cli: Cli, project: Path) -> None:
    for args in (["--verify-block"], []):
        r = cli("run", "--verify", project / "missing.envelope.json", *args, "--", "true")
        assert r.code == 3 and "blocked" in r.err
    (project / "bad.envelope.json").write_text("{")
    r = cli("run", "--verify", project / "bad.envelope.json", "--verify-block", "--json")
    assert r.code == 3 and r.json()["route"] == "blocked"
    assert r.json()["incoming_verify"]["verdict"] == "malformed"


def test_decision_without_command(cli: Cli, project: Path) -> None:
    _, envelope, _ = emit_payload(cli, project)
    r = cli("run", "--verify", envelope, "--verify-block", "--json")
    assert r.code == 0
    doc = r.json()
    assert doc["route"] == "allowed"
    assert doc["incoming_verify"]["verdict"] == "pass" and doc["incoming_verify"]["mode"] == "block"
    r = cli("run", "--verify", envelope, "--verify-block")
    assert r.code == 0 and "route allowed" in r.err


def test_unrunnable_command(cli: Cli, project: Path) -> None:
    _, envelope, _ = emit_payload(cli, project)
    r = cli("run", "--verify", envelope, "--verify-block", "--", "/nonexistent/cmd")
    assert r.code == 127 and "cannot run" in r.err


def test_warn_mode_route_says_what_it_lets_through(cli: Cli, project: Path) -> None:
    payload, envelope, _ = emit_payload(cli, project)
    payload.write_text("tampered")
    r = run_python(cli, envelope, "--mode", "warn", code="print('ran')")
    assert r.code == 0 and "ran" in r.out
    assert "ecl verify [tamper]" in r.err
    assert "eidolons: warning: [tamper] not blocked: warn mode let it through" in r.err


def test_command_reads_a_read_only_snapshot_of_the_hashed_bytes(cli: Cli, project: Path) -> None:
    payload, envelope, _ = emit_payload(cli, project)
    show = (
        "import os, stat; p = os.environ['ECL_PAYLOAD']; "
        "print(oct(stat.S_IMODE(os.stat(p).st_mode))); print(open(p).read(), end='')"
    )
    r = run_python(cli, envelope, "--verify-block", code=show)
    assert r.code == 0, r.err
    mode, body = r.out.split("\n", 1)
    assert mode == "0o400" and body == payload.read_text()


def test_a_receiver_whose_contracts_fail_to_load_blocks_the_route(cli: Cli, project: Path) -> None:
    """``--as R`` with a ``--contracts`` directory that cannot be read: the receiver gate
    judges against the unavailable set, which refuses every edge; COMMAND never runs."""
    _, envelope, _ = emit_payload(cli, project)
    bad = project / "bad"
    bad.mkdir()
    (bad / "x.yaml").write_text("from: atlas\nto: [vigil\n")
    marker = project / "ran"
    write = f"open({str(marker)!r}, 'w').write('x')"
    r = run_python(
        cli, envelope, "--verify-block", "--as", "vigil", "--contracts", str(bad), code=write
    )
    assert r.code == 3, r.err
    assert "[vigil-verify-incoming] REFUSE: UNDECLARED_EDGE from atlas" in r.err
    assert not marker.exists()
