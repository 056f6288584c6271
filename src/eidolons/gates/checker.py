"""The conformance checker's shell (``eidolons check``): read each envelope and its
payload (resolved by :mod:`eidolons.io.payload`, read once), decide with
:mod:`eidolons.ecl.rules`, in this process or in forked workers (ADR 0022).
"""

from __future__ import annotations

import os
import sys
from collections import deque
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from eidolons.ecl.envelope import GateResult
from eidolons.ecl.grammar import Limits
from eidolons.ecl.rules.integrity import PayloadFacts, PayloadUnavailable
from eidolons.ecl.rules.run import results_after_e1, run_gates
from eidolons.errors import InputError
from eidolons.io.paths import realpath
from eidolons.io.payload import (
    PayloadError,
    candidates,
    hash_payload,
    locate_payload,
    read_envelope,
)

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

    from eidolons.ecl.contract import ContractSet

__all__ = ["check_batches", "check_envelope", "read_payload_facts", "workers_for"]


def read_payload_facts(
    envelope_path: str | os.PathLike[str],
    artifact_path: str,
    *,
    root: Path,
    key: bytes | None,
    want_hmac: bool,
    keep: bool,
    limits: Limits,
    envelope_real: str | None = None,
    root_real: str | None = None,
) -> PayloadFacts:
    """Resolve and read the payload once (``*_real``: real paths the caller has).
    Raises :class:`PayloadUnavailable`: ``unresolved`` when nothing is found or the first
    existing candidate is refused (then saying why), else not readable."""
    envelope_real = envelope_real or realpath(envelope_path)
    root_real = root_real or realpath(root)
    try:
        location = locate_payload(
            envelope_path, artifact_path, root, envelope_real=envelope_real, root_real=root_real
        )
    except PayloadError as exc:
        if exc.unreadable is not None:
            raise PayloadUnavailable(str(exc), unresolved=False, path=str(exc.unreadable)) from None
        exists = any(
            os.path.lexists(c) for _, c in candidates(envelope_real, artifact_path, root_real)
        )
        raise PayloadUnavailable(str(exc) if exists else "", unresolved=True) from None
    method = "hmac-sha256" if want_hmac and key is not None else "sha256"
    try:
        digest = hash_payload(location, method, key, max_bytes=limits.max_payload_bytes, keep=keep)
    except PayloadError as exc:
        raise PayloadUnavailable(str(exc), unresolved=False, path=str(location.path)) from None
    return PayloadFacts(
        size=digest.size,
        sha256=digest.sha256,
        hmac_sha256=digest.value if method == "hmac-sha256" else None,
        data=digest.data,
    )


def check_envelope(
    path: str | os.PathLike[str],
    contracts: ContractSet,
    *,
    root: Path,
    key: bytes | None,
    strict: bool = False,
    limits: Limits | None = None,
    root_real: str | None = None,
) -> list[GateResult]:
    """Every gate on the envelope at ``path`` (payload under ``root``, ``key`` for HMAC);
    each ``target`` is ``path`` made absolute. An unreadable envelope is an E-1 failure,
    never an exception."""
    lim = limits or Limits()
    target = os.path.abspath(path)
    envelope_real: str | None = None

    def reader(artifact_path: str, want_hmac: bool, keep: bool) -> PayloadFacts:
        return read_payload_facts(
            path,
            artifact_path,
            root=root,
            key=key,
            want_hmac=want_hmac,
            keep=keep,
            limits=lim,
            envelope_real=envelope_real,
            root_real=root_real,
        )

    try:
        data, envelope_real = read_envelope(path, lim.max_envelope_bytes)
    except InputError as exc:
        e1 = GateResult("E-1", "MUST", "fail", "envelope_is_json", str(exc), target)
        return results_after_e1(e1, None, contracts, reader, strict=strict, target=target)
    return run_gates(data, contracts, reader, strict=strict, limits=lim, target=target)


#: below this many envelopes per worker, starting the workers costs more than it saves
MIN_PER_JOB = 64
#: ``jobs=None`` (the CLI's default): one worker per usable CPU, and only from this many
#: envelopes on (below it, forking and collecting cost about what they would save)
AUTO_MIN = 512
CHUNK_MIN, CHUNK_MAX = 16, 256  # envelopes handed to a worker at a time
WINDOW = 4  # batches per worker submitted ahead of the one being written
SERIAL_BATCH = 16  # envelopes rendered and written at a time in this process
T = TypeVar("T")


def auto_jobs() -> int:
    """The CPUs this process may run on (``os.sched_getaffinity``), at least 1."""
    affinity = getattr(os, "sched_getaffinity", None)
    return max(1, len(affinity(0))) if affinity is not None else max(1, os.cpu_count() or 1)


def workers_for(count: int, jobs: int | None) -> int:
    """How many worker processes check ``count`` envelopes: ``jobs`` (``None``: every usable
    CPU, and none below :data:`AUTO_MIN` envelopes), never fewer than
    :data:`MIN_PER_JOB` envelopes each; 1 means this process only."""
    if jobs is None:
        if count < AUTO_MIN:
            return 1
        jobs = auto_jobs()
    return max(1, min(jobs, count // MIN_PER_JOB))


class _Job:
    """What every envelope of one run is checked with: inherited by forked workers, never
    pickled (a worker is told only which range of ``paths`` to check)."""

    __slots__ = ("contracts", "key", "limits", "paths", "render", "root", "root_real", "strict")

    def __init__(
        self,
        contracts: ContractSet,
        root: Path,
        key: bytes | None,
        strict: bool,
        limits: Limits,
        paths: Sequence[str] = (),
        render: Callable[[list[list[GateResult]]], Any] = list,
    ) -> None:
        self.contracts = contracts
        self.root = root
        self.root_real = realpath(root)  # once per run: the project root's real path
        self.key = key
        self.strict = strict
        self.limits = limits
        self.paths = paths
        self.render = render

    def check(self, path: str) -> list[GateResult]:
        return check_envelope(
            path,
            self.contracts,
            root=self.root,
            key=self.key,
            strict=self.strict,
            limits=self.limits,
            root_real=self.root_real,
        )

    def check_range(self, start: int, stop: int) -> Any:
        return self.render([self.check(path) for path in self.paths[start:stop]])


_WORKER_JOB: list[_Job] = []  # set in the parent just before the fork
_WORKER_PARENT: list[int] = []  # the parent's process id, likewise


def _check_range_in_worker(start: int, stop: int) -> Any:
    return _WORKER_JOB[0].check_range(start, stop)


def check_batches(
    paths: Sequence[str],
    contracts: ContractSet,
    *,
    root: Path,
    key: bytes | None,
    render: Callable[[list[list[GateResult]]], T],
    strict: bool = False,
    limits: Limits | None = None,
    jobs: int | None = 1,
) -> Generator[tuple[int, T], None, None]:
    """:func:`check_envelope` on every path in contiguous batches, each handed to
    ``render``; yields ``(envelopes done, rendered)`` in the order of ``paths``. With
    workers (:func:`workers_for`), the first envelope is checked here, the rest by forked
    workers that check and render their ranges, at most :data:`WINDOW` batches ahead; a
    dead worker raises ``BrokenProcessPool`` (exit 70), never a hang."""
    job = _Job(contracts, root, key, strict, limits or Limits(), paths, render)
    workers = workers_for(len(paths), jobs)
    if jobs is None and _other_threads():
        workers = 1  # the default never forks a process whose other threads hold locks
    done: int = 0
    pool: ProcessPoolExecutor | None = None
    if workers > 1:  # then there are at least 2 * MIN_PER_JOB paths
        yield 1, job.check_range(0, 1)
        done, pool = 1, _fork_pool(workers, job)
    if pool is None:
        for start in range(done, len(paths), SERIAL_BATCH):
            stop = min(start + SERIAL_BATCH, len(paths))
            yield stop, job.check_range(start, stop)
        return
    size = max(CHUNK_MIN, min(CHUNK_MAX, -(-(len(paths) - 1) // (workers * 8))))
    ranges = [(start, min(start + size, len(paths))) for start in range(1, len(paths), size)]
    # at most WINDOW batches a worker submitted and not yet written: a slow reader of the
    # output holds the workers back instead of the whole run's output piling up here
    pending: deque[tuple[int, Future[T]]] = deque()
    try:
        for start, stop in ranges:
            if len(pending) >= WINDOW * workers:
                done_at, future = pending.popleft()
                yield done_at, future.result()  # a worker's exception, or BrokenProcessPool
            pending.append((stop, pool.submit(_check_range_in_worker, start, stop)))
        while pending:
            done_at, future = pending.popleft()
            yield done_at, future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _WORKER_JOB.clear()


def _other_threads() -> bool:
    """True when this process runs threads besides this one (``threading`` is not
    imported for the question: a process that never imported it has none)."""
    threading = sys.modules.get("threading")
    return threading is not None and threading.active_count() > 1


def _fork_pool(workers: int, job: _Job) -> ProcessPoolExecutor | None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    try:
        context = multiprocessing.get_context("fork")
    except ValueError:  # no fork on this platform: check in this process
        return None
    # a forked child holds a copy of what the parent has not written yet: write it now,
    # so that nothing the parent printed can ever be printed twice
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    _WORKER_JOB[:] = [job]
    _WORKER_PARENT[:] = [os.getpid()]
    pool: ProcessPoolExecutor | None = None
    try:
        pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_start)
        # the workers are forked on the first task: start them now, so that a process
        # limit or a sandbox that forbids fork is found here, not halfway through the run
        pool.submit(_ready).result()
    except (OSError, NotImplementedError):
        # cannot start processes (a limit, no fork allowed) or no working semaphores
        # (NotImplementedError from the executor): check in this process
        if pool is not None:
            _stop(pool)
        _WORKER_JOB.clear()
        return None
    except BaseException:  # a worker that died at once (BrokenProcessPool), an interrupt
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        _WORKER_JOB.clear()
        raise
    return pool


def _ready() -> None:
    """The first task: it only shows that the workers started."""


def _stop(pool: ProcessPoolExecutor) -> None:
    """Stop a pool whose start failed: the workers forked before the failure are waiting
    for tasks that will never come (the pool keeps them in ``_processes``, not public)."""
    processes = getattr(pool, "_processes", None) or {}
    for process in list(processes.values()):
        process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)


def _worker_start() -> None:
    """A worker ignores ^C (the parent stops the workers and exits 130) and dies with
    its parent (ADR 0022: orphans held the output pipe open, ``check . | head`` hung)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = _WORKER_PARENT[0]
    try:  # Linux: the kernel kills this process when the parent exits
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PDEATHSIG
    except (OSError, AttributeError, ImportError):
        import threading

        threading.Thread(target=_orphaned, args=(parent,), daemon=True).start()
    if os.getppid() != parent:  # it died before that was set
        os._exit(70)


def _orphaned(parent: int) -> None:
    """Elsewhere: exit once the parent is gone (its child is then re-parented)."""
    import time

    while os.getppid() == parent:
        time.sleep(0.1)
    os._exit(70)
