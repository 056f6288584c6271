"""The route gate's COMMAND (``eidolons run ... -- COMMAND``): it runs only after both gates
passed and only after ``--``, never on a placeholder digest or a bad mode, never sees the
secrets, never reads bytes rewritten after the check; the REFUSE line reaches stderr
whatever happens to stdout or stderr."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import clean_env, emit_payload, run_cli
from tests.security._probes import (
    EVIL,
    EVIL_MARK,
    READ_PAYLOAD,
    Cli,
    envelope_of,
    load,
    save,
    trace_of,
    verified,
)


def test_route_command_reads_the_payload_after_the_check(cli: Cli, project: Path) -> None:
    payload = verified(cli, project)
    envelope = envelope_of(payload)
    trace = trace_of(project, envelope)
    receives = trace.read_text().count('"event":"receive"')
    rewritten = threading.Event()

    def agent_in_the_middle() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if trace.read_text().count('"event":"receive"') > receives:  # both gates passed
                payload.write_bytes(EVIL)
                rewritten.set()
                flag.touch()  # the dispatched command goes on
                return
            time.sleep(0.005)

    thread = threading.Thread(target=agent_in_the_middle, daemon=True)
    thread.start()
    flag = project / "rewritten.flag"
    # the command waits (ten seconds at most) until the payload was rewritten, then reads it
    slow_dispatch = (
        f"import os, time; t = time.monotonic() + 10\n"
        f"while not os.path.exists({str(flag)!r}) and time.monotonic() < t: time.sleep(0.005)\n"
        + READ_PAYLOAD
    )
    r = cli(
        "run", "--verify", envelope, "--verify-block", "--as", "vigil", "--",
        sys.executable, "-c", slow_dispatch,
    )  # fmt: skip
    thread.join(5)
    assert rewritten.is_set()
    assert EVIL_MARK not in r.out, "COMMAND acted on bytes rewritten after the gates passed"


def test_route_block_mode_dispatches_a_placeholder_digest(cli: Cli, project: Path) -> None:
    payload, envelope, _ = emit_payload(cli, project)
    payload.write_bytes(EVIL)
    doc = load(envelope)
    doc["integrity"]["value"] = doc["artifact"]["sha256"] = "PARENT_FILLS_SHA256"
    save(envelope, doc)
    r = cli(
        "run", "--verify", envelope, "--verify-block", "--",
        sys.executable, "-c", "print('DISPATCHED')",
    )  # fmt: skip
    assert "DISPATCHED" not in r.out
    assert r.code == 3


def test_bad_mode_in_environment_never_runs_the_command(cli: Cli, project: Path) -> None:
    _, envelope, _ = emit_payload(cli, project)
    for bad in ("bogus", "BLOCK", "off"):
        env = clean_env(EIDOLONS_ECL_VERIFY_MODE=bad)
        r = cli("run", "--verify", envelope, "--", sys.executable, "-c", "print('RAN')", env=env)
        assert r.code == 2 and "RAN" not in r.out


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
