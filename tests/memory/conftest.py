"""Helpers for the memory tests: envelopes that pass the store's checks, a local store,
and the command line of the test CRYSTALIUM server (``crystalium_server.py``)."""

from __future__ import annotations

import copy
import hashlib
import socket
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from eidolons.memory.local import LocalMemory

HERE = Path(__file__).resolve().parent
SERVER = HERE / "crystalium_server.py"
PROJECT = "testproject"

Handoff = tuple[dict[str, Any], bytes]


def make_handoff(
    objective: str = "Scout the receiver gate for integrity bugs.",
    payload: bytes | str = b"# Scout report\n\nNothing unusual.\n",
    *,
    sender: str = "atlas",
    receiver: str = "vigil",
    kind: str = "scout-report",
    version: str = "2.0",
    tier: str = "standard",
    message_id: str | None = None,
    thread_id: str | None = None,
) -> Handoff:
    """A well-formed envelope for ``payload`` (sha256 integrity) and the payload bytes."""
    raw = payload.encode("utf-8") if isinstance(payload, str) else payload
    digest = hashlib.sha256(raw).hexdigest()
    mid = message_id or str(uuid.uuid4())
    envelope = {
        "envelope_version": version,
        "message_id": mid,
        "thread_id": thread_id or mid,
        "parent_id": None,
        "from": {"eidolon": sender, "version": "1.4.2"},
        "to": {"eidolon": receiver, "version": "1.9.0"},
        "performative": "PROPOSE",
        "objective": objective,
        "artifact": {
            "kind": kind,
            "schema_version": "1.0",
            "path": f"handoff/{kind}.md",
            "sha256": digest,
            "size_bytes": len(raw),
        },
        "integrity": {"method": "sha256", "value": digest},
        "trace": {"ts": "2026-07-01T12:00:00Z", "host": "raw", "model": "m", "tier": tier},
    }
    return envelope, raw


def mutate(
    envelope: dict[str, Any], dotted: str, value: Any = ..., *, delete: bool = False
) -> dict[str, Any]:
    """A deep copy of ``envelope`` with one (dotted) field set or deleted."""
    out = copy.deepcopy(envelope)
    *parents, last = dotted.split(".")
    target = out
    for part in parents:
        target = target[part]
    if delete:
        del target[last]
    else:
        target[last] = value
    return out


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LocalMemory]:
    memory = LocalMemory(tmp_path / "store", project=PROJECT)
    yield memory
    memory.close()


@pytest.fixture
def handoff() -> Callable[..., Handoff]:
    return make_handoff


def server_command(data_dir: Path, *options: str, project: str | None = PROJECT) -> tuple[str, ...]:
    """The stdio command line of the test CRYSTALIUM server."""
    head = (sys.executable, str(SERVER), "--data-dir", str(data_dir))
    return (*head, *(("--project", project) if project else ()), *options)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
