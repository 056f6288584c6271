"""``read_verified`` and ``verify_incoming`` over MCP wait for a held lock until the trace
timeout, then answer: a pass that cannot be recorded is refused, a memory store whose
creation lock is held is skipped. Each lock is held by another process."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from eidolons.memory.local import CREATION_LOCK
from tests._locks import Clock, held
from tests.mcpserver.conftest import McpSession, _session, dump, make_handoff, texts

LATE = 4.0  # a call that took this long waited past its deadline


@pytest.fixture(scope="module")
def quick(mcp_root: Path) -> Iterator[McpSession]:
    """A bound server with memory whose gates wait at most half a second for a lock."""
    yield from _session(mcp_root, "--as", "vigil", EIDOLONS_TRACE_TIMEOUT_S="0.2")


@pytest.mark.parametrize("tool", ["read_verified", "verify_incoming"])
def test_a_held_trace_lock_refuses_within_the_deadline(
    quick: McpSession, mcp_root: Path, tool: str
) -> None:
    h = make_handoff(mcp_root)
    trace = mcp_root / ".eidolons" / ".trace" / f"{h.thread}.jsonl"
    before = h.trace()
    with held(trace):
        clock = Clock()
        r = quick.call(tool, {"artifact": h.rel})
        assert clock.elapsed < LATE
    assert r.is_error is True
    first = texts(r).splitlines()[0]
    assert first == "[vigil-verify-incoming] REFUSE: UNVERIFIED from atlas", texts(r)
    assert "locked by another process" in texts(r)
    assert h.secret not in dump(r)
    assert h.trace() == before  # no verify_pass: nothing was recorded
    again = quick.call(tool, {"artifact": h.rel})  # released: the gate passes
    assert again.is_error is False, texts(again)


def test_a_held_memory_lock_never_changes_the_verdict(quick: McpSession, mcp_root: Path) -> None:
    h = make_handoff(mcp_root)
    store = mcp_root / ".eidolons" / "memory"
    shutil.rmtree(store, ignore_errors=True)  # a pass made by another test made it
    store.mkdir()
    with held(store / CREATION_LOCK):
        clock = Clock()
        r = quick.call("read_verified", {"artifact": h.rel})
        assert clock.elapsed < LATE
    assert r.is_error is False, texts(r)
    assert r.content[0].text.encode("utf-8") == h.payload.read_bytes()
