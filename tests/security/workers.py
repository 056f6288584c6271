"""``check``'s parallel workers (ADR 0022) in a hostile environment: a worker killed, a
parent killed by a signal, forks refused, closed or full output streams, hostile
envelopes. The run is never a pass it would not be in one process, and never hangs."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import clean_env
from tests.test_check_jobs import _python

DIE_IN_WORKER = """
import os, signal, sys
from eidolons.gates import checker
from eidolons.cli.main import main
PARENT = os.getpid()
check = checker._Job.check
def dying(self, path):
    if path.endswith("r0300.envelope.json") and os.getpid() != PARENT:
        os.kill(os.getpid(), signal.SIGKILL)
    return check(self, path)
checker._Job.check = dying
checker.auto_jobs = lambda: 2
sys.exit(main(["check", ".", *sys.argv[1:]]))
"""


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from eidolons.gates.checker import AUTO_MIN
    from tests.test_check_jobs import _many_envelopes

    root = tmp_path_factory.mktemp("many")
    _many_envelopes(root, AUTO_MIN + 8)
    return root


@pytest.mark.parametrize("mode", [[], ["--exit-zero"], ["--json", "--exit-zero"]])
def test_a_worker_killed_mid_run_is_an_internal_error_never_a_pass(
    many: Path, mode: list[str]
) -> None:
    proc = _python(many, "-c", DIE_IN_WORKER, *mode)
    assert proc.returncode == 70, proc.stderr
    assert proc.stderr.startswith("eidolons: internal error: BrokenProcessPool")
    assert proc.stderr.count("\n") == 1
    assert "Result:" not in proc.stdout and '"exit_code"' not in proc.stdout


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """More envelopes than the default's fork threshold, most of them hostile: bad JSON,
    an overflowing number, a duplicate key, a FIFO, a link out of the root, a payload
    rewritten, a directory named like an envelope."""
    import shutil

    from eidolons.gates.checker import AUTO_MIN
    from tests.test_check_jobs import _many_envelopes

    root = tmp_path_factory.mktemp("hostile")
    _many_envelopes(root, AUTO_MIN + 40)
    good = (root / "r0000.envelope.json").read_text()
    outside = tmp_path_factory.mktemp("outside") / "x.envelope.json"
    outside.write_text(good)
    (root / "other.md").write_text("# other\n")
    for i in range(0, AUTO_MIN + 40, 7):
        path = root / f"r{i:04d}.envelope.json"
        kind = i % 6
        path.unlink()
        if kind == 0:
            path.write_text(good[: len(good) // 2])
        elif kind == 1:
            path.write_text(good.rstrip().rstrip("}") + ', "x": 1e999}')
        elif kind == 2:
            path.write_text(good.rstrip().rstrip("}") + ', "to": {}}')
        elif kind == 3:
            os.mkfifo(path)
        elif kind == 4:
            path.symlink_to(outside)
        else:
            path.write_text(good.replace('"r.md"', '"other.md"'))
    (root / "zdir.envelope.json").mkdir()
    shutil.copy(root / "r.md", root / "r-copy.md")
    return root


@pytest.mark.parametrize("mode", [[], ["--json", "--strict"]])
def test_the_default_s_findings_are_those_of_one_process_on_hostile_input(
    hostile: Path, mode: list[str]
) -> None:
    runs = []
    for jobs in ([], ["--jobs", "1"]):
        proc = _python(hostile, "-m", "eidolons", "check", ".", *jobs, *mode, text=False)
        runs.append((proc.returncode, proc.stdout, proc.stderr))
    assert runs[0][0] == 2, runs[0][2]
    assert runs[0] == runs[1]


_SIGNAL_PARENT = """
import os, signal, sys
from eidolons.gates import checker
from eidolons.cli.main import main
PARENT = os.getpid()
check = checker._Job.check
def signalling(self, path):
    if path.endswith("r0300.envelope.json") and os.getpid() != PARENT:
        os.kill(PARENT, int(sys.argv[1]))
    return check(self, path)
checker._Job.check = signalling
checker.auto_jobs = lambda: 2
sys.exit(main(["check", "."]))
"""


_FORK_FAILS = """
import errno, os, sys
from eidolons.gates import checker
from eidolons.cli.main import main
real, forks = os.fork, []
def fork():
    forks.append(1)
    if len(forks) > int(sys.argv[1]):  # RLIMIT_NPROC reached (root is not bound by it)
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
    return real()
os.fork = fork
checker.auto_jobs = lambda: 3
sys.exit(main(["check", ".", *sys.argv[2:]]))
"""


@pytest.fixture(scope="module")
def envelopes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from eidolons.gates.checker import AUTO_MIN
    from tests.test_check_jobs import _many_envelopes

    root = tmp_path_factory.mktemp("envelopes")
    _many_envelopes(root, AUTO_MIN + 8)
    return root


@pytest.fixture(scope="module")
def one_process(envelopes: Path) -> subprocess.CompletedProcess[bytes]:
    return _python(envelopes, "-m", "eidolons", "check", ".", "--jobs", "1", text=False)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_a_signal_that_kills_the_parent_mid_run_takes_its_workers_with_it(
    envelopes: Path, sig: int
) -> None:
    # ADR 0022: killed by a signal it does not handle, the parent of a
    # parallel run left its workers waiting forever on the task queue (they hold its
    # write end), holding the run's output pipe open: `check . | head`, a CI step or the
    # host's tool call reading its output hung, and the workers stayed
    proc = subprocess.Popen(
        [sys.executable, "-c", _SIGNAL_PARENT, str(int(sig))],
        cwd=envelopes,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("the run's output never ended: its workers outlived the parent")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == -sig  # as `--jobs 1` killed so: never a pass
    assert b"Result:" not in out


@pytest.mark.parametrize("forks", [0, 1, 2])
def test_workers_that_cannot_all_be_forked_give_the_one_process_findings(
    envelopes: Path, one_process: subprocess.CompletedProcess[bytes], forks: int
) -> None:
    # a process limit reached after `forks` workers: the run is checked in this process,
    # its output and exit code those of `--jobs 1`
    proc = _python(envelopes, "-c", _FORK_FAILS, str(forks), text=False)
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        one_process.returncode,
        one_process.stdout,
        one_process.stderr,
    )


@pytest.mark.parametrize(
    "how", ["stdin-closed", "stderr-closed", "stdout-closed", "stdout-full", "head-1", "json-head"]
)
def test_the_default_in_a_hostile_shell_is_the_one_process_run(envelopes: Path, how: str) -> None:
    # a closed stdin, stdout or stderr, a full disk, a reader that stops after one line
    # (SIGPIPE is ignored by Python: BrokenPipeError): the same exit code and output as
    # `--jobs 1` (a usage line, a one-line internal error), no hang
    fmt = " --json" if how == "json-head" else ""
    redirect = {
        "stdin-closed": " <&-",
        "stderr-closed": " 2>&-",
        "stdout-closed": " >&-",
        "stdout-full": " >/dev/full",
    }.get(how, "")
    pipe = {"head-1": " | head -1", "json-head": " | head -1"}.get(
        how, "" if redirect[:2] == " >" else " | cat"
    )
    runs = []
    for jobs in ("", " --jobs 1"):
        command = (
            f'"{sys.executable}" -m eidolons check .{fmt}{jobs}{redirect}{pipe}; '
            'echo "rc=${PIPESTATUS[0]}"'
        )
        proc = subprocess.run(
            ["bash", "-c", command],
            cwd=envelopes,
            env=clean_env(),
            capture_output=True,
            timeout=60,
        )
        runs.append((proc.stdout, proc.stderr))
    assert runs[0] == runs[1]
    assert b"Traceback" not in runs[0][1] and runs[0][1].count(b"\n") <= 1
    # a run whose output was lost is never a pass
    assert (b"rc=0\n" in runs[0][0]) == (how in ("stdin-closed", "stderr-closed")), runs[0]
