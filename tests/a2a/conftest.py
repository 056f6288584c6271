"""Two hosts on 127.0.0.1: a sender's project and a receiver's, each with its own keys,
and the receiver's ``a2a serve`` application (the official SDK's server under uvicorn, in
a thread, on an ephemeral port)."""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from eidolons.ecl.grammar import Limits
from eidolons.hosts.a2a import Receiver, build_app
from tests.conftest import Run, emit_cmd, run_cli
from tests.tracestore.conftest import pg, shared_db  # noqa: F401  (a shared store's tests)

BODY = b"# Scout report\n\n## Decision target\nWhere does install.sh race?\n"
#: COMMAND: appends one line to its log per dispatch and prints the payload it was given
ECHO = (
    "import os, sys\n"
    "open(sys.argv[1], 'a').write('dispatched\\n')\n"
    "sys.stdout.buffer.write(open(os.environ['ECL_PAYLOAD'], 'rb').read())\n"
)


class _Switch:
    """An ASGI application that hands each request to the one a test set (``app``)."""

    app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


#: the idle servers: uvicorn in a thread on a socket already listening, its URL and switch
_IDLE: list[tuple[str, _Switch]] = []
_SERVERS: list[tuple[uvicorn.Server, threading.Thread]] = []
_POOL = threading.Lock()


def _serve() -> tuple[str, _Switch]:
    sock = socket.create_server(("127.0.0.1", 0))
    switch = _Switch()
    server = uvicorn.Server(uvicorn.Config(switch, log_level="error", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    _SERVERS.append((server, thread))
    return f"http://127.0.0.1:{sock.getsockname()[1]}/", switch


@contextmanager
def running(app: Callable[[str], Any]) -> Iterator[str]:
    """The application ``app(url)`` served by uvicorn; its base URL. The servers are kept
    for the next test (stopping one takes uvicorn a tenth of a second)."""
    with _POOL:
        url, switch = _IDLE.pop() if _IDLE else _serve()
    switch.app = app(url)
    try:
        yield url
    finally:
        switch.app = None
        with _POOL:
            _IDLE.append((url, switch))


@pytest.fixture(scope="session", autouse=True)
def _stop_servers() -> Iterator[None]:
    yield
    for server, _ in _SERVERS:
        server.should_exit = True
    for _, thread in _SERVERS:
        thread.join(10)


class Hosts:
    """The sender's project ``a`` and the receiver's ``b``, two projects with two keys;
    ``b`` pins ``a``'s orchestrator key for ``a``'s project unless ``pinned`` is False."""

    def __init__(
        self,
        tmp: Path,
        pinned: bool = True,
        name: str = "scout-report.md",
        env: dict[str, str] | None = None,
    ) -> None:
        """``env``: the sender host's environment (its trace store), for every command."""
        self.env = env
        self.a, self.b = tmp / "a", tmp / "b"
        for root in (self.a, self.b):
            (root / ".eidolons").mkdir(parents=True)
            assert self.cli("keys", "init", "--root", root).code == 0
        self.log = tmp / "dispatched.log"
        self.log.touch()
        trust = json.loads((self.a / ".eidolons" / "trust.json").read_text())
        self.project, keyid = trust["project"], trust["keys"][0]["keyid"]
        if pinned:
            public = self.cli("keys", "export", keyid, "--root", self.a).out.strip()
            added = self.cli(
                "keys", "add", public, "--role", "orchestrator", "--project", self.project,
                "--root", self.b,
            )  # fmt: skip
            assert added.code == 0, added.err
        self.payload = self.a / ".eidolons" / "handoffs" / name
        self.payload.parent.mkdir(parents=True)
        self.payload.write_bytes(BODY)
        r = self.cli(*emit_cmd(self.payload, "--root", self.a, to="vigil", performative="PROPOSE"))
        assert r.code == 0, r.err

    def cli(self, *args: str | Path) -> Run:
        return run_cli(*args, cwd=self.a, env=self.env)

    def send(self, url: str) -> Run:
        return self.cli("a2a", "send", self.payload, "--to", url, "--root", self.a)

    def receiver(
        self, key: bytes | None = None, limits: Limits | None = None
    ) -> Callable[[str], Any]:
        command = [sys.executable, "-c", ECHO, str(self.log)]
        gate = Receiver("vigil", self.b, command=command, key=key, limits=limits or Limits())
        return lambda url: build_app(gate, url)

    def dispatched(self) -> int:
        return len(self.log.read_text().splitlines())

    def kept(self) -> list[Path]:
        top = self.b / ".eidolons" / "handoffs" / "a2a"
        return sorted(p for p in top.rglob("*") if p.is_file()) if top.exists() else []

    def receiver_events(self) -> list[dict[str, Any]]:
        lines = [
            json.loads(line)
            for trace in sorted((self.b / ".eidolons" / ".trace").glob("*.jsonl"))
            for line in trace.read_text().splitlines()
        ]
        return [e for e in lines if e.get("gate") == "receiver"]


@pytest.fixture
def hosts(tmp_path: Path) -> Hosts:
    return Hosts(tmp_path)
