"""The trace and the envelope deleted, truncated, replaced or raced: a trace that is a link,
not a file, damaged or cut short, and an envelope removed in transit, never carry a pass,
crash or hang a gate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import clean_env, emit_cmd, emit_payload, read_trace
from tests.security._probes import (
    EVIL,
    TAMPERED,
    Cli,
    envelope_of,
    load,
    no_crash,
    trace_of,
    verified,
)
from tests.test_receipts import Project
from tests.test_receiver import incoming


def test_a_truncated_trace_tail_is_detected(signed: Project) -> None:
    payload, envelope = signed.emit()
    assert signed.verify(envelope).code == 0
    payload.write_text(TAMPERED)
    assert signed.verify(envelope).code == 3  # the orchestrator's verify_fail, on record
    (trace,) = (signed.root / ".eidolons" / ".trace").glob("*.jsonl")
    lines = trace.read_bytes().splitlines(keepends=True)
    trace.write_bytes(b"".join(lines[:-1]))  # the agent drops the verify_fail
    r = signed.cli("trace", "verify", trace)
    assert r.code == 3, r


def test_emit_force_out_rewrites_the_trace(cli: Cli, project: Path) -> None:
    payload = verified(cli, project)
    trace = trace_of(project, envelope_of(payload))
    history = trace.read_bytes()
    other = project / "other.md"
    other.write_text("# other\n")
    cli(*emit_cmd(other, "--out", trace, "--force"))
    assert trace.read_bytes().startswith(history), "the trace was rewritten"


@pytest.mark.parametrize("kind", ["directory", "fifo", "trace-dir-is-a-file"])
def test_non_regular_trace_crashes_the_receiver(cli: Cli, project: Path, kind: str) -> None:
    payload = verified(cli, project)
    trace = trace_of(project, envelope_of(payload))
    if kind == "trace-dir-is-a-file":
        for f in trace.parent.iterdir():
            f.unlink()
        trace.parent.rmdir()
        trace.parent.write_text("not a directory")
    else:
        trace.unlink()
        trace.mkdir() if kind == "directory" else os.mkfifo(trace)
    r = incoming(cli, payload, "vigil", "--print-payload")
    assert r.out == ""
    no_crash(r)
    assert r.code == 3


def test_lone_surrogate_in_trace_record_crashes_receiver_json(cli: Cli, project: Path) -> None:
    payload = verified(cli, project)
    trace = trace_of(project, envelope_of(payload))
    record = [e for e in read_trace(trace) if e.get("gate") == "orchestrator"][-1]
    with trace.open("a") as fh:  # json.dumps writes the escape \ud800, valid JSON text
        fh.write(json.dumps({**record, "x_note": "\ud800"}) + "\n")
    r = incoming(cli, payload, "vigil", "--json")
    no_crash(r)
    assert r.code == 0 and r.json()["status"] == "pass"


def test_lone_surrogate_in_trace_crashes_trace_show(cli: Cli, project: Path) -> None:
    payload = verified(cli, project)
    trace = trace_of(project, envelope_of(payload))
    with trace.open("a") as fh:
        fh.write(json.dumps({"event": "note", "from": "\ud800"}) + "\n")
    r = cli("trace", "show", trace, "--json")
    no_crash(r)
    assert r.code == 0


def test_huge_line_in_trace_hangs_the_receiver(cli: Cli, project: Path) -> None:
    payload = verified(cli, project)
    trace = trace_of(project, envelope_of(payload))
    os.truncate(trace, trace.stat().st_size + 128 * 1024 * 1024)  # NUL bytes, no newline
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "eidolons", "verify-incoming", str(payload), "--as", "vigil"],
            cwd=project,
            env=clean_env(EIDOLONS_MEMORY="off"),
            capture_output=True,
            timeout=30,  # a hang, not a speed: 0.4 s alone, seconds beside the real-host tests
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the receiver gate did not decide within 30 s")
    assert proc.returncode in (0, 3)


def test_symlinked_thread_trace_never_carries_a_pass(cli: Cli, project: Path) -> None:
    """The trace replaced by a link to a file the attacker wrote: the orchestrator refuses
    to append through it (block mode exits 3 even on a pass), the receiver cannot record
    its pass and hands nothing over."""
    payload = verified(cli, project)
    envelope = envelope_of(payload)
    trace = trace_of(project, envelope)
    forged = project.parent / "forged.jsonl"
    forged.write_bytes(trace.read_bytes())
    trace.unlink()
    trace.symlink_to(forged)
    r = cli("verify-envelope", envelope, "--block")
    assert r.code == 3 and "trace not written" in r.err
    r = incoming(cli, payload, "vigil", "--print-payload")
    assert r.code == 3 and r.out == "" and "trace not written" in r.err
    r = cli("run", "--verify", envelope, "--verify-block", "--", sys.executable, "-c", "print(1)")
    assert r.code == 3 and r.out == ""


def test_explicit_trace_file_that_is_a_symlink_blocks_a_pass(cli: Cli, project: Path) -> None:
    _, envelope, _ = emit_payload(cli, project)
    link = project / "t.jsonl"
    link.symlink_to(project / "elsewhere.jsonl")
    r = cli("verify-envelope", envelope, "--block", "--trace", link)
    assert r.code == 3 and "trace not written" in r.err
    assert not (project / "elsewhere.jsonl").exists()


JUNK_LINES = [
    b"\x00\xff\xfe binary junk \x80\n",
    b"[" * 50_000 + b"\n",
    b'"a string, not an object"\n',
    b'{"event": "verify_pass", "size": ' + b"9" * 5000 + b"}\n",
    b'{"event": "verify_pass", "n": NaN}\n',
    b"\n\n   \n",
]


def test_junk_in_the_trace_neither_crashes_nor_passes_a_tamper(cli: Cli, project: Path) -> None:
    payload = verified(cli, project)
    trace = trace_of(project, envelope_of(payload))
    with trace.open("ab") as fh:
        fh.write(b"".join(JUNK_LINES))
    assert incoming(cli, payload, "vigil").code == 0  # the honest hand-off still passes
    r = cli("trace", "show", trace)
    assert r.code == 0 and "damaged line skipped" in r.err
    payload.write_bytes(EVIL)
    r = incoming(cli, payload, "vigil", "--print-payload")
    assert r.code == 3 and r.out == "" and "INTEGRITY_MISMATCH" in r.err


def test_envelope_removed_in_transit_is_refused(cli: Cli, project: Path) -> None:
    """An agent in the middle deletes the envelope and rewrites the payload: the trace
    names the payload (emit and verify events), so the receiver refuses UNVERIFIED."""
    payload = verified(cli, project)
    thread = load(envelope_of(payload))["thread_id"]
    envelope_of(payload).unlink()
    payload.write_bytes(EVIL)
    r = incoming(cli, payload, "vigil", "--print-payload")
    assert r.code == 3 and r.out == ""
    lines = r.err.splitlines()
    assert lines[0] == "[vigil-verify-incoming] REFUSE: UNVERIFIED from atlas"
    assert lines[1].startswith("[vigil-verify-incoming] reason: ")
    assert "has no envelope" in lines[1] and "the trace names it" in lines[1]
    event = read_trace(project / ".eidolons" / ".trace" / f"{thread}.jsonl")[-1]
    assert event["event"] == "verify_fail" and event["verify_failure_code"] == "UNVERIFIED"
    assert event["gate"] == "receiver"
    assert event["payload_path"] == payload.relative_to(project).as_posix()


def test_trace_show_refuses_special_files_without_hanging(cli: Cli, project: Path) -> None:
    fifo = project / "t.jsonl"
    os.mkfifo(fifo)
    r = cli("trace", "show", fifo)
    assert r.code == 1 and "no trace" in r.err
    r = cli("trace", "show", "../../etc/passwd")
    assert r.code == 2 and "not a valid thread id" in r.err


def test_emit_that_cannot_record_leaves_no_new_envelope(cli: Cli, project: Path) -> None:
    # ADR 0006: the envelope is placed before its event; when the trace cannot be
    # written (here the agent made the trace directory a file), emit fails and the
    # envelope it would have replaced (--force) is back, byte for byte
    payload, envelope, _ = emit_payload(cli, project, "notes/placed.md")
    before = envelope.read_bytes()
    trace_dir = project / ".eidolons" / ".trace"
    trace_dir.rename(project / "moved-trace")
    trace_dir.write_text("not a directory\n")
    payload.write_text("# rewritten\n\n## Decision target\ny\n")
    r = cli(*emit_cmd(payload, "--force", sender="atlas", to="vigil"))
    assert r.code != 0 and "Traceback" not in r.err
    assert envelope.read_bytes() == before
    trace_dir.unlink()
    fresh = project / "notes" / "fresh.md"
    fresh.write_text("# fresh\n\n## Decision target\nx\n")
    trace_dir.symlink_to(project / "moved-trace", target_is_directory=True)
    r = cli(*emit_cmd(fresh, sender="atlas", to="vigil"))
    assert r.code != 0 and "Traceback" not in r.err
    assert not (project / "notes" / "fresh.envelope.json").exists()


@pytest.mark.parametrize(
    "read",
    [
        ("trace", "show", "T"),
        ("trace", "verify", "T"),
        ("trace", "graph", "T"),
        ("trace", "list"),
        "mcp",
    ],
)
def test_a_trace_past_the_scan_bound_is_refused_by_every_reader_unread(
    cli: Cli, project: Path, read: tuple[str, ...] | str
) -> None:
    """A thread's trace made huge (a sparse hole of gigabytes is one truncate) is refused
    past the scan bound by the readers of a whole thread, as the gates' scans refuse it:
    never read to its end (a hang), nor held whole (trace verify read it into memory)."""
    from eidolons.hosts.mcp.tools import Toolbox
    from tests.conftest import trace_files

    verified(cli, project)
    (trace,) = trace_files(project)
    with trace.open("r+b") as fh:
        fh.truncate(8 * 1024 * 1024)  # a hole past the bound set below
    env = clean_env(EIDOLONS_MAX_TRACE_SCAN_BYTES=str(1024 * 1024))
    if read == "mcp":
        os.environ["EIDOLONS_MAX_TRACE_SCAN_BYTES"] = env["EIDOLONS_MAX_TRACE_SCAN_BYTES"]
        try:
            reply = Toolbox(project, bound="vigil").trace_show(trace.stem)
        finally:
            del os.environ["EIDOLONS_MAX_TRACE_SCAN_BYTES"]
        assert reply.is_error and "scan bound" in reply.text, reply.text
        return
    r = cli(*(trace.stem if arg == "T" else arg for arg in read), env=env)
    assert r.code != 70, r.err  # each view's own answer for a trace it cannot read
    assert read[1] != "verify" or r.code != 0, r.err  # never a pass of what was not read
    assert "scan bound" in r.err and "Traceback" not in r.err, r.err


def test_a_trace_grown_past_the_bound_while_it_is_read_is_refused_not_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``trace verify`` reads a thread once: a trace that grows past the scan bound between
    its size check and its read is refused, never verified as the prefix that was read."""
    from eidolons.errors import InputError
    from eidolons.trace import log

    trace = tmp_path / "t.jsonl"
    trace.write_bytes(b'{"seq":1}\n')
    monkeypatch.setenv("EIDOLONS_MAX_TRACE_SCAN_BYTES", "4096")
    real = log.open_whole_trace

    def grown(path: Path, offset: int = 0) -> int:
        fd = real(path, offset)  # measured: within the bound
        with path.open("ab") as fh:  # an appender, or the agent, grows it now
            fh.write(b'{"seq":2}\n' * 1000)
        return fd

    monkeypatch.setattr(log, "open_whole_trace", grown)
    with pytest.raises(InputError, match="scan bound"):
        log.read_snapshot(trace)
