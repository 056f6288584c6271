"""Helpers for the memory tests: envelopes that pass the store's checks, a local store,
and the command line of the test CRYSTALIUM server (``crystalium_server.py``)."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from eidolons.memory import check_recall_args, clamp_k
from eidolons.memory.local import LocalMemory
from eidolons.memory.rules import Scope, _now, identifier_text
from tests._builders import DROP, edit, envelope_for

HERE = Path(__file__).resolve().parent
FORK = HERE / "server_fork.py"
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


def seed(store: LocalMemory, layer: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Store one ``layer`` crystal with the visibility of ``payload["scope"]`` (T2,
    unverified): the semantic and procedural rows a receiver's ingest never writes.
    Answers ``{"status": "committed", "id", "scope_normalized"?}``."""
    scope = payload.get("scope") or {}
    body = payload.get("body")
    excerpt = str(body) if body else ""
    project_raw = scope.get("project") or store.project
    ident, now = str(uuid.uuid4()), _now()
    conn = store._connection(create=True)
    assert conn is not None
    conn.execute(
        "INSERT INTO crystals (id, layer, summary, body_excerpt, project, project_raw,"
        " agent_class_visibility, trust_tier, validation_state, importance, content_ref,"
        " payload_json, created_at, t_valid_from, last_access, tri_body)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, 'T2', 'unverified', 0.3, '', ?, ?, ?, ?, ?)",
        (
            ident,
            layer,
            payload["summary"],
            excerpt,
            store.project,
            project_raw,
            scope.get("agent_class_visibility"),
            json.dumps(payload),
            now,
            now,
            now,
            identifier_text(excerpt),
        ),
    )
    result: dict[str, Any] = {"status": "committed", "id": ident}
    if project_raw != store.project:
        result["scope_normalized"] = True
    return result


def rank_ids(
    store: LocalMemory,
    scope: dict[str, Any],
    query: str,
    k: int = 5,
    layers: list[str] | None = None,
    *,
    arms: tuple[str, ...] = ("words", "trigram"),
) -> list[str]:
    """The ids recall ranks first, before packing, for one or both arms (no access bump)."""
    problem, chosen = check_recall_args(scope, query, k, layers)
    assert problem is None, problem
    conn = store._connection(create=False)
    if conn is None:
        return []
    where = Scope(
        scope.get("project") or store.project, scope.get("agent_class_visibility"), chosen
    )
    fused, _ = store._rank(conn, where, query, clamp_k(k), arms=arms)
    return [ident for ident, _ in fused[: clamp_k(k)]]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LocalMemory]:
    memory = LocalMemory(tmp_path / "store", project=PROJECT)
    yield memory
    memory.close()


@pytest.fixture
def handoff() -> Callable[..., Handoff]:
    return make_handoff


def server_command(data_dir: Path, *options: str, project: str | None = PROJECT) -> tuple[str, ...]:
    """The stdio command line of the test CRYSTALIUM server: a launcher that has it forked
    from a parent which imported it once (``server_fork.py``)."""
    head = (sys.executable, "-S", str(FORK), _fork_parent(), "--data-dir", str(data_dir))
    return (*head, *(("--project", project) if project else ()), *options)


_PARENT: list[str] = []  # the forking parent's socket, once started (one per process)


def _fork_parent() -> str:
    if not _PARENT:
        where = tempfile.mkdtemp(prefix="crys-")  # short: a socket path has 108 bytes
        path = os.path.join(where, "fork.sock")
        proc = subprocess.Popen(
            [sys.executable, str(FORK), "--parent", path], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"

        def stop() -> None:
            proc.kill()
            proc.wait()
            shutil.rmtree(where, ignore_errors=True)

        atexit.register(stop)
        _PARENT.append(path)
    return _PARENT[0]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
