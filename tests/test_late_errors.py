"""What a gate records agrees with how it exits, whatever fails after the record (ADR 0003).

Once ``verify-envelope``, ``run --verify`` or ``verify-incoming`` has put its verdict in
the trace, what is left is saying it: a stdout or stderr that is closed, broken (the
reader went away) or full. None of that changes the exit code the verdict decided: a
refusal on record still exits 3 (never 1, 70 or 0), a pass 0. The one exception is the
hand-over itself: a pass whose ``--print-payload`` bytes could not be written exits 3
(the receiver did not get them whole)."""

from __future__ import annotations

import errno
import io
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import clean_env, emit_payload, read_trace, run_cli

FAILURES: dict[str, Callable[[], BaseException]] = {
    "broken": lambda: BrokenPipeError(errno.EPIPE, "Broken pipe"),
    "full": lambda: OSError(errno.ENOSPC, "No space left on device"),
    "closed": lambda: ValueError("I/O operation on closed file."),
}


class Failing(io.TextIOBase):
    """A standard stream every write or flush of which fails (text and ``buffer``)."""

    def __init__(self, failure: str) -> None:
        self.failure = failure
        self.buffer = self  # --print-payload writes bytes to sys.stdout.buffer

    def write(self, s: Any) -> int:
        raise FAILURES[self.failure]()

    def flush(self) -> None:
        raise FAILURES[self.failure]()

    def isatty(self) -> bool:
        return False


def run_with(failing: str, failure: str, argv: list[str], cwd: Path) -> int:
    """``eidolons ARGV`` in-process with stdout or stderr (``failing``) failing."""
    from eidolons.cli.main import main

    saved = dict(os.environ), os.getcwd(), sys.stdout, sys.stderr
    try:
        os.environ.clear()
        os.environ.update(clean_env(EIDOLONS_MEMORY="off"))
        os.chdir(cwd)
        bad, sink = Failing(failure), io.StringIO()
        sys.stdout, sys.stderr = (bad, sink) if failing == "stdout" else (sink, bad)
        return main(argv)
    finally:
        os.environ.clear()
        os.environ.update(saved[0])
        os.chdir(saved[1])
        sys.stdout, sys.stderr = saved[2], saved[3]


def handoff(project: Path, verdict: str) -> tuple[Path, Path, Path]:
    def cli(*args: str | Path, env: dict[str, str] | None = None) -> Any:
        return run_cli(*args, cwd=project, env=env)

    payload, envelope, doc = emit_payload(cli, project)
    if verdict == "fail":
        payload.write_text("# Report\n\n## Decision target\ntampered\n", encoding="utf-8")
    else:
        assert cli("verify-envelope", envelope, "--block").code == 0
    trace = project / ".eidolons/.trace" / f"{doc['thread_id']}.jsonl"
    return payload, envelope, trace


COMMANDS: dict[str, tuple[Callable[[Path, Path], list[str]], str, str]] = {
    # name: (argv, the stream its answer goes to, the gate whose record decides)
    "verify-envelope --json": (
        lambda p, e: ["verify-envelope", str(e), "--block", "--json"],
        "stdout",
        "orchestrator",
    ),
    "verify-envelope": (
        lambda p, e: ["verify-envelope", str(e), "--block"],
        "stderr",
        "orchestrator",
    ),
    "verify-incoming --json": (
        lambda p, e: ["verify-incoming", str(p), "--as", "vigil", "--json"],
        "stdout",
        "receiver",
    ),
    "verify-incoming": (
        lambda p, e: ["verify-incoming", str(p), "--as", "vigil"],
        "stderr",
        "receiver",
    ),
    "verify-incoming --print-payload": (
        lambda p, e: ["verify-incoming", str(p), "--as", "vigil", "--print-payload"],
        "stdout",
        "receiver",
    ),
    "run --verify --json": (
        lambda p, e: ["run", "--verify", str(e), "--as", "vigil", "--json"],
        "stdout",
        "receiver",
    ),
    "run --verify": (
        lambda p, e: ["run", "--verify", str(e), "--as", "vigil"],
        "stderr",
        "receiver",
    ),
}


@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize("verdict", ["pass", "fail"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_late_output_failure_never_changes_the_recorded_verdicts_exit(
    project: Path, command: str, verdict: str, failure: str
) -> None:
    argv, stream, gate = COMMANDS[command]
    payload, envelope, trace = handoff(project, verdict)
    code = run_with(stream, failure, argv(payload, envelope), project)
    if verdict == "fail" and command.startswith("run"):
        gate = "orchestrator"  # the route stops at the orchestrator's refusal
    verdicts = [
        e["event"]
        for e in read_trace(trace)
        if e.get("gate") == gate and e["event"] in ("verify_pass", "verify_fail")
    ]
    recorded = verdicts[-1]
    assert recorded == f"verify_{verdict}", read_trace(trace)
    if verdict == "fail":
        assert code == 3, (command, failure, code)
    elif command.endswith("--print-payload"):
        assert code == 3, (command, failure, code)  # the bytes were not handed over whole
    else:
        assert code == 0, (command, failure, code)


def test_a_broken_pipe_in_a_real_process_exits_with_the_verdict(project: Path) -> None:
    """What a shell sees: ``eidolons verify-envelope ... --json | head -c0`` on a refusal."""
    _, envelope, trace = handoff(project, "fail")
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the gate writes
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "eidolons", "verify-envelope", str(envelope), "--json"],
            cwd=project,
            env=clean_env(),
            stdout=write,
            stderr=subprocess.PIPE,
            timeout=60,
        )
    finally:
        os.close(write)
    assert read_trace(trace)[-1]["event"] == "verify_fail"
    assert proc.returncode == 3, proc.stderr


def test_a_memory_that_fails_to_close_after_a_pass_keeps_the_pass(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass is on record (and ingested) before the memory is closed: a close that
    raises is a note on the memory, not an internal error (exit 70) over a recorded pass."""
    import sqlite3

    from eidolons.memory.local import LocalMemory

    payload, _, trace = handoff(project, "pass")

    def broken_close(self: LocalMemory) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(LocalMemory, "close", broken_close)
    r = run_cli(
        "verify-incoming", payload, "--as", "vigil", "--json", cwd=project,
        env=clean_env(EIDOLONS_MEMORY="local"),
    )  # fmt: skip
    assert read_trace(trace)[-1]["event"] == "receive"
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["status"] == "pass" and "not closed cleanly" in doc["memory"], doc
