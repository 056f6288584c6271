"""The client's own bound on a PostgreSQL connection (ADR 0014): a server that stops
answering (a stopped backend, which no server timeout or keepalive notices) fails the
gate within the timeout. Past a wait's deadline the socket is shut down and the backend's
statement cancelled; the connection is never used again. One daemon thread serves every
deadline of the process.
"""

from __future__ import annotations

import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    import psycopg


class Watchdog:
    """The deadlines of one connection. ``fired``: a wait outlived ``limit`` seconds and
    the connection was cut (its owner reports a timeout and closes it)."""

    def __init__(self, conn: psycopg.Connection[Any], limit: float) -> None:
        self.limit = limit
        self.fired = False
        self._fd = conn.pgconn.socket
        self._cancel = conn.pgconn.get_cancel()
        self._lock = threading.Lock()
        self._armed = 0  # the token of the deadline that may fire; disarming moves it on

    @contextmanager
    def bound(self) -> Iterator[None]:
        """Around one wait (or one transaction) for the server: at most ``limit`` s."""
        with self._lock:
            self._armed += 1
            token = self._armed
        _DEADLINES.arm(time.monotonic() + self.limit, self, token)
        try:
            yield
        finally:
            with self._lock:  # once this returns, no deadline fires on this socket
                self._armed += 1

    def fire(self, token: int) -> None:
        with self._lock:
            if token != self._armed or self.fired:
                return
            self.fired = True
            try:  # a duplicate of the descriptor: shutting it down cuts the socket itself
                with socket.socket(fileno=os.dup(self._fd)) as sock:
                    sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        threading.Thread(target=self._cancel_backend, daemon=True).start()

    def _cancel_backend(self) -> None:
        try:
            self._cancel.cancel()
        except Exception:  # best effort: the gate has already failed, closed
            pass


class _Deadlines:
    """Every armed deadline of the process, earliest first, watched by one thread."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Watchdog, int]] = []
        self._order = itertools.count()
        self._pid = 0  # the process whose thread runs (none yet)
        self._until = float("inf")  # when the thread wakes next

    def arm(self, when: float, watch: Watchdog, token: int) -> None:
        with self._cond:
            heapq.heappush(self._heap, (when, next(self._order), watch, token))
            if self._pid != os.getpid():  # first deadline, or the first after a fork
                self._pid = os.getpid()
                threading.Thread(
                    target=self._run, name="eidolons-pg-deadlines", daemon=True
                ).start()
            elif when < self._until:
                self._cond.notify()

    def _run(self) -> None:
        while True:
            due: list[tuple[Watchdog, int]] = []
            with self._cond:
                now = time.monotonic()
                while self._heap and self._heap[0][0] <= now:
                    _, _, watch, token = heapq.heappop(self._heap)
                    due.append((watch, token))
                if not due:
                    self._until = self._heap[0][0] if self._heap else float("inf")
                    wait = None if not self._heap else self._until - now
                    self._cond.wait(wait)
                    continue
            for watch, token in due:  # a disarmed one does nothing
                watch.fire(token)


_DEADLINES = _Deadlines()
