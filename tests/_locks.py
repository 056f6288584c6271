"""A file lock held by another process, as an agent in the pipeline can hold one.

:func:`held` starts a Python child that takes an exclusive ``fcntl.flock`` on a file
(created if missing), says so on its stdout, and keeps it until the block ends (or for
``seconds`` at most: a gate that waits for the lock with no deadline is then released,
late, and the test's time assertion fails instead of the suite hanging).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""

#: how long a holder keeps its lock when the test does not end it first
HOLD_SECONDS = 20.0


@contextmanager
def held(path: str | os.PathLike[str], seconds: float = HOLD_SECONDS) -> Iterator[None]:
    """An exclusive ``flock`` on ``path``, held by a child process for the block."""
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, os.fspath(path), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "held\n", "the holder could not take the lock"
        yield
    finally:
        child.kill()
        child.wait(timeout=10)
        if child.stdout is not None:
            child.stdout.close()


class Clock:
    """Seconds since it was made, on the monotonic clock."""

    def __init__(self) -> None:
        self.start = time.monotonic()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start
