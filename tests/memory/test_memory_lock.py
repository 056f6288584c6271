"""The memory store's creation lock is waited for until the trace timeout, no longer.

An agent can write the project's files, ``.eidolons/memory/.create.lock`` included, and
keep a ``flock`` on it. The store is then skipped as when it cannot be opened: recall
and ingest answer ``skipped`` within the deadline, and the receiver's verdict does not
change. Each lock here is held by another process.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from eidolons.memory.local import CREATION_LOCK, DB_NAME, LocalMemory
from tests._locks import Clock, held
from tests.conftest import Run, clean_env
from tests.memory.conftest import PROJECT, Handoff
from tests.test_receiver import handoff as receiver_handoff

LATE = 4.0  # a call that took this long waited past its deadline


@pytest.fixture(autouse=True)
def _quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EIDOLONS_TRACE_TIMEOUT_S", "0.2")


def test_ingest_is_skipped_within_the_deadline_while_the_lock_is_held(
    tmp_path: Path, handoff: Callable[..., Handoff]
) -> None:
    where = tmp_path / "store"
    where.mkdir()
    envelope, payload = handoff()
    with held(where / CREATION_LOCK), LocalMemory(where, project=PROJECT) as memory:
        clock = Clock()
        answer = memory.ingest(envelope, payload)
        assert clock.elapsed < LATE
    assert answer["status"] == "skipped" and answer["backend"] == "unavailable"
    assert "locked by another process" in answer["reason"]
    with LocalMemory(where, project=PROJECT) as memory:  # released: the store is made
        assert memory.ingest(envelope, payload)["status"] == "ingested"


def test_recall_is_skipped_within_the_deadline_when_an_upgrade_waits_for_the_lock(
    tmp_path: Path, handoff: Callable[..., Handoff]
) -> None:
    where = tmp_path / "store"
    envelope, payload = handoff()
    with LocalMemory(where, project=PROJECT) as memory:
        assert memory.ingest(envelope, payload)["status"] == "ingested"
    with sqlite3.connect(where / DB_NAME) as conn:  # an older store: opening upgrades it
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    conn.close()
    with held(where / CREATION_LOCK), LocalMemory(where, project=PROJECT) as memory:
        clock = Clock()
        answer = memory.recall({"project": PROJECT}, "scout", k=5)
        assert clock.elapsed < LATE
    assert answer["status"] == "skipped" and answer["records"] == []
    assert "locked by another process" in answer["reason"]


def test_a_held_creation_lock_never_changes_the_receivers_verdict(
    cli: Callable[..., Run], project: Path
) -> None:
    payload = receiver_handoff(cli, project, "atlas", "vigil", "PROPOSE", "scout-report")
    store = project / ".eidolons" / "memory"
    store.mkdir()
    env = clean_env(EIDOLONS_TRACE_TIMEOUT_S="0.2")
    with held(store / CREATION_LOCK):
        clock = Clock()
        r = cli("verify-incoming", payload, "--as", "vigil", "--json", env=env)
        assert clock.elapsed < LATE
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["status"] == "pass" and doc["ingest"]["status"] == "skipped"
    assert "locked by another process" in doc["ingest"]["reason"]
