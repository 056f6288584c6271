"""Backend selection, the gate-facing helpers and callbacks, and the promise
that ``import eidolons.memory`` stays cheap."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import eidolons.memory as memory_api
from eidolons.errors import UsageError
from eidolons.memory import (
    MemoryConfig,
    build_recall_query,
    ingest_after_pass,
    open_memory,
    recall_before,
)
from eidolons.memory.local import LocalMemory

from .conftest import make_handoff


@pytest.mark.parametrize(
    ("env", "mode", "command", "url"),
    [
        ({}, "local", (), None),
        ({"EIDOLONS_MEMORY": "off"}, "off", (), None),
        ({"EIDOLONS_MEMORY": " LOCAL "}, "local", (), None),
        (
            {"EIDOLONS_MEMORY": "mcp", "EIDOLONS_MEMORY_COMMAND": "docker run -i 'my image' serve"},
            "mcp",
            ("docker", "run", "-i", "my image", "serve"),
            None,
        ),
        (
            {"EIDOLONS_MEMORY": "mcp", "EIDOLONS_MEMORY_URL": "http://127.0.0.1:8848/mcp"},
            "mcp",
            (),
            "http://127.0.0.1:8848/mcp",
        ),
    ],
)
def test_config_from_env(
    env: dict[str, str], mode: str, command: tuple[str, ...], url: str | None
) -> None:
    config = MemoryConfig.from_env(env)
    assert (config.mode, config.command, config.url) == (mode, command, url)


def test_config_timeouts_and_project() -> None:
    config = MemoryConfig.from_env(
        {
            "EIDOLONS_MEMORY_TIMEOUT": "2.5",
            "EIDOLONS_MEMORY_FIRST_TIMEOUT": "90",
            "EIDOLONS_MEMORY_PROJECT": "slug",
        }
    )
    assert (config.call_timeout, config.first_call_timeout, config.project) == (2.5, 90.0, "slug")
    defaults = MemoryConfig.from_env({})
    assert (defaults.call_timeout, defaults.first_call_timeout) == (30.0, 120.0)


@pytest.mark.parametrize(
    "env",
    [
        {"EIDOLONS_MEMORY": "crystalium"},
        {"EIDOLONS_MEMORY": "mcp"},
        {
            "EIDOLONS_MEMORY": "mcp",
            "EIDOLONS_MEMORY_COMMAND": "x",
            "EIDOLONS_MEMORY_URL": "http://a",
        },
        {"EIDOLONS_MEMORY": "mcp", "EIDOLONS_MEMORY_URL": "ftp://host/mcp"},
        {"EIDOLONS_MEMORY": "mcp", "EIDOLONS_MEMORY_COMMAND": "unbalanced 'quote"},
        {"EIDOLONS_MEMORY_TIMEOUT": "soon"},
        {"EIDOLONS_MEMORY_TIMEOUT": "0"},
        {"EIDOLONS_MEMORY_FIRST_TIMEOUT": "-1"},
    ],
)
def test_malformed_config_is_a_usage_error(env: dict[str, str]) -> None:
    with pytest.raises(UsageError):
        MemoryConfig.from_env(env)


def test_open_memory_selects_the_backend(tmp_path: Path) -> None:
    assert open_memory(tmp_path, MemoryConfig(mode="off")) is None
    local = open_memory(tmp_path, MemoryConfig())
    assert isinstance(local, LocalMemory)
    assert local.backend == "local"
    assert local.project == tmp_path.name
    assert local.path == tmp_path / ".eidolons" / "memory" / "memory.sqlite3"
    assert not (tmp_path / ".eidolons").exists()  # opening touches nothing
    named = open_memory(tmp_path, MemoryConfig(project="slug"))
    assert named is not None and named.project == "slug"


def test_open_memory_reads_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EIDOLONS_MEMORY", "off")
    assert open_memory(tmp_path) is None
    monkeypatch.setenv("EIDOLONS_MEMORY", "nonsense")
    with pytest.raises(UsageError):
        open_memory(tmp_path)


def test_missing_mcp_sdk_degrades_to_a_skip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # import mcp -> ImportError
    memory = open_memory(tmp_path, MemoryConfig(mode="mcp", command=("server",)))
    assert memory is not None
    result = memory.recall({}, "anything")
    memory.close()
    assert result["status"] == "skipped"
    assert result["backend"] == memory.backend == "unavailable"
    assert "mcp SDK not importable" in result["reason"]


# -- the helpers the receiver gate calls -----------------------------------------------


def test_build_recall_query() -> None:
    envelope, _ = make_handoff(objective="Audit the trace writer.", sender="forge", kind="spec")
    assert build_recall_query(envelope) == "Audit the trace writer. forge spec"
    assert build_recall_query({"objective": 3, "from": "x"}) == ""


def test_recall_before_and_ingest_after_pass(tmp_path: Path) -> None:
    memory = open_memory(tmp_path, MemoryConfig())
    assert memory is not None
    envelope, raw = make_handoff(objective="Audit the trace writer.", receiver="vigil")
    assert recall_before(memory, envelope, "vigil")["records"] == []
    stored = ingest_after_pass(memory, envelope, raw)
    assert stored["status"] == "ingested"
    later, _ = make_handoff(objective="Audit the trace writer again.")
    recalled = recall_before(memory, later, "vigil")
    assert [r["id"] for r in recalled["records"]] == [stored["id"]]
    assert recalled["budget"]["k_applied"] == 5
    memory.close()


class Exploding:
    backend = "local"
    project = "p"

    def recall(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        raise RuntimeError("disk on fire")

    def ingest(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        raise RuntimeError("disk on fire")

    def stats(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass


def test_gate_helpers_never_raise() -> None:
    envelope, raw = make_handoff()
    recalled = recall_before(Exploding(), envelope, "vigil")
    assert recalled["status"] == "skipped" and "disk on fire" in recalled["reason"]
    ingested = ingest_after_pass(Exploding(), envelope, raw)
    assert ingested["status"] == "skipped" and "disk on fire" in ingested["reason"]
    assert recall_before(None, envelope, "vigil")["status"] == "skipped"
    assert ingest_after_pass(None, envelope, raw)["status"] == "skipped"


# -- the gate's callbacks (memory never imports the gate) ---------------------------


def test_gate_callbacks_recall_then_ingest_only_verified_bytes(tmp_path: Path) -> None:
    class Env:
        def __init__(self, data: dict[str, Any]) -> None:
            self.data = data

    envelope, raw = make_handoff()
    memory = open_memory(tmp_path, MemoryConfig())
    assert memory is not None
    try:
        on_envelope, on_pass = memory_api.gate_callbacks(memory, "vigil")
        assert on_envelope(Env(envelope))["recall"]["backend"] == "local"
        skipped = on_pass(Env(envelope), None)["ingest"]
        assert skipped["status"] == "skipped" and "not read" in skipped["reason"]
        assert on_pass(Env(envelope), raw)["ingest"]["status"] == "ingested"
    finally:
        memory.close()


# -- import cost -----------------------------------------------------------------------


def test_importing_the_memory_api_is_cheap() -> None:
    code = (
        "import sys, eidolons.memory, eidolons.cli.memory;"
        "heavy = [m for m in ('sqlite3', 'asyncio', 'mcp', 'anyio', 'eidolons.memory.local',"
        " 'eidolons.memory.mcp_client') if m in sys.modules];"
        "print(','.join(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""
    assert memory_api.__all__  # the public names exist
