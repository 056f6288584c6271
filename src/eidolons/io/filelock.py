"""File locks taken with a deadline: the one way a gate waits for a ``flock``.

An agent in the pipeline can write any file of the project, and the trace's files, this
host's payload index and the memory store are files it can open too: it can take a
``flock`` on one and keep it. A blocking ``flock`` would then hold the gate for as long as
the agent likes (failing closed, but forever). Rules:

- Every exclusive lock is tried without blocking (``LOCK_NB``), retried after a short
  sleep that grows to :data:`MAX_SLEEP_S`, until a deadline on the monotonic clock.
- The deadline is the trace timeout (:func:`eidolons.io.settings.trace_timeout_s`,
  ``EIDOLONS_TRACE_TIMEOUT_S``, default 5 s, inside the hook's own 10 s budget), unless
  the caller computed one already (the JSONL append waits for the trace and then for the
  payload index within one deadline).
- Past it, :class:`LockTimeout`: an :class:`OSError` (``ETIMEDOUT``), so every caller's
  handling of a file it cannot open covers it too. The trace's append then fails
  (:class:`~eidolons.errors.TraceWriteError`: the gate refuses, nothing passes
  unrecorded); the payload index is left behind (a hint: readers take the full rule);
  memory is skipped, as its other failures are (the verdict does not change).
"""

from __future__ import annotations

import errno
import fcntl
import time

from eidolons.io.settings import TRACE_TIMEOUT_ENV, trace_timeout_s

__all__ = ["LockTimeout", "deadline", "flock_until"]

FIRST_SLEEP_S = 0.001
MAX_SLEEP_S = 0.02  # an honest holder keeps a lock for milliseconds


class LockTimeout(TimeoutError):
    """A lock another process held past the deadline."""


def deadline(seconds: float | None = None) -> float:
    """The monotonic time a wait for a lock ends: ``seconds`` from now, else the trace
    timeout from now. Raises :class:`~eidolons.errors.UsageError` for a bad
    ``EIDOLONS_TRACE_TIMEOUT_S``."""
    return time.monotonic() + (trace_timeout_s() if seconds is None else seconds)


def flock_until(fd: int, until: float, name: object) -> None:
    """An exclusive ``flock`` on ``fd``, waited for until the monotonic time ``until``.
    Raises :class:`LockTimeout` past it (``name`` says which file), and any other
    :class:`OSError` ``flock`` raises."""
    started = time.monotonic()
    pause = FIRST_SLEEP_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        now = time.monotonic()
        if now >= until:
            raise LockTimeout(
                errno.ETIMEDOUT,
                f"{name} is locked by another process: gave up after "
                f"{now - started:.1f} s ({TRACE_TIMEOUT_ENV})",
            )
        time.sleep(min(pause, until - now))
        pause = min(pause * 2, MAX_SLEEP_S)
