"""Every fast path refuses what the full path it stands in for refuses: the fill of the
payload index that the early SKIP and the hook trust (ADR 0018, ADR 0022), ``check
--jobs`` (ADR 0022) whose dying worker ends the run, and a nested project's hand-off read
from the outer root."""

from __future__ import annotations

from pathlib import Path

from eidolons.gates.trigger import find_handoff
from eidolons.io.paths import index_path, rules_out
from tests.conftest import Run, emit_payload
from tests.security._probes import Cli, refused


def _orphaned(cli: Cli, project: Path) -> tuple[Path, Path]:
    """A payload the trace names whose envelope is gone, in a project whose traces
    predate the payload index (written before ADR 0018, or by another tool); and the
    envelope of another hand-off, emitted, not yet verified."""
    payload, envelope, _ = emit_payload(cli, project, "notes/report.md")
    assert cli("verify-envelope", envelope, "--block").code == 0
    _, other, _ = emit_payload(cli, project, "notes/other.md")
    Path(index_path(str(project))).unlink()  # the host's payload index (ADR 0018)
    envelope.unlink()
    assert find_handoff(payload, project.resolve()) is not None  # the full search names it
    return payload, other


def test_an_index_first_made_by_a_trace_file_still_names_the_project_s_payloads(
    cli: Cli, project: Path, tmp_path: Path
) -> None:
    # the first append after the upgrade goes to an explicit --trace FILE: the index it
    # creates must be filled from the project's traces (what the full search reads), not
    # from FILE alone, or every payload those traces name is skipped unread
    payload, other = _orphaned(cli, project)
    elsewhere = tmp_path / "elsewhere.jsonl"
    assert cli("verify-envelope", other, "--block", "--trace", elsewhere).code == 0
    assert Path(index_path(str(project))).is_file()
    assert _hook_gates(payload, project)  # the hook's read rule (ADR 0018)
    assert not rules_out(str(payload), str(project.resolve()))  # the early SKIP's
    assert refused(cli("verify-incoming", payload, "--as", "vigil"))


def _hook_gates(payload: Path, project: Path) -> bool:
    """Whether the hook's read rule sends ``payload`` to the receiver gate."""
    from eidolons.hosts.hook.events import Layout

    return Layout(str(project.resolve()), ()).classify_read(str(payload)) is not None


def test_an_index_fill_reads_every_trace_file_the_full_search_reads(
    cli: Cli, project: Path
) -> None:
    # the full search reads every *.jsonl of the trace directory; a file whose name is no
    # thread id (another tool's, a copy) must be in the fill too
    payload, other = _orphaned(cli, project)
    trace_dir = project / ".eidolons" / ".trace"
    (named,) = [t for t in trace_dir.glob("*.jsonl") if b"notes/report.md" in t.read_bytes()]
    named.rename(trace_dir / "old copy.jsonl")
    assert find_handoff(payload, project.resolve()) is not None
    assert cli("verify-envelope", other, "--block").code == 0  # creates the index
    assert _hook_gates(payload, project)  # the hook's read rule (ADR 0018)
    assert not rules_out(str(payload), str(project.resolve()))  # the early SKIP's
    assert refused(cli("verify-incoming", payload, "--as", "vigil"))


DIE_IN_WORKER = """
import os, sys
from eidolons.gates import checker
from eidolons.cli.main import main

check = checker._Job.check

def dying(self, path):
    if path.endswith("r7.envelope.json") and os.getpid() != PARENT:
        os._exit(9)  # what an OOM kill or a crash does to a worker
    return check(self, path)

PARENT = os.getpid()
checker._Job.check = dying
sys.exit(main(["check", ".", "-q", "--jobs", "2"]))
"""


def test_a_worker_that_dies_ends_check_with_an_error_not_a_hang(cli: Cli, project: Path) -> None:
    import subprocess
    import sys

    from tests.conftest import clean_env

    _, envelope, _ = emit_payload(cli, project, "r.md")
    for i in range(2 * 64):  # enough envelopes for two workers (checker.MIN_PER_JOB each)
        (project / f"r{i}.envelope.json").write_bytes(envelope.read_bytes())
    try:
        proc = subprocess.run(
            [sys.executable, "-c", DIE_IN_WORKER],
            cwd=project,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError("check --jobs hangs when a worker dies") from None
    assert proc.returncode == 70, proc.stderr
    assert proc.stderr.count("\n") == 1 and "internal error" in proc.stderr, proc.stderr


def test_jobs_is_an_ascii_count(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    for value in ("\uff12", "\u0663", "\u0968"):  # fullwidth 2, Arabic-Indic 3, Devanagari 2
        r = run_cli("check", tmp_path, "--jobs", value, cwd=tmp_path)
        assert r.code == 1, (value, r.err)
        assert r.err == f"eidolons: --jobs must be a positive integer or auto, got {value!r}\n"


def _nested_orphan(project: Path) -> Path:
    """``project/sub`` is a project of its own (``.eidolons/``) whose trace names
    ``sub/r.md``; its envelope is then deleted and the bytes rewritten."""
    from tests.conftest import run_cli

    _, outer, _ = emit_payload(  # the outer project has a trace and its payload index
        lambda *a, env=None: run_cli(*a, cwd=project, env=env), project, "outer.md"
    )
    assert run_cli("verify-envelope", outer, "--block", cwd=project).code == 0
    sub = project / "sub"
    (sub / ".eidolons").mkdir(parents=True)

    def cli_sub(*args: str | Path, env: dict[str, str] | None = None) -> Run:
        return run_cli(*args, cwd=sub, env=env)

    payload, envelope, _ = emit_payload(cli_sub, sub, "r.md")
    assert cli_sub("verify-envelope", envelope, "--block").code == 0
    # with its envelope, the outer root refuses it: it is judged by the project holding it
    assert refused(run_cli("verify-incoming", "sub/r.md", "--as", "vigil", cwd=project))
    envelope.unlink()
    payload.write_text("# Report\n\n## Decision target\nrewritten\n")
    assert refused(cli_sub("verify-incoming", "r.md", "--as", "vigil"))  # its own root
    return payload


def test_a_nested_project_s_hand_off_without_its_envelope_is_not_skipped(
    cli: Cli, project: Path
) -> None:
    payload = _nested_orphan(project)
    # deleting the envelope must not turn that refusal into a SKIP (exit 0): neither the
    # early decision nor the full rule may rule it out by the outer root's trace alone
    assert not rules_out(str(payload), str(project.resolve()))
    assert find_handoff(payload, project.resolve()) is not None
    r = cli("verify-incoming", "sub/r.md", "--as", "vigil")
    assert refused(r), r.err
    assert "project at" in r.err


def test_the_hook_sends_a_nested_project_s_orphaned_hand_off_to_the_gate(
    cli: Cli, project: Path
) -> None:
    from eidolons.hosts.hook.events import Layout

    payload = _nested_orphan(project)
    root = str(project.resolve())
    assert Layout(root, ()).classify_read(str(payload)) is not None


def test_a_nested_project_s_plain_file_is_still_skipped_early(cli: Cli, project: Path) -> None:
    _nested_orphan(project)
    plain = project / "sub" / "notes.txt"
    plain.write_text("not a hand-off\n")
    assert rules_out(str(plain), str(project.resolve()))  # both projects' rules rule it out
    r = cli("verify-incoming", "sub/notes.txt", "--as", "vigil")
    assert r.code == 0 and "SKIP" in r.err, r.err
