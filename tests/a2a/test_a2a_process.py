"""``eidolons a2a serve`` as a real process: it listens, says where, answers ``a2a send``
with its receiver gate, and stops on SIGTERM without a traceback; killed mid-task, it loses
nothing on record and never runs that task again. Every wait is bounded."""

from __future__ import annotations

import signal
import subprocess
import sys

from tests.a2a.conftest import BODY, ECHO, Hosts
from tests.conftest import clean_env

#: COMMAND that says it started, then waits to be killed with its server
STALL = "import sys, time\nopen(sys.argv[1], 'a').write('dispatched\\n')\ntime.sleep(60)\n"


def serve(hosts: Hosts, command: list[str]) -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [sys.executable, "-m", "eidolons", "a2a", "serve", "--as", "vigil", "--root", str(hosts.b),
         "--port", "0", "--", *command],
        env=clean_env(), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # its COMMAND is killed with it
    )  # fmt: skip
    assert server.stderr is not None
    said = server.stderr.readline()
    assert " at http://127.0.0.1:" in said, said
    return server, said.split(" at ", 1)[1].split(" ", 1)[0]


def test_serve_as_a_process_answers_send_and_stops_on_sigterm(hosts: Hosts) -> None:
    server, url = serve(hosts, [sys.executable, "-c", ECHO, str(hosts.log)])
    try:
        r = hosts.send(url)
        assert (r.code, r.out) == (0, BODY.decode()), r.err
        assert "[vigil-verify-incoming] PASS: scout-report from atlas" in r.err
        assert hosts.dispatched() == 1
    finally:
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=20)
        rest = server.stderr.read() if server.stderr is not None else ""
    # a graceful stop, ended as the signal's own (uvicorn re-raises it), never a traceback
    assert code in (0, -signal.SIGTERM), rest
    assert "Traceback" not in rest, rest


def test_a_server_killed_mid_task_loses_nothing_on_record_and_never_runs_it_twice(
    hosts: Hosts,
) -> None:
    import os
    import threading
    import time

    server, url = serve(hosts, [sys.executable, "-c", STALL, str(hosts.log)])
    sent = threading.Thread(target=hosts.send, args=(url,), daemon=True)
    try:
        sent.start()
        deadline = time.monotonic() + 20
        while hosts.dispatched() == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert hosts.dispatched() == 1  # COMMAND runs: the pass is recorded before it
    finally:
        os.killpg(server.pid, signal.SIGKILL)  # the server and its COMMAND, mid-task
        server.wait(timeout=20)
    sent.join(20)
    events = [e["event"] for e in hosts.receiver_events()]
    assert events == ["verify_pass", "receive"], events  # on record, nothing lost
    again, url = serve(hosts, [sys.executable, "-c", ECHO, str(hosts.log)])
    try:
        r = hosts.send(url)  # the same hand-off delivered again after the restart
    finally:
        again.send_signal(signal.SIGTERM)
        again.wait(timeout=20)
    assert r.code == 70, r.err
    assert "its COMMAND has not answered" in r.err
    assert hosts.dispatched() == 1  # never dispatched twice
    assert [e["event"] for e in hosts.receiver_events()] == events


def test_serve_caps_a_payload_at_sixteen_mebibytes_by_default(hosts: Hosts) -> None:
    """A network server's default: a body that a 16 MiB payload could not need is refused
    before it is parsed, though the gate's own cap (1 GiB) would allow it."""
    import httpx

    server, url = serve(hosts, [])
    try:
        body = b"{" * (32 * 1024 * 1024)  # past 16 MiB in base64 with the envelope and JSON
        r = httpx.post(url, content=body, headers={"content-type": "application/json"}, timeout=30)
        small = hosts.send(url)  # a hand-off of a few bytes still crosses
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=20)
    assert r.status_code == 413 and "refused unread" in r.text
    assert small.code == 0, small.err
