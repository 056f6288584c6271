"""What an agent sets on a gate's command line and in its environment: caps out of range,
bad variables, unrunnable arguments and a missing root are usage errors or refusals,
never a crash, an unbounded read or a pass."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import clean_env, emit_payload, run_cli
from tests.security._probes import Cli, envelope_of, no_crash, receive, verified


@pytest.mark.parametrize(
    ("variable", "value", "command"),
    [
        ("EIDOLONS_MAX_ENVELOPE_BYTES", str(10**20), "verify-envelope"),
        ("EIDOLONS_MAX_ENVELOPE_BYTES", str(2**62), "verify-envelope"),
        ("EIDOLONS_MAX_ENVELOPE_BYTES", str(10**20), "verify-incoming"),
    ],
)
def test_oversized_cap_from_environment_crashes(
    cli: Cli, project: Path, variable: str, value: str, command: str
) -> None:
    payload = verified(cli, project)
    env = clean_env(**{variable: value})
    if command == "verify-envelope":
        r = cli("verify-envelope", envelope_of(payload), "--block", "--no-trace", env=env)
    else:
        r = cli("verify-incoming", payload, "--as", "vigil", "--no-reverify", env=env)
    no_crash(r)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("EIDOLONS_MAX_PAYLOAD_BYTES", "-1"),
        ("EIDOLONS_MAX_PAYLOAD_BYTES", "1e9"),
        ("EIDOLONS_MAX_ENVELOPE_BYTES", "0x10"),
        ("EIDOLONS_ROOT", "/nonexistent/root"),
    ],
)
def test_bad_environment_is_a_usage_error(
    cli: Cli, project: Path, variable: str, value: str
) -> None:
    payload, envelope, _ = emit_payload(cli, project)
    env = clean_env(**{variable: value})
    r = cli("verify-envelope", envelope, "--block", "--no-trace", env=env)
    assert r.code == 2 and variable in r.err
    r = receive(cli, payload, "--print-payload", env=env)
    assert r.code == 2 and r.out == ""


def test_huge_payload_cap_from_environment_is_harmless(cli: Cli, project: Path) -> None:
    """A cap above 1 TiB is a usage error (``read(cap + 1)`` would raise
    OverflowError), and nothing is handed over, --no-reverify included."""
    payload = verified(cli, project)
    env = clean_env(EIDOLONS_MAX_PAYLOAD_BYTES=str(10**20))
    for extra in ([], ["--no-reverify"]):
        r = receive(cli, payload, "--print-payload", *extra, env=env)
        assert r.code == 2 and r.out == "" and "EIDOLONS_MAX_PAYLOAD_BYTES" in r.err, r.err
    ok = clean_env(EIDOLONS_MAX_PAYLOAD_BYTES=str(2**40))
    r = receive(cli, payload, "--print-payload", env=ok)
    assert r.code == 0 and r.out == payload.read_text(), r.err


def test_zero_envelope_cap_refuses_everything(cli: Cli, project: Path) -> None:
    _, envelope, _ = emit_payload(cli, project)
    env = clean_env(EIDOLONS_MAX_ENVELOPE_BYTES="0")
    assert cli("verify-envelope", envelope, "--block", "--no-trace", env=env).code == 2


@pytest.mark.parametrize("kind", ["fifo", "over-cap"])
def test_no_reverify_payload_read_is_still_bounded(cli: Cli, project: Path, kind: str) -> None:
    payload = verified(cli, project)
    env = None
    if kind == "fifo":
        payload.unlink()
        os.mkfifo(payload)
    else:
        env = clean_env(EIDOLONS_MAX_PAYLOAD_BYTES="8")
    r = receive(cli, payload, "--no-reverify", "--print-payload", env=env)
    assert r.code == 3 and r.out == "" and "INTEGRITY_MISMATCH" in r.err


def test_unrunnable_cli_input_never_exits_zero(tmp_path: Path) -> None:
    """Argument errors are usage errors, never a pass."""
    for args in (
        ["verify-envelope"],
        ["verify-envelope", "x.envelope.json", "--block", "--mode", "warn"],
        ["verify-incoming", "x.md", "--as", "Vigil"],
        ["verify-incoming", "x.md", "--as", "vigil", "--json", "--print-payload"],
        ["run", "--verify", "x.envelope.json", "--as", "../vigil", "--", "true"],
        ["run", "--verify", "x.envelope.json", "--json", "--", "true"],
    ):
        r = run_cli(*args, cwd=tmp_path)
        assert r.code == 2, (args, r.err)
        assert "Traceback" not in r.err


def test_root_fallback_to_the_current_directory_is_said(tmp_path: Path) -> None:
    (tmp_path / "x.md").write_text("x")
    r = run_cli("verify-incoming", "x.md", "--as", "vigil", cwd=tmp_path)
    assert r.code == 0 and "eidolons: note: no .eidolons/ or .git/ above" in r.err


@pytest.mark.parametrize("option", ["--objective", "--summary", "--parent"])
def test_emit_text_that_is_not_utf_8_is_a_usage_error_and_nothing_is_written(
    cli: Cli, project: Path, option: str
) -> None:
    """A byte that is not UTF-8 in an argument (Python's argv holds it as a lone surrogate,
    as an MCP call's JSON can) cannot be written in an envelope: a usage error, with
    nothing placed or recorded, not an internal error; the MCP tool says the same."""
    from eidolons.hosts.mcp.tools import Toolbox
    from tests.conftest import emit_cmd, trace_files

    payload = project / ".eidolons" / "handoffs" / "r.md"
    payload.parent.mkdir(parents=True)
    payload.write_text("# R\n\n## Decision target\nx\n")
    r = cli(*emit_cmd(payload, option, "x\udcff", to="vigil", performative="PROPOSE"))
    assert r.code == 2, r.err
    assert "not UTF-8" in r.err and "internal error" not in r.err, r.err
    assert not payload.with_name("r.envelope.json").exists() and trace_files(project) == []
    field = {"--objective": "objective", "--summary": "summary", "--parent": "parent"}[option]
    args = {"objective": "o", field: "x\ud800"}
    reply = Toolbox(project, bound="atlas").emit(
        str(payload), "vigil", "PROPOSE", "scout-report", **args
    )
    assert reply.is_error and "not UTF-8" in reply.text, reply.text
    assert not payload.with_name("r.envelope.json").exists() and trace_files(project) == []


@pytest.mark.parametrize(
    "argv",
    [
        ("emit", "LONG", "--from", "atlas", "--to", "vigil", "--performative", "PROPOSE",
         "--kind", "scout-report", "--objective", "o"),
        ("contracts", "list", "--contracts", "LONG"),
        ("keys", "add", "LONG", "--role", "orchestrator"),
    ],
)  # fmt: skip
def test_a_path_name_too_long_for_the_system_is_a_usage_error(
    cli: Cli, argv: tuple[str, ...]
) -> None:
    """A file name past the system's limit (ENAMETOOLONG from the first stat) is the
    caller's mistake, answered as such: never an internal error."""
    r = cli(*("a" * 5000 if arg == "LONG" else arg for arg in argv))
    assert r.code == 2, r.err
    assert "internal error" not in r.err, r.err
