"""The attack tests, one file per surface attacked (``<surface>.py``): collected as test
modules, and given the fixtures they share (an orphaned hand-off, the host hooks' project,
a signed project)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import emit_payload
from tests.hosts.conftest import handoff, sealed
from tests.security._probes import Cli
from tests.test_receipts import signed

__all__ = ["handoff", "orphan", "sealed", "signed"]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    """Every ``*.py`` here but the helpers (``_*``) and this file is a test module."""
    if file_path.suffix == ".py" and not file_path.name.startswith(("_", "conftest")):
        return pytest.Module.from_parent(parent, path=file_path)
    return None


@pytest.fixture
def orphan(cli: Cli, project: Path) -> Path:
    """A hand-off emitted and verified, its envelope then deleted by the agent, its
    payload rewritten: the trace names it, so every gate must refuse it."""
    payload, envelope, _ = emit_payload(cli, project, "notes/report.md")
    assert cli("verify-envelope", envelope, "--block").code == 0
    envelope.unlink()
    payload.write_text("# forged\n")
    (project / "src.py").write_text("x = 1\n")
    return payload
