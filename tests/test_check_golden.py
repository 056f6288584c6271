"""``eidolons check`` gives, byte for byte, the output recorded before the speed work:
stdout, stderr and exit code of every run in
:data:`tests.golden_check.corpus.RUNS` (plain, ``-q``, ``--json``, level filters,
``--strict``, HMAC key set / wrong / unset, size caps, several PATHs, usage errors) on
the generated corpus and on the twelve upstream fixtures.

A faster checker that changes one reason, one order or one exit code fails here, and the
message shows the first lines that differ.
"""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from eidolons.io.contracts import ContractSetUnavailable
from tests.conftest import FIXTURES
from tests.golden_check import corpus

EXPECTED = corpus.decode(corpus.EXPECTED.read_bytes())


def check_many(paths: list[str], contracts: Any, *, jobs: int | None = 1, **kw: Any) -> list[Any]:
    """Every envelope's results, in the order of ``paths``, checked with ``jobs``."""
    from eidolons.gates.checker import check_batches

    batches = check_batches(paths, contracts, render=list, jobs=jobs, **kw)
    return [results for _, batch in batches for results in batch]


@pytest.fixture(scope="module")
def golden_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("golden").resolve() / "project"
    corpus.build(root, FIXTURES)
    return root


@pytest.fixture(scope="module", params=[1, 2], ids=["jobs-1", "jobs-2"])
def golden_runs(request: pytest.FixtureRequest, golden_root: Path) -> dict[str, dict[str, Any]]:
    """Every run twice: in this process only (``--jobs 1``) and with two forked workers
    (``--jobs 2``: every run of 128 envelopes or more; the corpus has 547, the fixtures'
    runs stay in one process). The workers check *and render* their batches (ADR 0022):
    the same bytes are asked of them. The default (``auto`` from
    :data:`eidolons.gates.checker.AUTO_MIN` envelopes on) is one of these two."""
    from eidolons.gates import checker

    forked: list[int] = []
    real_pool = checker._fork_pool

    def counting_pool(workers: int, job: Any) -> Any:
        forked.append(workers)
        return real_pool(workers, job)

    checker._fork_pool = counting_pool
    try:
        runs = dict(corpus.run_all(golden_root, jobs=request.param))
    finally:
        checker._fork_pool = real_pool
    return {**runs, _FORKED: {"jobs": request.param, "pools": forked}}


_FORKED = "<pools started>"  # not a run: how many runs used worker processes


def test_the_worker_runs_did_use_workers(golden_runs: dict[str, dict[str, Any]]) -> None:
    """The ``jobs-2`` runs are not one process under another name: the ten runs on the
    whole corpus started two workers each; ``--jobs 1`` started none."""
    forked = golden_runs[_FORKED]
    if forked["jobs"] == 1:
        assert forked["pools"] == []
    else:
        assert len(forked["pools"]) >= 10 and set(forked["pools"]) == {2}, forked


def _diff(expected: bytes, actual: bytes) -> str:
    lines = difflib.unified_diff(
        expected.decode("utf-8", "backslashreplace").splitlines(),
        actual.decode("utf-8", "backslashreplace").splitlines(),
        "expected",
        "actual",
        n=1,
        lineterm="",
    )
    return "\n".join(list(lines)[:40])


def test_the_corpus_covers_every_run() -> None:
    assert set(EXPECTED) == set(corpus.RUNS)


@pytest.mark.parametrize("name", sorted(corpus.RUNS))
def test_output_is_identical(name: str, golden_runs: dict[str, dict[str, Any]]) -> None:
    if name.startswith("fixtures") and not FIXTURES.is_dir():
        pytest.skip(f"upstream conformance fixtures not found at {FIXTURES}")
    expected, actual = EXPECTED[name], golden_runs[name]
    assert actual["argv"] == expected["argv"] and actual["env"] == expected["env"]
    assert actual["stdout"] == expected["stdout"], _diff(expected["stdout"], actual["stdout"])
    assert actual["stderr"] == expected["stderr"], _diff(expected["stderr"], actual["stderr"])
    assert actual["code"] == expected["code"]


def test_the_corpus_is_what_was_recorded(tmp_path: Path, golden_root: Path) -> None:
    """The generator is deterministic: a second tree is the same as the one checked (so
    the expected output is about these inputs, not a tree that changed under it)."""
    again = tmp_path / "project"
    corpus.build(again, None)

    def listing(root: Path) -> list[tuple[str, bytes]]:
        out = []
        for p in sorted((root / "corpus").rglob("*")):
            rel = str(p.relative_to(root))
            if p.is_symlink():
                link = str(p.readlink()).replace(str(root.parent), "")
                out.append((rel, f"-> {link}".encode()))
            elif p.is_file():
                out.append((rel, p.read_bytes()))
        return out

    assert listing(again) == listing(golden_root)
    assert len([p for p in again.rglob("*.envelope.json") if p.is_file()]) > 500


@pytest.mark.parametrize("name", ["json", "quiet-wrong-key"])
def test_worker_processes_give_the_same_output(name: str, golden_root: Path) -> None:
    """``--jobs 2`` (547 envelopes: two forked workers) prints what one process printed
    before the speed work, byte for byte, in the same order, with the same exit code. A
    real process: forking the test runner (and its threads) is not what a user runs."""
    argv, extra = corpus.RUNS[name]
    real = [a.replace("{R}", str(golden_root)) for a in argv]
    env = {**corpus._base_env(), **extra}
    proc = subprocess.run(
        [sys.executable, "-m", "eidolons", "check", *real, "--jobs", "2"],
        cwd=golden_root,
        env=env,
        capture_output=True,
        timeout=120,
    )
    root_b, token = os.fsencode(str(golden_root)), corpus.ROOT_TOKEN.encode()
    expected = EXPECTED[name]
    out = proc.stdout.replace(root_b, token)
    assert out == expected["stdout"], _diff(expected["stdout"], out)
    assert proc.stderr.replace(root_b, token) == expected["stderr"]
    assert proc.returncode == expected["code"]


def test_check_many_in_one_process_is_check_envelope_in_order(golden_root: Path) -> None:
    from eidolons.gates.checker import check_envelope
    from eidolons.io.contracts import load_contracts

    root = golden_root
    contracts = load_contracts(root, [])
    assert not isinstance(contracts, ContractSetUnavailable)
    paths = sorted(str(p) for p in (root / "corpus" / "ise").glob("*.envelope.json"))
    one = [check_envelope(Path(p), contracts, root=root, key=None) for p in paths]
    assert check_many(paths, contracts, root=root, key=None) == one
    # too few envelopes for two workers (fewer than MIN_PER_JOB each): one process
    assert check_many(paths, contracts, root=root, key=None, jobs=2) == one


def test_check_many_without_fork_checks_in_this_process(
    golden_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import multiprocessing

    from eidolons.gates import checker
    from eidolons.io.contracts import load_contracts

    def no_fork(method: str | None = None) -> Any:
        raise ValueError(f"cannot find context for {method!r}")

    monkeypatch.setattr(multiprocessing, "get_context", no_fork)
    root = golden_root
    contracts = load_contracts(root, [])
    assert not isinstance(contracts, ContractSetUnavailable)
    paths = sorted(str(p) for p in (root / "corpus" / "mixed").rglob("*.envelope.json"))
    assert len(paths) >= 2 * checker.MIN_PER_JOB
    serial = check_many(paths, contracts, root=root, key=None)
    assert check_many(paths, contracts, root=root, key=None, jobs=4) == serial
    assert not checker._WORKER_JOB


def test_a_worker_that_dies_ends_the_run_as_an_internal_error(golden_root: Path) -> None:
    """Fail closed: a worker killed mid-run (here: it exits on one envelope) makes the
    command exit 70 with one line, never hang and never print a verdict on a partial run
    (``corpus/mixed`` fails, so "no OK" alone would hold for a checker that went on)."""
    script = (
        "import os, sys\n"
        "from eidolons.gates import checker\n"
        "from eidolons.cli.main import main\n"
        "real = checker._Job.check\n"
        "def dying(self, path):\n"
        "    if path.endswith('m100.envelope.json'):\n"
        "        os._exit(9)\n"
        "    return real(self, path)\n"
        "checker._Job.check = dying\n"
        "sys.exit(main(['check', sys.argv[1], '--jobs', '2', '-q']))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(golden_root / "corpus" / "mixed")],
        cwd=golden_root,
        env=corpus._base_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 70, proc.stderr
    assert proc.stderr.startswith("eidolons: internal error: BrokenProcessPool"), proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr  # one line, no traceback
    assert "Result:" not in proc.stdout
