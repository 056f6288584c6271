"""Real processes (ADR 0024): what only a process shows. The console script, exit codes
across a real exit, binary stdout, and a FIFO planted where each command reads never
hanging it. Every spawn has a bounded timeout: a hang is a failure, not a stuck suite."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import clean_env

TIMEOUT = 30


def spawn(
    *args: str | Path, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "eidolons", *map(str, args)],
        cwd=cwd,
        env=env or clean_env(),
        capture_output=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / ".eidolons").mkdir(parents=True)
    return root


def emit(proj: Path, name: str, body: bytes) -> Path:
    payload = proj / name
    payload.parent.mkdir(parents=True, exist_ok=True)
    payload.write_bytes(body)
    r = spawn(
        "emit", payload, "--from", "atlas@1.4.2", "--to", "vigil@1.9.0",
        "--performative", "PROPOSE", "--kind", "scout-report", "--objective", "o",
        cwd=proj,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return payload.with_suffix(".envelope.json")


def test_the_console_script_runs() -> None:
    script = shutil.which("eidolons", path=str(Path(sys.executable).parent))
    if script is None:
        if os.environ.get("CI") == "true":
            pytest.fail("the eidolons console script is not installed")
        pytest.skip("the eidolons console script is not installed in this environment")
    r = subprocess.run([script, "--version"], capture_output=True, timeout=TIMEOUT)
    assert r.returncode == 0 and b"eidolons" in r.stdout + r.stderr


def test_exit_codes_across_a_real_exit(proj: Path) -> None:
    envelope = emit(proj, "handoff/r.md", b"# r\n\n## Decision target\nx\n")
    assert spawn("verify-envelope", envelope, "--block", cwd=proj).returncode == 0
    (proj / "handoff/r.md").write_bytes(b"# rewritten\n")
    assert spawn("verify-envelope", envelope, "--block", cwd=proj).returncode == 3
    assert spawn("verify-envelope", "--no-such-option", cwd=proj).returncode == 2


def test_print_payload_writes_the_exact_bytes_binary_included(proj: Path) -> None:
    body = bytes(range(256)) + b"\xff\xfe not UTF-8 \r\n\x00"
    envelope = emit(proj, "handoff/blob.bin", body)
    assert spawn("verify-envelope", envelope, "--block", cwd=proj).returncode == 0
    r = spawn("verify-incoming", proj / "handoff/blob.bin", "--as", "vigil", "--print-payload",
              cwd=proj)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout == body


def _fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


# each command line, built over a project whose named input is a FIFO
COMMANDS: dict[str, Callable[[Path], tuple[str | Path, ...]]] = {
    "verify-envelope": lambda p: ("verify-envelope", _fifo(p / "f.envelope.json"), "--block"),
    "verify-incoming": lambda p: (
        "verify-incoming", _fifo(p / "h/f.envelope.json").parent / "f.md", "--as", "vigil",
    ),
    "run": lambda p: ("run", "--verify", _fifo(p / "f.envelope.json"), "--as", "vigil"),
    "check": lambda p: ("check", _fifo(p / "f.envelope.json")),
    "emit": lambda p: (
        "emit", _fifo(p / "f.md"), "--from", "atlas", "--to", "vigil", "--performative",
        "INFORM", "--kind", "scout-report", "--objective", "o",
    ),
    "memory ingest": lambda p: ("memory", "ingest", _fifo(p / "f.envelope.json")),
    "trace show": lambda p: ("trace", "show", _fifo(p / ".eidolons/.trace/t1.jsonl")),
    "contracts list": lambda p: (
        "contracts", "list", "--contracts", _fifo(p / "c/atlas-to-vigil.yaml").parent,
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_fifo_never_hangs_a_command(proj: Path, name: str) -> None:
    """Nothing ever opens the FIFO's other end: a blocking open or read would hang the
    command until the timeout, which fails the test."""
    args = COMMANDS[name](proj)
    r = spawn(*args, cwd=proj)
    assert r.returncode not in (0, 70), (name, r.returncode, r.stderr)
    assert b"Traceback" not in r.stderr


def test_the_help_of_every_command_is_in_the_readme(proj: Path) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    r = spawn("--help", cwd=proj)
    assert r.returncode == 0
    listed = json.dumps(r.stdout.decode())
    for command in ("emit", "verify-envelope", "run", "verify-incoming", "check", "trace"):
        assert command in listed and f"eidolons {command}" in readme, command
