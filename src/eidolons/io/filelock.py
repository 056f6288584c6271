"""File locks taken with a deadline: the one way a gate waits for a ``flock`` (an agent
can hold a lock on any project file forever). Tried with ``LOCK_NB`` and retried until
the trace timeout (``EIDOLONS_TRACE_TIMEOUT_S``); past it :class:`LockTimeout`, an
:class:`OSError`, so every caller's handling of a file it cannot open covers it.
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
