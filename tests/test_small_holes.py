"""Smaller holes (issue 8 §6): secrets never reach COMMAND, COMMAND only after `--`,
never laxer than the upstream gate, the size warning, the root fallback said, the
REFUSE line on stderr whatever happens to stdout or stderr, recall output escaped."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Run, clean_env, emit_payload, run_cli

Cli = Callable[..., Run]
DUMP = "import json, os; print(json.dumps(dict(os.environ)))"


def test_run_never_hands_secrets_to_command(cli: Cli, project: Path) -> None:
    _, envelope, _ = emit_payload(cli, project)
    env = clean_env(
        ECL_HMAC_KEY="k" * 32,
        ECL_HMAC_KEY_OLD="o" * 32,
        EIDOLONS_TRACE_DSN="",
        EIDOLONS_SIGNING_KEY_FILE="/keys/orch.key",
        EIDOLONS_API_TOKEN="t",
        KEEP_ME="yes",
    )
    r = cli("run", "--verify", envelope, "--", sys.executable, "-c", DUMP, env=env)
    assert r.code == 0, r.err
    seen = json.loads(r.out)
    for name in (
        "ECL_HMAC_KEY",
        "ECL_HMAC_KEY_OLD",
        "EIDOLONS_SIGNING_KEY_FILE",
        "EIDOLONS_API_TOKEN",
    ):
        assert name not in seen, name
    assert seen["KEEP_ME"] == "yes" and seen["ECL_MESSAGE_ID"]


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--verify", "E.envelope.json", "date"],
        ["run", "map the auth flow", "--verify", "E.envelope.json"],
        ["run", "--verify", "E.envelope.json", "map the auth flow"],
    ],
)
def test_run_executes_command_only_after_double_dash(project: Path, argv: list[str]) -> None:
    _, envelope, _ = emit_payload(lambda *a, **k: run_cli(*a, cwd=project, **k), project)
    argv = [str(envelope) if a == "E.envelope.json" else a for a in argv]
    r = run_cli(*argv, cwd=project, process=True)
    assert r.code == 2 and r.out == ""
    assert "only after '--'" in r.err and "-- COMMAND" in r.err and r.err.count("\n") == 1


@pytest.mark.parametrize("tag", ["z" * 64, "ABCD", "0" * 63])
def test_non_hex_artifact_sha256_is_inconsistent(cli: Cli, project: Path, tag: str) -> None:
    _, envelope, _ = emit_payload(cli, project)
    doc = json.loads(envelope.read_text())
    doc["artifact"]["sha256"] = tag
    envelope.write_text(json.dumps(doc))
    r = cli("verify-envelope", envelope, "--json")
    assert r.code == 3 and r.json()["verdict"] == "inconsistent"


@pytest.mark.parametrize("value", ["todo", "Todo-later", "   ", "TODO: fill", "<sha>"])
def test_placeholder_spellings_are_unverifiable(cli: Cli, project: Path, value: str) -> None:
    _, envelope, _ = emit_payload(cli, project)
    doc = json.loads(envelope.read_text())
    doc["integrity"]["value"] = value
    envelope.write_text(json.dumps(doc))
    r = cli("verify-envelope", envelope, "--json", "--strict")
    assert r.json()["verdict"] in ("unverifiable", "malformed") and r.code in (2, 3)
    assert cli("verify-envelope", envelope, "--json").json()["verdict"] in (
        "unverifiable",
        "malformed",
    )


def test_size_bytes_mismatch_is_warned(cli: Cli, project: Path) -> None:
    _, envelope, _ = emit_payload(cli, project)
    doc = json.loads(envelope.read_text())
    doc["artifact"]["size_bytes"] += 5
    envelope.write_text(json.dumps(doc))
    r = cli("verify-envelope", envelope)
    assert r.code == 0 and "eidolons: warning: size_bytes_match: declared=" in r.err


def test_root_fallback_to_the_current_directory_is_said(tmp_path: Path) -> None:
    (tmp_path / "x.md").write_text("x")
    r = run_cli("verify-incoming", "x.md", "--as", "vigil", cwd=tmp_path)
    assert r.code == 0 and "eidolons: note: no .eidolons/ or .git/ above" in r.err


def test_refuse_line_on_stderr_with_json_and_with_stderr_closed(cli: Cli, project: Path) -> None:
    payload, envelope, _ = emit_payload(cli, project)
    assert cli("verify-envelope", envelope).code == 0
    payload.write_text("tampered")
    r = cli("run", "--verify", envelope, "--mode", "warn", "--as", "vigil", "--json")
    assert r.code == 3 and json.loads(r.out)["route"] == "blocked"
    assert r.err.splitlines()[0] == "[vigil-verify-incoming] REFUSE: INTEGRITY_MISMATCH from atlas"
    # stderr closed (2>&-): still a refusal, and nothing falls back to stdout
    proc = subprocess.run(
        [sys.executable, "-m", "eidolons", "verify-incoming", str(payload), "--as", "vigil"],
        cwd=project, env=clean_env(EIDOLONS_MEMORY="off"), stdout=subprocess.PIPE,
        stderr=None, stdin=subprocess.DEVNULL, timeout=30,
        preexec_fn=lambda: __import__("os").close(2),
    )  # fmt: skip
    assert proc.returncode == 3 and proc.stdout == b""


def test_recall_output_is_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    from eidolons.cli.verify_incoming import _print_recall

    _print_recall(
        {
            "backend": "local",
            "records": [{"layer": "x\x1b[2J", "id": "1\n2", "summary": "a\nREFUSE"}],
        }
    )
    err = capsys.readouterr().err
    assert "\x1b" not in err and err.count("\n") == 2 and "\\n" in err


@pytest.mark.parametrize("bad", ["Vigil", "vigil\nREFUSE", "../x", "vigil vigil", ""])
def test_memory_recall_validates_the_receiver_name(cli: Cli, bad: str) -> None:
    r = cli("memory", "recall", "x", "--as", bad)
    assert r.code == 2 and "is not an eidolon slug" in r.err and r.err.count("\n") == 1
    assert cli("memory", "recall", "x", "--as", "vigil@1.9.0").code == 0
