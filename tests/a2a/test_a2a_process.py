"""``eidolons a2a serve`` as a real process: it listens, says where, answers ``a2a send``
with its receiver gate, and stops on SIGTERM without a traceback. Every wait is bounded."""

from __future__ import annotations

import signal
import subprocess
import sys

from tests.a2a.conftest import BODY, ECHO, Hosts
from tests.conftest import clean_env


def test_serve_as_a_process_answers_send_and_stops_on_sigterm(hosts: Hosts) -> None:
    command = [sys.executable, "-c", ECHO, str(hosts.log)]
    server = subprocess.Popen(
        [sys.executable, "-m", "eidolons", "a2a", "serve", "--as", "vigil", "--root", str(hosts.b),
         "--port", "0", "--", *command],
        env=clean_env(), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stderr is not None
        said = server.stderr.readline()  # written once it listens
        assert said.startswith("eidolons a2a: vigil's receiver gate at http://127.0.0.1:"), said
        url = said.split(" at ", 1)[1].split(" ", 1)[0]
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
