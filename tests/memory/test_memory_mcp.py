"""The MCP client against a real MCP server (``crystalium_server.py``, same SDK) over stdio
and streamable HTTP: both tool spellings, the same shapes as the local backend, the error
mapping, and the graceful skip when the server cannot be used."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp SDK (eidolons[mcp]) is not installed")

from eidolons.memory import (
    INGEST_BAD_ENVELOPE,
    INGEST_PAYLOAD_HASH_MISMATCH,
    INPUT_VALIDATION,
    RATE_LIMIT,
    SERVER_ERROR,
    UNKNOWN_TOOL,
    MemoryConfig,
    open_memory,
)
from eidolons.memory.local import LocalMemory
from eidolons.memory.mcp_client import (
    McpMemory,
    interpret_tool_result,
    resolve_tools,
)

from .conftest import PROJECT, free_port, make_handoff, mutate, server_command


def client(data_dir: Path, *options: str, **config: Any) -> McpMemory:
    settings: dict[str, Any] = {"first_call_timeout": 30.0, "call_timeout": 15.0}
    settings.update(config)
    return McpMemory(
        MemoryConfig(mode="mcp", command=server_command(data_dir, *options), **settings)
    )


@pytest.fixture(scope="module")
def stdio_new(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpMemory]:
    memory = client(tmp_path_factory.mktemp("new"))
    yield memory
    memory.close()


@pytest.fixture(scope="module")
def stdio_old(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpMemory]:
    memory = client(tmp_path_factory.mktemp("old"), "--spelling", "old")
    yield memory
    memory.close()


# -- happy paths -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "names"),
    [
        ("stdio_new", {"recall": "recall", "ingest": "ingest", "commit": "commit"}),
        (
            "stdio_old",
            {
                "recall": "crystalium.recall",
                "ingest": "crystalium.ingest",
                "commit": "crystalium.commit",
            },
        ),
    ],
)
def test_stdio_roundtrip_with_either_tool_spelling(
    request: pytest.FixtureRequest, fixture: str, names: dict[str, str]
) -> None:
    memory: McpMemory = request.getfixturevalue(fixture)
    envelope, raw = make_handoff(objective=f"Roundtrip through the {fixture} server.")
    first = memory.ingest(envelope, raw)
    assert first["status"] == "ingested", first
    assert first["backend"] == "mcp"
    assert memory.stats()["tools"] == names
    assert memory.backend == "mcp"
    again = memory.ingest(envelope, raw)
    assert (again["id"], again["commit_status"]) == (first["id"], "merged")
    found = memory.recall({"project": PROJECT}, f"roundtrip {fixture}", k=5)
    assert found["backend"] == "mcp"
    assert [record["id"] for record in found["records"]] == [first["id"]]


def test_refusal_without_is_error_is_still_a_refusal(stdio_old: McpMemory) -> None:
    # v1.x servers return {"error": ...} with isError false: the client sniffs the body.
    envelope, raw = make_handoff()
    result = stdio_old.ingest(envelope, raw + b"!")
    assert result["error"] == INGEST_PAYLOAD_HASH_MISMATCH
    assert result["backend"] == "mcp"


def test_input_validation_text_is_mapped(stdio_new: McpMemory) -> None:
    result = stdio_new.recall({}, "q", k="5")  # type: ignore[arg-type]
    assert result["error"] == INPUT_VALIDATION
    assert result["message"].startswith("Input validation error: ")


def test_non_utf8_payload_travels_as_base64(stdio_new: McpMemory) -> None:
    # The server hashes the transport string, so a binary payload is refused there: the
    # client reports the server's answer rather than pretending.
    envelope, raw = make_handoff(payload=b"\xff\xfe\x00binary")
    assert stdio_new.ingest(envelope, raw)["error"] == INGEST_PAYLOAD_HASH_MISMATCH


def test_stats_describes_the_server(stdio_new: McpMemory) -> None:
    stats = stdio_new.stats()
    assert stats["backend"] == "mcp"
    assert stats["status"] == "connected"
    assert stats["transport"] == "stdio"
    assert stats["server"]["name"] == "crystalium-test"


def test_same_shapes_as_the_local_backend(tmp_path: Path) -> None:
    local = LocalMemory(tmp_path / "local", project=PROJECT)
    remote = client(tmp_path / "remote")
    try:
        # summaries of different lengths, so no two BM25 scores tie (a tie is broken by the
        # random crystal id, which differs between the two stores)
        handoffs = [
            make_handoff(
                objective=f"Parity probe {words}.", payload=f"{words} body", message_id=mid
            )
            for words, mid in (
                ("alpha", "11111111-1111-4111-8111-111111111111"),
                ("beta with more words", "22222222-2222-4222-8222-222222222222"),
            )
        ]
        handoffs.append(make_handoff(objective="Parity quarantined.", sender="mallory"))
        id_map: dict[str, str] = {}
        for envelope, raw in handoffs:
            a, b = local.ingest(envelope, raw), remote.ingest(envelope, raw)
            id_map[b["id"]] = a["id"]
            assert strip(a, "id") == strip(b, "id")
        # refusals and schema errors: same codes, same messages
        bad = mutate(handoffs[0][0], "integrity.value", "cd" * 32)
        a, b = local.ingest(bad, handoffs[0][1]), remote.ingest(bad, handoffs[0][1])
        assert a["error"] == b["error"] == INGEST_BAD_ENVELOPE
        assert strip(a) == strip(b)
        a, b = local.recall({}, "q", k=True), remote.recall({}, "q", k=True)
        assert strip(a) == strip(b)
        for args in (
            ({}, "parity probe alpha", 5, None),
            ({"project": PROJECT}, "parity", 2, ["episodic"]),
            ({"agent_class_visibility": "vigil"}, "parity quarantined", 5, None),
            ({"project": "elsewhere"}, "parity", 5, None),
        ):
            a, b = local.recall(*args), remote.recall(*args)
            for record in b["records"]:
                record["id"] = id_map[record["id"]]
            assert strip_access(a) == strip_access(b)
            assert a["records"] or args[0].get("project") == "elsewhere"
        a = local.recall({}, "parity", explain=True)
        b = remote.recall({}, "parity", explain=True)
        assert set(a["explain"]) == set(b["explain"])
    finally:
        local.close()
        remote.close()


def strip(result: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k not in {"backend", *keys}}


def strip_access(result: dict[str, Any]) -> dict[str, Any]:
    out = strip(result)
    out["records"] = [strip(record, "last_access") for record in result["records"]]
    return out


# -- streamable HTTP ---------------------------------------------------------------------


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    command = server_command(tmp_path / "http", "--transport", "http", "--port", str(port))
    proc = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("the HTTP test server did not start")
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_streamable_http_roundtrip(http_server: str) -> None:
    memory = McpMemory(MemoryConfig(mode="mcp", url=http_server, first_call_timeout=20.0))
    try:
        envelope, raw = make_handoff(objective="Over streamable HTTP.")
        ingested = memory.ingest(envelope, raw)
        assert ingested["status"] == "ingested"
        assert ingested["backend"] == "mcp"
        found = memory.recall({}, "streamable http")
        assert [r["id"] for r in found["records"]] == [ingested["id"]]
        assert memory.stats()["transport"] == "http"
    finally:
        start = time.monotonic()
        memory.close()
        assert time.monotonic() - start < 5


# -- selection through the environment ---------------------------------------------------


def test_open_memory_mcp_from_environment_forwards_crystalium_vars(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EIDOLONS_MEMORY", "mcp")
    monkeypatch.setenv(
        "EIDOLONS_MEMORY_COMMAND", shlex.join(server_command(tmp_path / "env", project=None))
    )
    monkeypatch.setenv("CRYSTALIUM_TEST_PROJECT", "fromenv")
    memory = open_memory(tmp_path)
    assert isinstance(memory, McpMemory)
    try:
        envelope, raw = make_handoff(objective="Configured by environment.")
        assert memory.ingest(envelope, raw)["status"] == "ingested"
        assert memory.recall({"project": "fromenv"}, "configured environment")["records"]
        assert memory.recall({"project": PROJECT}, "configured environment")["records"] == []
    finally:
        memory.close()


# -- errors and graceful skips -----------------------------------------------------------


@pytest.mark.parametrize("spelling", ["new", "old"])
def test_server_reason_code_is_mapped(tmp_path: Path, spelling: str) -> None:
    memory = client(tmp_path, "--spelling", spelling, "--rate-limit", "1")
    try:
        envelope, raw = make_handoff()
        assert memory.ingest(envelope, raw)["status"] == "ingested"
        limited = memory.recall({}, "anything")
        assert limited["error"] == RATE_LIMIT
        assert limited["advice"] == "wait"
        assert limited["backend"] == "mcp"
        assert memory.backend == "mcp"  # a refusal is an answer, not an outage
    finally:
        memory.close()


def test_jsonrpc_error_is_server_error_and_session_survives(tmp_path: Path) -> None:
    memory = client(tmp_path, "--fail-tool", "ingest")
    try:
        envelope, raw = make_handoff()
        failed = memory.ingest(envelope, raw)
        assert failed["error"] == SERVER_ERROR
        assert "exploded" in failed["message"]
        assert memory.recall({}, "anything")["backend"] == "mcp"
    finally:
        memory.close()


def test_unadvertised_tool_is_skipped(tmp_path: Path) -> None:
    memory = client(tmp_path, "--omit-tool", "ingest")
    try:
        envelope, raw = make_handoff()
        skipped = memory.ingest(envelope, raw)
        assert skipped["status"] == "skipped"
        assert skipped["backend"] == "unavailable"
        assert "ingest" in skipped["reason"]
        assert memory.recall({}, "anything")["backend"] == "mcp"
    finally:
        memory.close()


@pytest.mark.parametrize(
    "command",
    [
        ("/nonexistent/crystalium-server",),
        (sys.executable, "-c", "pass"),
        (sys.executable, "-c", "import time; print('not json-rpc', flush=True); time.sleep(30)"),
    ],
    ids=["missing-binary", "exits-at-once", "not-mcp"],
)
def test_unreachable_stdio_server_is_a_silent_skip(command: tuple[str, ...]) -> None:
    memory = McpMemory(
        MemoryConfig(mode="mcp", command=command, first_call_timeout=0.2, close_timeout=0.2)
    )
    start = time.monotonic()
    recalled = memory.recall({}, "anything")
    envelope, raw = make_handoff()
    ingested = memory.ingest(envelope, raw)
    memory.close()
    assert time.monotonic() - start < 6
    assert recalled["status"] == "skipped" and recalled["records"] == []
    assert recalled["backend"] == ingested["backend"] == "unavailable"
    assert ingested["status"] == "skipped"
    assert memory.backend == "unavailable"
    assert recalled["reason"]


def test_unreachable_http_server_is_a_silent_skip() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"  # nothing listens there
    memory = McpMemory(MemoryConfig(mode="mcp", url=url, first_call_timeout=5.0))
    result = memory.recall({}, "anything")
    memory.close()
    assert result["status"] == "skipped"
    assert result["backend"] == memory.backend == "unavailable"


def test_timeout_tears_the_session_down(tmp_path: Path) -> None:
    memory = client(tmp_path, "--hang-tool", "recall", call_timeout=0.3)
    envelope, raw = make_handoff()
    assert memory.ingest(envelope, raw)["status"] == "ingested"  # the first call
    start = time.monotonic()
    hung = memory.recall({}, "anything")
    assert time.monotonic() - start < 5
    assert hung["status"] == "skipped"
    assert memory.backend == "unavailable"
    assert memory.ingest(envelope, raw)["status"] == "skipped"  # stays unavailable
    start = time.monotonic()
    memory.close()
    assert time.monotonic() - start < 5


def test_server_dying_mid_session_is_a_skip(tmp_path: Path) -> None:
    pid_file = tmp_path / "server.pid"
    memory = client(tmp_path, "--pid-file", str(pid_file))
    try:
        envelope, raw = make_handoff()
        assert memory.ingest(envelope, raw)["status"] == "ingested"
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
        time.sleep(0.2)
        result = memory.recall({}, "anything")
        assert result["status"] == "skipped"
        assert memory.backend == "unavailable"
    finally:
        memory.close()


def test_close_is_idempotent_and_later_calls_skip(tmp_path: Path) -> None:
    memory = client(tmp_path)
    assert memory.recall({}, "x")["backend"] == "mcp"
    memory.close()
    memory.close()
    assert memory.recall({}, "x")["status"] == "skipped"


def test_close_without_any_call_starts_nothing() -> None:
    memory = McpMemory(MemoryConfig(mode="mcp", command=("/nonexistent",)))
    memory.close()
    assert memory.recall({}, "x")["reason"] == "memory client closed"


# -- pure helpers ------------------------------------------------------------------------


def test_tool_resolution_prefers_the_new_spelling() -> None:
    assert resolve_tools(["crystalium.recall", "recall", "crystalium_ingest"]) == {
        "recall": "recall",
        "ingest": "crystalium_ingest",
    }
    assert resolve_tools(["something_else"]) == {}


def _result(text: str | None, *, is_error: bool = False, v1: bool = False) -> Any:
    content = [] if text is None else [SimpleNamespace(type="text", text=text)]
    if v1:
        return SimpleNamespace(content=content, isError=is_error, structuredContent=None)
    return SimpleNamespace(content=content, is_error=is_error, structured_content=None)


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (_result('{"records": []}'), {"records": [], "backend": "mcp"}),
        (_result('{"error": "TIER_VIOLATION", "message": "no"}', is_error=True), "TIER_VIOLATION"),
        (_result('{"error": "TIER_VIOLATION", "message": "no"}', v1=True), "TIER_VIOLATION"),
        (_result("Input validation error: bad", is_error=True), INPUT_VALIDATION),
        (_result("Traceback: boom", is_error=True), SERVER_ERROR),
        (_result('{"ok": true}', is_error=True), SERVER_ERROR),
        (_result("[1, 2]"), SERVER_ERROR),
        (_result(None), SERVER_ERROR),
        (_result('{"error": 42}'), SERVER_ERROR),
        (_result('{"error": "UNKNOWN_TOOL"}'), UNKNOWN_TOOL),
    ],
)
def test_tool_result_interpretation(result: Any, expected: Any) -> None:
    answer = interpret_tool_result(result)
    assert answer["backend"] == "mcp"
    if isinstance(expected, dict):
        assert answer == expected
    else:
        assert answer["error"] == expected
        assert "message" in answer
