"""Helpers for the memory tests: envelopes that pass the store's checks, a local store,
and the command line of the test CRYSTALIUM server (``crystalium_server.py``)."""

from __future__ import annotations

import socket
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from eidolons.memory.local import LocalMemory
from tests._builders import DROP, edit, envelope_for

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
    mid = message_id or str(uuid.uuid4())
    # the fields below are set raw, after the builder: the store must handle senders,
    # tiers and objectives the builder refuses (``ATLAS``, ``T2``, ``""``) as a hostile
    # envelope would carry them
    built = envelope_for(raw, message_id=mid, thread_id=thread_id, envelope_version=version)
    envelope = edit(
        built,
        context_delta=DROP,  # the store's mapping is tested without one
        from__eidolon=sender,
        to__eidolon=receiver,
        objective=objective,
        artifact__kind=kind,
        artifact__path=f"handoff/{kind}.md",
        trace__ts="2026-07-01T12:00:00Z",
        trace__tier=tier,
    )
    return envelope, raw


def mutate(
    envelope: dict[str, Any], dotted: str, value: Any = ..., *, delete: bool = False
) -> dict[str, Any]:
    """A deep copy of ``envelope`` with one (dotted) field set or deleted."""
    return edit(envelope, **{dotted.replace(".", "__"): DROP if delete else value})


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
