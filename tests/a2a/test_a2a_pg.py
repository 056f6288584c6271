"""Two hosts of one hand-off sharing one PostgreSQL trace store: the sender's host
records its orchestrator pass under its own login, the receiving host's ``a2a serve`` (a
real process, with the gate's login) records the receiver's, and one chain shows both
sides with the login that wrote each event."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from tests.a2a.conftest import BODY, ECHO, Hosts
from tests.conftest import clean_env
from tests.tracestore.pgserver import GATE_LOGIN, ORCH_LOGIN, PgServer


def test_one_shared_store_shows_both_hosts_sides_of_the_a2a_hop(
    tmp_path: Path,
    pg: PgServer,
    shared_db: str,
) -> None:
    sender = clean_env(EIDOLONS_TRACE_DSN=pg.dsn(ORCH_LOGIN, shared_db))
    receiver = clean_env(EIDOLONS_TRACE_DSN=pg.dsn(GATE_LOGIN, shared_db))
    hosts = Hosts(tmp_path, env=sender)
    command = [sys.executable, "-c", ECHO, str(hosts.log)]
    server = subprocess.Popen(
        [sys.executable, "-m", "eidolons", "a2a", "serve", "--as", "vigil", "--root", str(hosts.b),
         "--port", "0", "--", *command],
        env=receiver, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stderr is not None
        said = server.stderr.readline()
        assert " at http://127.0.0.1:" in said, said
        r = hosts.send(said.split(" at ", 1)[1].split(" ", 1)[0])
        assert (r.code, r.out) == (0, BODY.decode()), r.err
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=20)
    assert hosts.kept() and hosts.receiver_events() == []  # B's events went to the store
    envelope = hosts.payload.with_name("scout-report.envelope.json")
    thread = json.loads(envelope.read_text())["thread_id"]
    shown = hosts.cli("trace", "show", thread, "--json")
    assert shown.code == 0, shown.err
    events = [(e["event"], e.get("gate"), e.get("written_by")) for e in shown.json()]
    assert events == [
        ("emit", "sender", ORCH_LOGIN),
        ("verify_pass", "orchestrator", ORCH_LOGIN),
        ("verify_pass", "receiver", GATE_LOGIN),
        ("receive", "receiver", GATE_LOGIN),
    ], events
    page = hosts.cli("trace", "report", thread)
    assert page.code == 0, page.err
    assert f"on {ORCH_LOGIN}</small>" in page.out and f"on {GATE_LOGIN}</small>" in page.out
