"""The MCP tools in a project with a trust store (signed receipts, ADR 0011/0033): the
server never mints the orchestrator's evidence, and read_verified accepts only a receipt.

In-process (the toolbox the server wraps): the transport is covered by test_mcp_server.py.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eidolons.hosts.mcp.tools import Toolbox
from tests.conftest import Run, clean_env, emit_cmd, emit_payload, run_cli


def test_verify_envelope_tool_mints_no_receipt_and_read_verified_needs_one(
    project: Path, tmp_path: Path
) -> None:
    orchestrator = clean_env(XDG_CONFIG_HOME=str(tmp_path / "orchestrator-config"))
    agent = clean_env(XDG_CONFIG_HOME=str(tmp_path / "agent-config"))
    assert run_cli("keys", "init", "--root", project, cwd=project, env=orchestrator).code == 0
    payload = project / "handoff" / "scout-report.md"
    payload.parent.mkdir()
    payload.write_text("# Report\n\n## Decision target\nSIGNED-PAYLOAD-SECRET\n")
    r = run_cli(*emit_cmd(payload, "--root", project), cwd=project, env=agent)
    assert r.code == 0, r.err
    envelope = payload.with_name("scout-report.envelope.json")
    receipt = payload.with_name("scout-report.receipt.json")
    box = Toolbox(root=project.resolve(), bound="vigil", memory=False)

    checked = box.verify_envelope("handoff/scout-report.envelope.json")
    assert checked.is_error is False and checked.structured is not None
    assert checked.structured["verdict"] == "pass" and checked.structured["recorded"] is False
    assert not receipt.exists()
    refused = box.read_verified("handoff/scout-report.md")
    assert refused.is_error is True
    assert refused.text.startswith("[vigil-verify-incoming] REFUSE: UNVERIFIED from atlas\n")
    assert "SIGNED-PAYLOAD-SECRET" not in refused.text + str(refused.structured)

    r = run_cli(
        "verify-envelope", envelope, "--block", "--root", project, cwd=project, env=orchestrator
    )
    assert r.code == 0, r.err
    assert receipt.exists()
    passed = box.read_verified("handoff/scout-report.md")
    assert passed.is_error is False, passed.text
    assert passed.text.encode() == payload.read_bytes()
    assert passed.structured is not None and passed.structured["evidence"] == "signed-receipt"


def test_read_verified_of_a_payload_deleted_between_its_checks_is_a_refusal(
    cli: Callable[..., Run], project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The payload is a file when read_verified looks, and gone when it takes its size: a
    refusal from the gate, never an internal error."""
    payload, envelope, _ = emit_payload(cli, project)
    assert cli("verify-envelope", envelope, "--block").code == 0
    real_stat = os.stat

    def then_deleted(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        answer = real_stat(path, *args, **kwargs)
        if os.fspath(path) == str(payload):
            payload.unlink(missing_ok=True)
        return answer

    monkeypatch.setattr(os, "stat", then_deleted)
    box = Toolbox(root=project, bound="vigil", memory=False, log=lambda line: None)
    refused = box.read_verified(str(payload.relative_to(project)))
    assert refused.is_error is True
    first = refused.text.splitlines()[0]
    assert first == "[vigil-verify-incoming] REFUSE: INTEGRITY_MISMATCH from atlas"
