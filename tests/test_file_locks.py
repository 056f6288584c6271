"""Every file lock a gate takes has a deadline (``EIDOLONS_TRACE_TIMEOUT_S``).

An agent can write any file of the project, so it can hold a ``flock`` on a thread's
trace or on this host's payload index. A gate waits at most the trace timeout for it,
then refuses (a verify that cannot record is not a pass); the payload index is a hint,
so a pass is recorded without it. Each lock here is held by another process.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from eidolons.hosts.hook.fast import DEFAULT_BUDGET
from eidolons.io.config import DEFAULT_TRACE_TIMEOUT_S, trace_timeout_s
from eidolons.io.files import LockTimeout, deadline, flock_until
from tests._locks import Clock, held
from tests.conftest import Run, clean_env, emit_payload, read_trace, trace_files

Cli = Callable[..., Run]
WAIT = "0.2"  # EIDOLONS_TRACE_TIMEOUT_S in these tests
LATE = 4.0  # a command that took this long waited past its deadline


def _quick() -> dict[str, str]:
    return clean_env(EIDOLONS_TRACE_TIMEOUT_S=WAIT)


def _gate_events(project: Path, event: str, gate: str) -> list[dict[str, object]]:
    return [
        e
        for f in trace_files(project)
        for e in read_trace(f)
        if e.get("event") == event and e.get("gate") == gate
    ]


# ------------------------------------------------------------------ flock_until


def test_a_free_lock_is_taken_at_once(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        clock = Clock()
        flock_until(fd, deadline(0.5), "f")
        assert clock.elapsed < 0.5
    finally:
        os.close(fd)


def test_a_held_lock_times_out_at_the_deadline(tmp_path: Path) -> None:
    path = tmp_path / "f"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        with held(path):
            clock = Clock()
            with pytest.raises(LockTimeout) as caught:
                flock_until(fd, deadline(0.1), str(path))
            assert 0.1 <= clock.elapsed < LATE
        assert isinstance(caught.value, OSError)  # every caller's OSError handling covers it
        assert "locked by another process" in str(caught.value)
    finally:
        os.close(fd)


def test_a_lock_released_before_the_deadline_is_taken(tmp_path: Path) -> None:
    path = tmp_path / "f"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        with held(path, seconds=0.1):
            clock = Clock()
            flock_until(fd, deadline(10), str(path))
            assert clock.elapsed < LATE
    finally:
        os.close(fd)


def test_the_default_deadline_is_the_trace_timeout_inside_the_hooks_budget() -> None:
    assert trace_timeout_s({}) == DEFAULT_TRACE_TIMEOUT_S < DEFAULT_BUDGET
    assert trace_timeout_s({"EIDOLONS_TRACE_TIMEOUT_S": "0.25"}) == 0.25
    for bad in ("0", "-1", "nan", "soon", "3601"):
        with pytest.raises(Exception, match="EIDOLONS_TRACE_TIMEOUT_S"):
            trace_timeout_s({"EIDOLONS_TRACE_TIMEOUT_S": bad})


# ------------------------------------------------------------------ the gates


def test_verify_envelope_refuses_within_the_deadline_when_the_trace_is_locked(
    cli: Cli, project: Path
) -> None:
    _, envelope, _ = emit_payload(cli, project)
    (trace,) = trace_files(project)
    with held(trace):
        clock = Clock()
        r = cli("verify-envelope", envelope, "--block", env=_quick())
        took = clock.elapsed
    assert took < LATE
    assert r.code == 3 and r.out == ""
    verdict = r.err.splitlines()[0]  # the verdict line says why, in one line
    assert verdict.startswith("ecl verify [pass] ") and "[blocked]" in verdict
    assert "(trace not written: " in verdict and "locked by another process" in verdict
    assert _gate_events(project, "verify_pass", "orchestrator") == []


def test_verify_envelope_json_says_the_trace_was_not_written(cli: Cli, project: Path) -> None:
    _, envelope, _ = emit_payload(cli, project)
    (trace,) = trace_files(project)
    with held(trace):
        r = cli("verify-envelope", envelope, "--block", "--json", env=_quick())
    assert r.code == 3 and r.json()["blocked"] is True
    assert "locked by another process" in r.json()["trace_error"]
    assert _gate_events(project, "verify_pass", "orchestrator") == []


def test_verify_incoming_refuses_within_the_deadline_when_the_trace_is_locked(
    cli: Cli, project: Path
) -> None:
    payload, envelope, _ = emit_payload(cli, project)
    assert cli("verify-envelope", envelope, "--block").code == 0
    (trace,) = trace_files(project)
    before = read_trace(trace)
    with held(trace):
        clock = Clock()
        r = cli("verify-incoming", payload, "--as", "vigil", env=_quick())
        took = clock.elapsed
    assert took < LATE
    assert r.code == 3 and r.out == ""
    refuse, reason, cause = r.err.splitlines()  # a pass that cannot be recorded is none
    assert refuse == "[vigil-verify-incoming] REFUSE: UNVERIFIED from atlas"
    assert reason == "[vigil-verify-incoming] reason: the pass could not be recorded in the trace"
    assert cause.startswith("eidolons: trace not written: cannot append to trace ")
    assert "locked by another process" in cause
    assert read_trace(trace) == before  # no receiver verify_pass, nothing at all


def test_a_bad_trace_timeout_refuses_without_waiting(cli: Cli, project: Path) -> None:
    _, envelope, _ = emit_payload(cli, project)
    r = cli("verify-envelope", envelope, "--block", env=clean_env(EIDOLONS_TRACE_TIMEOUT_S="x"))
    assert r.code == 3 and "Traceback" not in r.err
    assert "(trace not written: " in r.err and "EIDOLONS_TRACE_TIMEOUT_S='x' must be" in r.err
    assert _gate_events(project, "verify_pass", "orchestrator") == []


def test_a_held_payload_index_delays_a_pass_by_the_deadline_only(cli: Cli, project: Path) -> None:
    from eidolons.io.paths import index_path

    _, envelope, _ = emit_payload(cli, project)
    index = index_path(str(project))
    assert os.path.isfile(index)  # the emit wrote it
    with held(index):
        clock = Clock()
        r = cli("verify-envelope", envelope, "--block", env=_quick())
        took = clock.elapsed
    assert took < LATE
    assert r.code == 0, r.out + r.err  # the index is a hint: the pass is on record
    assert len(_gate_events(project, "verify_pass", "orchestrator")) == 1
