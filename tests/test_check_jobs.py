"""``eidolons check`` uses the cores it has by default (ADR 0022): how many workers a run
gets, that the default really forks on a large input and stays in one process on a small
one, that a worker's error ends the run closed, and that the progress bar follows the
workers' batches. The output itself is the golden record's (``tests/test_check_golden.py``
runs it with ``--jobs 1`` and ``--jobs 2``)."""

from __future__ import annotations

import functools
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import clean_env
from tests.golden_check.corpus import SECTIONS_MD, base_envelope


def test_how_many_workers_a_run_gets(monkeypatch: pytest.MonkeyPatch) -> None:
    from eidolons.gates import checker

    monkeypatch.setattr(checker, "auto_jobs", lambda: 2)
    # the default: every usable CPU, from AUTO_MIN envelopes on; below it, this process
    assert checker.workers_for(checker.AUTO_MIN - 1, None) == 1
    assert checker.workers_for(checker.AUTO_MIN, None) == 2
    assert checker.workers_for(10_000, None) == 2
    # an explicit count is kept, but never below MIN_PER_JOB envelopes a worker
    assert checker.workers_for(10_000, 1) == 1
    assert checker.workers_for(10_000, 8) == 8
    assert checker.workers_for(3 * checker.MIN_PER_JOB, 8) == 3
    assert checker.workers_for(2 * checker.MIN_PER_JOB - 1, 2) == 1
    assert checker.workers_for(0, None) == checker.workers_for(0, 4) == 1
    monkeypatch.setattr(checker, "auto_jobs", lambda: 1)  # one CPU: never a worker
    assert checker.workers_for(10_000, None) == 1


def test_auto_jobs_is_the_affinity_of_this_process() -> None:
    import os

    from eidolons.gates import checker

    if hasattr(os, "sched_getaffinity"):
        assert checker.auto_jobs() == len(os.sched_getaffinity(0))
    assert checker.auto_jobs() >= 1


WHICH_PROCESSES = """
import os, sys
from eidolons.gates import checker
from eidolons.cli.main import main

check = checker._Job.check

def noting(self, path):
    results = check(self, path)
    return [r._replace(reason=str(os.getpid())) if r.id == "E-1" else r for r in results]

checker._Job.check = noting
checker.auto_jobs = lambda: 2  # the same on a 1-CPU and a 64-CPU machine
rc = main(["check", "--json", *sys.argv[1:]])
print(os.getpid(), rc, file=sys.stderr)
"""


def _python(cwd: Path, *argv: str, text: bool = True) -> subprocess.CompletedProcess[Any]:
    """``python ARGV`` in ``cwd``, in the tests' clean environment, output captured,
    bounded (60 s: a hang raises ``TimeoutExpired``)."""
    return subprocess.run(
        [sys.executable, *argv],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=text,
        timeout=60,
    )


def _many_envelopes(root: Path, count: int) -> None:
    payload = SECTIONS_MD.encode()
    (root / ".eidolons").mkdir(parents=True)
    (root / "r.md").write_bytes(payload)
    data = json.dumps(base_envelope(payload, "r.md", 1)).encode()
    for i in range(count):
        (root / f"r{i:04d}.envelope.json").write_bytes(data)


def _pids(root: Path, *argv: str) -> tuple[int, set[str], int]:
    """Run the check with each result's E-1 reason replaced by the pid that decided it:
    (the parent's pid, the pids that decided, the exit code)."""
    proc = _python(root, "-c", WHICH_PROCESSES, *argv)
    parent, rc = proc.stderr.split()
    doc = json.loads(proc.stdout)
    return int(parent), {r["reason"] for r in doc["results"] if r["id"] == "E-1"}, int(rc)


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """AUTO_MIN envelopes (of one valid hand-off) in one directory."""
    from eidolons.gates.checker import AUTO_MIN

    root = tmp_path_factory.mktemp("many")
    _many_envelopes(root, AUTO_MIN)
    return root


@functools.cache
def one_process_json(root: Path) -> bytes:
    """``check . --json --jobs 1`` in ``root`` (exit 0): what every other way of running
    the check must print."""
    proc = _python(root, "-m", "eidolons", "check", ".", "--json", "--jobs", "1", text=False)
    assert proc.returncode == 0, proc.stderr
    return bytes(proc.stdout)


def test_the_default_uses_two_workers_on_a_large_input(many: Path) -> None:
    """On AUTO_MIN envelopes the default forks: the first envelope is decided by the parent
    (what it imports the workers inherit), the rest by the workers (two at most; which
    one takes how many batches is the scheduler's business)."""
    parent, pids, rc = _pids(many, ".")
    assert rc == 0
    assert str(parent) in pids and 2 <= len(pids) <= 3, (parent, pids)
    # --jobs 1 opts out: one process decides everything
    parent, pids, rc = _pids(many, ".", "--jobs", "1")
    assert pids == {str(parent)} and rc == 0


def test_the_default_stays_in_one_process_on_a_small_input(many: Path) -> None:
    from eidolons.gates.checker import AUTO_MIN

    names = sorted(p.name for p in many.glob("*.envelope.json"))[: AUTO_MIN - 1]
    parent, pids, rc = _pids(many, *names)
    assert pids == {str(parent)} and rc == 0


RAISE_IN_WORKER = """
import os, sys
from eidolons.gates import checker
from eidolons.cli.main import main

PARENT = os.getpid()
check = checker._Job.check

def failing(self, path):
    if path.endswith("r0300.envelope.json") and os.getpid() != PARENT:
        raise RuntimeError("a gate broke")
    return check(self, path)

checker._Job.check = failing
sys.exit(main(["check", ".", *sys.argv[1:]]))
"""


@pytest.mark.parametrize("mode", [[], ["--json", "--exit-zero"], ["-q", "--fail-on", "must"]])
def test_an_error_in_a_worker_ends_the_run_as_an_internal_error(
    many: Path, mode: list[str]
) -> None:
    """Fail closed: an exception in a worker is the run's internal error (exit 70, one
    line), never a verdict on the envelopes that did get checked, ``--exit-zero``
    included (it is about findings, not about a run that did not finish)."""
    proc = _python(many, "-c", RAISE_IN_WORKER, "--jobs", "2", *mode)
    assert proc.returncode == 70, proc.stderr
    assert proc.stderr == "eidolons: internal error: RuntimeError: a gate broke\n"
    assert "Result:" not in proc.stdout and '"exit_code"' not in proc.stdout


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_bar_follows_batches() -> None:
    """Workers' batches move ``done`` by up to 256 at a time: the bar is still redrawn
    each time a step boundary is crossed and ends at the total, as when it moved by one."""
    from eidolons.cli.check import _Progress

    def draws(ticks: list[int], total: int) -> list[str]:
        stream = _Tty()
        bar = _Progress(total, stream, shares_screen=False)
        bar.last = -1.0  # the 50 ms throttle aside
        for done in ticks:
            bar.last = -1.0
            bar.tick(done)
        return [d.strip() for d in stream.getvalue().split("\r") if d.strip()]

    one_by_one = draws(list(range(1, 10_001)), 10_000)
    assert len(one_by_one) == 200 and one_by_one[-1].endswith(" 10000/10000")
    batched = draws([1, *range(257, 10_001, 256), 10_000], 10_000)
    assert batched[-1].endswith(" 10000/10000")
    assert len(batched) == 40  # every batch but the parent's first crossed a step of 50


def test_workers_run_at_most_a_window_ahead_of_the_output(many: Path) -> None:
    """A reader that does not take the output (a slow pipe) holds the workers back: at
    most WINDOW batches per worker, the one being written among them, are handed out, so
    the parent never holds the whole run's output; the batches still come in input order
    and add up to every envelope."""
    from eidolons.gates import checker
    from eidolons.io.contracts import ContractSet, load_contracts

    contracts = load_contracts(many, [])
    assert isinstance(contracts, ContractSet)
    paths = sorted(str(p) for p in many.glob("*.envelope.json"))
    submitted: list[int] = []
    real_pool = checker._fork_pool

    def counting_pool(workers: int, job: Any) -> Any:
        pool = real_pool(workers, job)
        assert pool is not None
        submit = pool.submit

        def counted(fn: Any, start: int, stop: int) -> Any:
            submitted.append(start)
            return submit(fn, start, stop)

        # the wrapper takes the three arguments check_batches passes, not the generic
        # (fn, *args, **kwargs) of Executor.submit
        pool.submit = counted  # type: ignore[method-assign,assignment]
        return pool

    checker._fork_pool = counting_pool
    try:
        batches = checker.check_batches(paths, contracts, root=many, key=None, render=len, jobs=2)
        assert next(batches) == (1, 1)  # the parent's first envelope
        assert submitted == []
        first = next(batches)
        assert len(submitted) == checker.WINDOW * 2  # the one written among them
        rest = list(batches)
    finally:
        checker._fork_pool = real_pool
    done = [first[0]] + [d for d, _ in rest]
    assert done == sorted(done) and done[-1] == len(paths)
    assert 1 + first[1] + sum(n for _, n in rest) == len(paths)
    assert submitted == sorted(submitted) and len(submitted) == len(rest) + 1 > 2 * checker.WINDOW


def test_the_default_does_not_fork_a_process_running_other_threads(
    many: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-process callers of the CLI (a server, a test runner) may run threads; a fork
    copies the locks they hold. The default then checks here; ``--jobs N`` still forks."""
    import threading

    from eidolons.gates import checker
    from eidolons.io.contracts import ContractSet, load_contracts

    monkeypatch.setattr(checker, "auto_jobs", lambda: 2)
    contracts = load_contracts(many, [])
    assert isinstance(contracts, ContractSet)
    paths = sorted(str(p) for p in many.glob("*.envelope.json"))
    pools: list[int] = []
    real_pool = checker._fork_pool

    def counting_pool(workers: int, job: Any) -> Any:
        pools.append(workers)
        return real_pool(workers, job)

    monkeypatch.setattr(checker, "_fork_pool", counting_pool)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()
    try:
        run = checker.check_batches(paths, contracts, root=many, key=None, render=len, jobs=None)
        assert sum(n for _, n in run) == len(paths) and pools == []
        run = checker.check_batches(paths, contracts, root=many, key=None, render=len, jobs=2)
        assert sum(n for _, n in run) == len(paths) and pools == [2]
    finally:
        stop.set()
        other.join(timeout=10)
    pools.clear()
    if threading.active_count() == 1:  # the runner's own threads aside: the default forks
        run = checker.check_batches(paths, contracts, root=many, key=None, render=len, jobs=None)
        assert sum(n for _, n in run) == len(paths) and pools == [2]


FORK_FAILS = """
import multiprocessing, os, sys
from eidolons.cli.main import main

fail_at, forks, real_fork = int(sys.argv[1]), [], os.fork

def limited_fork():
    forks.append(1)
    if len(forks) >= fail_at:
        raise BlockingIOError(11, "Resource temporarily unavailable")
    return real_fork()

os.fork = limited_fork
rc = main(["check", ".", "--json", "--jobs", "2"])
os.fork = real_fork
for child in multiprocessing.active_children():  # reaps the stopped ones
    child.join(timeout=10)
print(rc, len(forks), len(multiprocessing.active_children()), file=sys.stderr)
"""


@pytest.mark.parametrize("fail_at", [1, 2])
def test_when_workers_cannot_be_started_the_run_stays_here(many: Path, fail_at: int) -> None:
    """A process limit or a sandbox without fork (``fork`` raises) is found before any
    envelope is handed out, and the run goes on in this process: the same output, exit 0,
    never an internal error nor a hang; a worker forked before the failure (the second
    fork failing) is stopped, not left waiting for tasks."""
    try:
        proc = _python(many, "-c", FORK_FAILS, str(fail_at), text=False)
    except subprocess.TimeoutExpired:
        raise AssertionError("check hangs when a worker cannot be forked") from None
    assert proc.stderr.decode() == f"0 {fail_at} 0\n"
    assert proc.stdout == one_process_json(many)


@pytest.mark.parametrize(
    "error", [NotImplementedError("no sem_open"), PermissionError(13, "/dev/shm")]
)
def test_a_platform_without_working_pools_checks_here(
    many: Path, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    """No working semaphores (the executor raises NotImplementedError) or no /dev/shm
    (OSError): the run, default or ``--jobs N``, goes on in this process."""
    import concurrent.futures

    from eidolons.gates import checker
    from eidolons.io.contracts import ContractSet, load_contracts

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", broken)
    contracts = load_contracts(many, [])
    assert isinstance(contracts, ContractSet)
    paths = sorted(str(p) for p in many.glob("*.envelope.json"))
    run = list(checker.check_batches(paths, contracts, root=many, key=None, render=len, jobs=2))
    assert sum(n for _, n in run) == len(paths) and run[-1][0] == len(paths)
    assert not checker._WORKER_JOB


DIE_AT_START = """
import os, sys
from eidolons.gates import checker
from eidolons.cli.main import main

checker._worker_start = lambda: os._exit(3)  # every worker dies before its first task
sys.exit(main(["check", ".", "--jobs", "2"]))
"""


def test_workers_that_die_at_start_end_the_run_as_an_internal_error(many: Path) -> None:
    """Workers that cannot even take the first task (killed as they start) are not a
    fork that failed: the run ends closed (exit 70, one line, no verdict), not in one
    process after a silent retry, and does not hang on the pool."""
    try:
        proc = _python(many, "-c", DIE_AT_START)
    except subprocess.TimeoutExpired:
        raise AssertionError("check hangs when its workers die at start") from None
    assert proc.returncode == 70, proc.stderr
    assert proc.stderr.startswith("eidolons: internal error: BrokenProcessPool"), proc.stderr
    assert proc.stderr.count("\n") == 1 and "Result:" not in proc.stdout
