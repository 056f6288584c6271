"""A server that stops answering after the connection is made (its backend stopped with
SIGSTOP: the kernel still holds the socket open, so no server-side timeout and no TCP
keepalive ever fires) fails the gates closed within ``EIDOLONS_TRACE_TIMEOUT_S``, over
the Unix socket as over TCP, and nothing passes unrecorded."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from eidolons.errors import TraceWriteError
from eidolons.trace import postgres as pg_module
from eidolons.trace.store import TraceReadError
from tests.conftest import Run, clean_env, emit_payload
from tests.tracestore.pgserver import GATE_LOGIN, ORCH_LOGIN, PgServer

Cli = Callable[..., Run]
TIMEOUT_S = 0.2
SLACK_S = 1.0  # the bound is the timeout; this is the test machine's scheduling
RESUME_AFTER_S = 15.0  # a client without its own bound would otherwise wait forever


class Stopper:
    """Stops backends; resumes them in teardown, or after RESUME_AFTER_S at the latest
    (so a broken bound fails the test by its time instead of hanging the suite)."""

    def __init__(self) -> None:
        self.stopped: list[int] = []
        self._lock = threading.Lock()

    def stop(self, pid: int) -> None:
        os.kill(pid, signal.SIGSTOP)
        with self._lock:
            self.stopped.append(pid)
        timer = threading.Timer(RESUME_AFTER_S, self._resume, (pid,))
        timer.daemon = True
        timer.start()

    def _resume(self, pid: int) -> None:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass

    def resume_all(self) -> None:
        for pid in self.stopped:
            self._resume(pid)


@pytest.fixture
def stopper(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stopper]:
    monkeypatch.setenv("EIDOLONS_TRACE_TIMEOUT_S", str(TIMEOUT_S))
    s = Stopper()
    try:
        yield s
    finally:
        s.resume_all()


@pytest.fixture(params=["unix", "tcp"])
def tcp(request: pytest.FixtureRequest) -> bool:
    return bool(request.param == "tcp")


def stop_on_connect(monkeypatch: pytest.MonkeyPatch, stopper: Stopper) -> None:
    """Every connection the gates open is made, then its backend stops answering."""
    real = pg_module.connect

    def connect(dsn: str, **kwargs: Any) -> Any:
        conn = real(dsn, **kwargs)
        stopper.stop(conn.info.backend_pid)
        return conn

    monkeypatch.setattr(pg_module, "connect", connect)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.monotonic()
    out = fn()
    return time.monotonic() - t0, out


def test_a_stopped_backend_fails_a_lookup_and_an_append_within_the_timeout(
    pg: PgServer, shared_db: str, stopper: Stopper, tcp: bool
) -> None:
    thread = f"stuck-{uuid.uuid4()}"
    for call, error in (
        (lambda s: s.latest_verdict(thread, "m"), TraceReadError),
        (lambda s: s.append(thread, {"event": "emit"}), TraceWriteError),
    ):
        with pg_module.PostgresStore(pg.dsn(ORCH_LOGIN, shared_db, tcp=tcp)) as store:
            store.connection()
            stopper.stop(store.connection().info.backend_pid)

            def run(s: pg_module.PostgresStore = store, c: Any = call, e: Any = error) -> str:
                with pytest.raises(e) as raised:
                    c(s)
                return str(raised.value)

            took, message = timed(run)
        assert took < TIMEOUT_S + SLACK_S, (took, message)
        assert "timeout" in message and "\n" not in message, message


@pytest.fixture
def env(pg: PgServer, shared_db: str, tcp: bool) -> Callable[[str], dict[str, str]]:
    def make(login: str) -> dict[str, str]:
        dsn = pg.dsn(login, shared_db, tcp=tcp)
        return clean_env(EIDOLONS_TRACE_DSN=dsn, EIDOLONS_TRACE_TIMEOUT_S=str(TIMEOUT_S))

    return make


def recorded_verdicts(pg: PgServer, db: str, message_id: str) -> int:
    import psycopg

    with psycopg.connect(pg.dsn(db=db), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM eidolons.trace_events WHERE verdict_for = %s",
            (message_id.encode(),),
        ).fetchone()
    assert row is not None
    return int(row[0])


def gone(pg: PgServer, pids: list[int]) -> bool:
    import psycopg

    with psycopg.connect(pg.dsn(), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)
        ).fetchone()
    return row == (0,)


def test_verify_envelope_on_a_stopped_server_fails_closed_and_records_nothing(
    cli: Cli,
    project: Path,
    pg: PgServer,
    shared_db: str,
    stopper: Stopper,
    env: Callable[[str], dict[str, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, envelope, doc = emit_payload(cli, project, env=env(GATE_LOGIN))
    stop_on_connect(monkeypatch, stopper)
    took, r = timed(lambda: cli("verify-envelope", envelope, "--block", env=env(ORCH_LOGIN)))
    assert r.code == 3, r.out + r.err
    assert took < TIMEOUT_S + SLACK_S, took
    (said,) = [ln for ln in (r.out + r.err).splitlines() if "trace not written" in ln]
    assert "timeout" in said, said
    stopper.resume_all()  # the stopped backend runs again: what it was sent is not a pass
    deadline = time.monotonic() + 10
    while not gone(pg, stopper.stopped) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(pg, stopper.stopped)
    assert recorded_verdicts(pg, shared_db, doc["message_id"]) == 0


def test_verify_incoming_on_a_stopped_server_refuses_within_the_timeout(
    cli: Cli,
    project: Path,
    stopper: Stopper,
    env: Callable[[str], dict[str, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    payload, envelope, _ = emit_payload(cli, project, env=env(GATE_LOGIN))
    assert cli("verify-envelope", envelope, "--block", env=env(ORCH_LOGIN)).code == 0
    stop_on_connect(monkeypatch, stopper)
    took, r = timed(lambda: cli("verify-incoming", payload, "--as", "vigil", env=env(GATE_LOGIN)))
    assert r.code == 3, r.out + r.err
    assert "[vigil-verify-incoming] REFUSE: UNVERIFIED from atlas" in r.out + r.err
    reason = [ln for ln in (r.out + r.err).splitlines() if "reason:" in ln]
    assert reason and "timeout" in reason[0], r.out + r.err
    # one timeout for the whole gate: the store that was not answered is not asked again
    # (the refusal's own record fails at once; it is reported, never a pass)
    assert took < TIMEOUT_S + SLACK_S, took
