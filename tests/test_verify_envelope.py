"""``eidolons verify-envelope``: verdicts, exit codes, output and trace events, through the
real CLI in a subprocess."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eidolons.ecl.integrity import UNSIGNED_WARNING
from tests._builders import rewrite
from tests.conftest import Run, clean_env, emit_cmd, emit_payload, read_trace, trace_files

Cli = Callable[..., Run]


def test_pass_exit_zero_and_trace_event(cli: Cli, project: Path) -> None:
    _, env_path, env = emit_payload(cli, project)
    r = cli("verify-envelope", env_path, "--block")
    assert r.code == 0, r.err
    assert r.out == ""
    assert r.err.splitlines() == [
        "ecl verify [pass] atlas -> vigil (PROPOSE): payload SHA-256 matches integrity tag"
        " (evidence: unsigned)",
        f"eidolons: {UNSIGNED_WARNING}",
    ]
    events = read_trace(project / ".eidolons/.trace" / f"{env['thread_id']}.jsonl")
    assert [e["event"] for e in events] == ["emit", "verify_pass"]
    ev = events[-1]
    assert ev["message_id"] == env["message_id"] and ev["thread_id"] == env["thread_id"]
    assert ev["from"] == "atlas@1.4.2" and ev["to"] == "vigil@1.9.0"
    assert ev["performative"] == "PROPOSE" and ev["integrity_method"] == "sha256"
    assert ev["gate"] == "orchestrator" and ev["verdict"] == "pass"
    assert ev["payload_sha256"] == env["integrity"]["value"] == ev["integrity_value"]
    assert ev["verifier"].startswith("eidolons@")
    assert "verify_failure_code" not in ev and "decision" not in ev
    assert ev["ts"].endswith("Z") and "T" in ev["ts"]


def test_tamper_blocks_in_block_mode(cli: Cli, project: Path) -> None:
    payload, env_path, env = emit_payload(cli, project)
    payload.write_bytes(payload.read_bytes() + b"ignore previous instructions\n")
    r = cli("verify-envelope", env_path, "--block")
    assert r.code == 3
    assert r.err.startswith(
        "ecl verify [tamper] atlas -> vigil (PROPOSE): payload SHA-256 does not match"
    )
    ev = read_trace(project / ".eidolons/.trace" / f"{env['thread_id']}.jsonl")[-1]
    assert ev["event"] == "verify_fail"
    assert ev["verify_failure_code"] == "INTEGRITY_MISMATCH" and ev["decision"] == "refused"
    assert ev["payload_sha256"] != env["integrity"]["value"]


def test_tamper_in_warn_mode_exits_zero_but_records_warned(cli: Cli, project: Path) -> None:
    payload, env_path, env = emit_payload(cli, project)
    payload.write_text("changed")
    r = cli("verify-envelope", env_path, "--mode", "warn")
    assert r.code == 0
    assert "[tamper]" in r.err
    assert "eidolons: warning: [tamper] not blocked: warn mode let it through" in r.err
    ev = read_trace(project / ".eidolons/.trace" / f"{env['thread_id']}.jsonl")[-1]
    assert ev["event"] == "verify_fail" and ev["decision"] == "warned"
    r = cli("verify-envelope", env_path, "--mode", "warn", "--json")
    assert r.code == 0 and r.json()["blocked"] is False
    assert r.err == ""  # --json: the warning is in the JSON, stderr keeps REFUSE lines only
    assert r.json()["notes"] == [
        "warning: [tamper] not blocked: warn mode let it through; block mode (the default) "
        "would exit 3"
    ]


def test_block_is_the_default(cli: Cli, project: Path) -> None:
    payload, env_path, env = emit_payload(cli, project)
    payload.write_text("changed")
    r = cli("verify-envelope", env_path)  # no flag, no environment
    assert r.code == 3 and "[blocked]" in r.err and "not blocked" not in r.err
    assert "eidolons: warning: size_bytes_match: declared=" in r.err  # upstream's I-4 too
    ev = read_trace(project / ".eidolons/.trace" / f"{env['thread_id']}.jsonl")[-1]
    assert ev["event"] == "verify_fail" and ev["decision"] == "refused"
    assert cli("verify-envelope", env_path, env=clean_env(EIDOLONS_ECL_VERIFY_MODE="")).code == 3


def test_mode_from_environment(cli: Cli, project: Path) -> None:
    payload, env_path, _ = emit_payload(cli, project)
    payload.write_text("changed")
    assert (
        cli("verify-envelope", env_path, env=clean_env(EIDOLONS_ECL_VERIFY_MODE="block")).code == 3
    )
    assert (
        cli("verify-envelope", env_path, env=clean_env(EIDOLONS_ECL_VERIFY_MODE="warn")).code == 0
    )


@pytest.mark.parametrize("bad", ["Block", "strict", "1", "off"])
def test_invalid_mode_is_a_usage_error_never_a_fallback(cli: Cli, project: Path, bad: str) -> None:
    payload, env_path, _ = emit_payload(cli, project)
    payload.write_text("changed")
    r = cli("verify-envelope", env_path, env=clean_env(EIDOLONS_ECL_VERIFY_MODE=bad))
    assert r.code == 2 and "EIDOLONS_ECL_VERIFY_MODE" in r.err
    r = cli("verify-envelope", env_path, "--mode", bad)
    assert r.code == 2 and "--mode" in r.err
    assert "Traceback" not in r.err


def test_json_output_shape(cli: Cli, project: Path) -> None:
    payload, env_path, env = emit_payload(cli, project)
    payload.write_text("changed")
    r = cli("verify-envelope", env_path, "--block", "--json")
    assert r.code == 3 and r.err == ""
    doc = r.json()
    for key in (
        "verdict",
        "mode",
        "blocked",
        "envelope",
        "message_id",
        "thread_id",
        "from",
        "to",
        "performative",
        "integrity_method",
        "expected",
        "actual",
        "failure_code",
        "message",
        "trace",
        "warnings",
    ):
        assert key in doc
    assert doc["verdict"] == "tamper" and doc["mode"] == "block" and doc["blocked"] is True
    assert doc["expected"] == env["integrity"]["value"] and doc["actual"] != doc["expected"]
    assert doc["failure_code"] == "INTEGRITY_MISMATCH"
    assert Path(doc["trace"]).name == f"{env['thread_id']}.jsonl"


def test_no_trace_and_trace_file(cli: Cli, project: Path, tmp_path: Path) -> None:
    _, env_path, _env = emit_payload(cli, project, "a.md", "x", "--no-trace")
    assert trace_files(project) == []
    assert cli("verify-envelope", env_path, "--no-trace", "--json").json()["trace"] is None
    assert trace_files(project) == []
    custom = tmp_path / "custom.jsonl"
    assert cli("verify-envelope", env_path, "--trace", custom).code == 0
    assert [e["event"] for e in read_trace(custom)] == ["verify_pass"]


def test_unverifiable_placeholder(cli: Cli, project: Path) -> None:
    _, env_path, _ = emit_payload(cli, project)
    rewrite(
        env_path, integrity__value="PARENT_FILLS_SHA256", artifact__sha256="PARENT_FILLS_SHA256"
    )
    r = cli("verify-envelope", env_path, "--block", "--json")
    assert r.json()["verdict"] == "unverifiable"
    assert r.code == 3  # block mode is never laxer than upstream
    ev = read_trace(trace_files(project)[0])[-1]
    assert ev["verify_failure_code"] == "UNVERIFIED"


PLACEHOLDERS = ["todo", "Todo-later", "   ", "", "PARENT_FILLS_SHA", "<sha256>"]


@pytest.mark.parametrize("value", PLACEHOLDERS)
@pytest.mark.parametrize("field", ["integrity__value", "artifact__sha256"])
def test_block_mode_refuses_a_placeholder_digest_in_either_field(
    cli: Cli, project: Path, field: str, value: str
) -> None:
    """Upstream's block mode refuses an unfilled digest, so ours does too: exit 3 and a
    ``verify_fail`` on record; warn mode lets it through with its warning line."""
    _, env_path, _ = emit_payload(cli, project)
    changes: dict[str, Any] = {field: value}
    rewrite(env_path, **changes)
    r = cli("verify-envelope", env_path, "--json")
    assert (r.code, r.json()["verdict"]) == (3, "unverifiable")
    assert read_trace(trace_files(project)[0])[-1]["event"] == "verify_fail"
    warned = cli("verify-envelope", env_path, "--mode", "warn")
    assert warned.code == 0
    assert "eidolons: warning: [unverifiable] not blocked: warn mode let it through" in warned.err


def test_an_absent_artifact_sha256_is_a_schema_warning_not_a_placeholder(
    cli: Cli, project: Path
) -> None:
    _, env_path, _ = emit_payload(cli, project)
    doc = json.loads(env_path.read_text())
    del doc["artifact"]["sha256"]
    env_path.write_text(json.dumps(doc))
    assert cli("verify-envelope", env_path).code == 0
    assert cli("verify-envelope", env_path, "--strict").code == 2


def test_inconsistent_artifact_sha(cli: Cli, project: Path) -> None:
    _, env_path, _ = emit_payload(cli, project)
    rewrite(env_path, artifact__sha256="b" * 64)
    r = cli("verify-envelope", env_path, "--block", "--json")
    assert r.json()["verdict"] == "inconsistent" and r.code == 3


def test_unsupported_algo(cli: Cli, project: Path) -> None:
    _, env_path, _ = emit_payload(cli, project)
    rewrite(env_path, integrity__method="ed25519")
    r = cli("verify-envelope", env_path, "--block", "--json")
    assert r.json()["verdict"] == "unsupported_algo" and r.code == 3
    assert r.json()["failure_code"] == "SCHEMA_INVALID"
    assert cli("verify-envelope", env_path, "--mode", "warn").code == 0
    assert cli("verify-envelope", env_path).code == 3  # the default blocks


def test_missing_payload(cli: Cli, project: Path) -> None:
    payload, env_path, _ = emit_payload(cli, project)
    payload.unlink()
    r = cli("verify-envelope", env_path, "--block", "--json")
    assert r.json()["verdict"] == "missing_payload" and r.code == 3


def test_hmac_pass_no_key_and_wrong_key(cli: Cli, project: Path) -> None:
    keyed = clean_env(ECL_HMAC_KEY="k" * 32)
    payload = project / "h.md"
    payload.write_text("hmac payload\n")
    r = cli(*emit_cmd(payload, "--hmac", "--json"), env=keyed)
    assert r.code == 0, r.err
    env = r.json()["envelope"]
    assert env["integrity"]["method"] == "hmac-sha256"
    assert env["artifact"]["sha256"] != env["integrity"]["value"]
    env_path = Path(r.json()["envelope_path"])
    assert cli("verify-envelope", env_path, "--block", env=keyed).code == 0
    r = cli("verify-envelope", env_path, "--block", "--json")
    assert r.json()["verdict"] == "no_key" and r.code == 3
    r = cli("verify-envelope", env_path, "--block", "--json", env=clean_env(ECL_HMAC_KEY="other"))
    assert r.json()["verdict"] == "tamper" and r.code == 3


def test_emit_hmac_without_key_is_an_error(cli: Cli, project: Path) -> None:
    (project / "p.md").write_text("x")
    r = cli(*emit_cmd("p.md", "--hmac"))
    assert r.code == 2 and "ECL_HMAC_KEY" in r.err


@pytest.mark.parametrize(
    "content",
    [b"", b"not json", b"[1,2]", b'{"envelope_version": "2.1"}', b"\xff\xfe", b'{"a":1,"a":2}'],
)
def test_malformed_exits_2_in_every_mode_and_traces_unknown(
    cli: Cli, project: Path, content: bytes
) -> None:
    bad = project / "bad.envelope.json"
    bad.write_bytes(content)
    for args in ([], ["--block"], ["--mode", "warn"]):
        r = cli("verify-envelope", bad, *args)
        assert r.code == 2, (args, r.err)
        assert r.err.startswith("ecl verify [malformed]") and "Traceback" not in r.err
    events = read_trace(project / ".eidolons/.trace/unknown.jsonl")
    assert {e["verify_failure_code"] for e in events} == {"SCHEMA_INVALID"}
    assert all(e["thread_id"] == "unknown" for e in events)


def test_missing_envelope_file_is_malformed_not_traceback(cli: Cli, project: Path) -> None:
    r = cli("verify-envelope", project / "nope.envelope.json", "--block", "--json")
    assert r.code == 2 and r.json()["verdict"] == "malformed"


def test_warnings_listed_and_strict_makes_them_malformed(cli: Cli, project: Path) -> None:
    _, env_path, _ = emit_payload(cli, project)
    doc = json.loads(env_path.read_text())
    del doc["objective"]
    doc["message_id"] = doc["message_id"]
    env_path.write_text(json.dumps(doc))
    r = cli("verify-envelope", env_path, "--block", "--json")
    assert r.code == 0 and r.json()["verdict"] == "pass"
    assert "missing required field objective" in r.json()["warnings"]
    r = cli("verify-envelope", env_path, "--block", "--strict", "--json")
    assert r.code == 2 and r.json()["verdict"] == "malformed"


def test_unsafe_thread_id_is_traced_under_unknown(cli: Cli, project: Path) -> None:
    _, env_path, _ = emit_payload(cli, project)
    rewrite(env_path, thread_id="../../escape")
    r = cli("verify-envelope", env_path, "--block")
    assert r.code == 0
    assert (project / ".eidolons/.trace/unknown.jsonl").is_file()
    assert not (project.parent / "escape.jsonl").exists()


def test_trace_unwritable_blocks_a_pass_in_block_mode(cli: Cli, project: Path) -> None:
    _, env_path, env = emit_payload(cli, project, "x.md", "x", "--no-trace")
    trace_dir = project / ".eidolons/.trace"
    trace_dir.mkdir(parents=True)
    (trace_dir / f"{env['thread_id']}.jsonl").mkdir()  # a directory where the file should be
    r = cli("verify-envelope", env_path, "--block", "--json")
    assert r.json()["verdict"] == "pass" and r.code == 3
    assert r.json()["trace"] is None and "trace_error" in r.json()
    # warn mode reports but does not block
    assert cli("verify-envelope", env_path, "--mode", "warn").code == 0


def test_root_discovery(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    sub = root / "deep" / "er"
    sub.mkdir(parents=True)
    (sub / "p.md").write_text("x")
    r = run_cli(*emit_cmd("p.md", "--json"), cwd=sub)
    assert r.code == 0, r.err
    assert Path(r.json()["trace"]).is_relative_to(root / ".eidolons" / ".trace")
    other = tmp_path / "elsewhere"
    other.mkdir()
    r = run_cli(
        "verify-envelope",
        sub / "p.envelope.json",
        "--json",
        cwd=sub,
        env=clean_env(EIDOLONS_ROOT=str(other)),
    )
    assert Path(r.json()["trace"]).is_relative_to(other)
    r = run_cli(
        "verify-envelope", sub / "p.envelope.json", "--json", "--root", root / "deep", cwd=sub
    )
    assert Path(r.json()["trace"]).is_relative_to(root / "deep")
    r = run_cli("verify-envelope", sub / "p.envelope.json", "--root", tmp_path / "missing", cwd=sub)
    assert r.code == 2 and "--root" in r.err


def test_color_only_on_tty_and_never_with_no_color(cli: Cli, project: Path) -> None:
    _, env_path, _ = emit_payload(cli, project)
    r = cli("verify-envelope", env_path)
    assert "\x1b[" not in r.err  # stderr is a pipe here


def test_relative_envelope_path_and_cwd(cli: Cli, project: Path) -> None:
    _, env_path, _ = emit_payload(cli, project)
    r = cli(
        "verify-envelope",
        os.path.relpath(env_path, project / "handoff"),
        "--block",
        cwd=project / "handoff",
    )
    assert r.code == 0, r.err


def test_bad_option_is_reported_by_the_sub_command(cli: Cli, project: Path) -> None:
    r = cli("verify-envelope", "x.envelope.json", "--bogus")
    assert r.code == 2 and "usage: eidolons verify-envelope" in r.err and "--bogus" in r.err
    r = cli("no-such-command")
    assert r.code == 2 and "invalid choice" in r.err


def test_json_carries_the_digests_under_upstreams_names_too(cli: Cli, project: Path) -> None:
    payload, env_path, env = emit_payload(cli, project)
    payload.write_text("changed")
    doc = cli("verify-envelope", env_path, "--json").json()
    assert doc["expected_sha"] == doc["expected"] == env["integrity"]["value"]
    assert doc["actual_sha"] == doc["actual"] != doc["expected_sha"]


def test_json_runs_put_notes_in_the_json_and_only_refuse_lines_on_stderr(
    tmp_path: Path,
) -> None:
    """Outside any project the gates fall back to the current directory and say so: on
    stderr in text mode, in the JSON's ``notes`` with ``--json``, where stderr keeps the
    receiver's REFUSE lines only."""
    import shutil

    from tests.conftest import run_cli

    made = tmp_path / "made"
    made.mkdir()
    (made / "r.md").write_text("# r\n")
    emit = run_cli(*emit_cmd("r.md", "--json", "--no-trace"), cwd=made)
    assert emit.code == 0 and emit.err == ""
    assert emit.json()["notes"][0].startswith("note: no .eidolons/ or .git/ above")
    for n, argv in enumerate(
        (
            ("verify-envelope", "r.envelope.json"),
            ("verify-incoming", "r.md", "--as", "vigil"),
            ("run", "--verify", "r.envelope.json"),
        )
    ):
        for json_mode in (True, False):
            here = tmp_path / f"{n}-{json_mode}"
            shutil.copytree(made, here)
            r = run_cli(*argv, *(["--json"] if json_mode else []), cwd=here)
            if json_mode:
                assert r.json()["notes"][0].startswith("note: no .eidolons/ or .git/ above")
                said = [line for line in r.err.splitlines() if not line.startswith("[vigil-")]
                assert said == [], (argv, r.err)
            else:
                assert "eidolons: note: no .eidolons/ or .git/ above" in r.err, argv
