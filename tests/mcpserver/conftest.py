"""A real ``eidolons mcp serve`` over stdio, driven by the SDK's own client.

One server process per configuration and module: a blocking portal (anyio) runs the
client's event loop in a thread, so the tests stay synchronous and share the session.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import emit_cmd, run_cli

CALL_TIMEOUT = 30.0


class McpSession:
    """Synchronous calls into one stdio server."""

    def __init__(self, portal: Any, client: Any) -> None:
        self.portal, self.client = portal, client

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        return self.portal.call(self.client.call_tool, name, arguments)

    def tools(self) -> list[Any]:
        return list(self.portal.call(self.client.list_tools).tools)


def dump(result: Any) -> str:
    """Everything a result carries (text, blobs, structured content), as one string."""
    return str(result.model_dump_json())


def texts(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


@pytest.fixture(scope="module")
def mcp_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mcp") / "proj"
    (root / ".eidolons").mkdir(parents=True)
    (root / "handoffs").mkdir()
    return root


def _session(root: Path, *options: str, **env: str) -> Iterator[McpSession]:
    from anyio.from_thread import start_blocking_portal
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "eidolons", "mcp", "serve", "--root", str(root), *options],
        env={"EIDOLONS_MEMORY": "local", **env},
    )
    # the server's stderr goes to this process's stderr *now*: the SDK's default (errlog=
    # sys.stderr) is bound when mcp.client.stdio is first imported, and an in-process CLI
    # run that imports it (the memory MCP backend) does so while run_cli has swapped
    # sys.stderr for a capture with no file descriptor
    transport = stdio_client(params, errlog=sys.stderr)
    with start_blocking_portal() as portal:
        client_cm = Client(transport, read_timeout_seconds=CALL_TIMEOUT)
        with portal.wrap_async_context_manager(client_cm) as client:
            yield McpSession(portal, client)


@pytest.fixture(scope="module")
def bound(mcp_root: Path) -> Iterator[McpSession]:
    yield from _session(mcp_root, "--as", "vigil", "--no-memory")


@pytest.fixture(scope="module")
def unbound(mcp_root: Path) -> Iterator[McpSession]:
    yield from _session(mcp_root, ECL_HMAC_KEY="the-orchestrators-key")


class Handoff:
    """A payload with distinctive bytes, its envelope, and the envelope's ids."""

    def __init__(self, root: Path, payload: Path, envelope: Path, secret: str) -> None:
        self.root, self.payload, self.envelope, self.secret = root, payload, envelope, secret
        self.doc: dict[str, Any] = json.loads(envelope.read_text(encoding="utf-8"))

    @property
    def rel(self) -> str:
        return self.payload.relative_to(self.root).as_posix()

    @property
    def thread(self) -> str:
        return str(self.doc["thread_id"])

    def trace(self) -> list[dict[str, Any]]:
        path = self.root / ".eidolons" / ".trace" / f"{self.thread}.jsonl"
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]

    def sha256(self) -> str:
        return hashlib.sha256(self.payload.read_bytes()).hexdigest()


def make_handoff(
    root: Path,
    *,
    verify: bool = True,
    sender: str = "atlas@1.4.2",
    to: str = "vigil@1.9.0",
    performative: str = "PROPOSE",
    kind: str = "scout-report",
    suffix: str = ".md",
    body: bytes | None = None,
) -> Handoff:
    secret = f"PAYLOAD-SECRET-{secrets.token_hex(8)}"
    name = f"handoffs/{secret.lower()}{suffix}"
    payload = root / name
    payload.write_bytes(body or f"# Scout report\n\n## Decision target\n{secret}\n".encode())
    emit = emit_cmd(
        name,
        "--no-check",  # hand-offs the receiver must refuse are made on purpose here
        sender=sender, to=to, performative=performative, kind=kind, objective="Hand over.",
    )  # fmt: skip
    r = run_cli(*emit, cwd=root)
    assert r.code == 0, r.err
    envelope = payload.with_name(payload.name.rsplit(".", 1)[0] + ".envelope.json")
    if verify:
        r = run_cli("verify-envelope", envelope, "--block", cwd=root)
        assert r.code == 0, r.err
    return Handoff(root, payload, envelope, secret)
