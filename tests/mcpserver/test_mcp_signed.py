"""The MCP tools in a project with a trust store (signed receipts, ADR 0011/0033): the
server never mints the orchestrator's evidence, and read_verified accepts only a receipt.

In-process (the toolbox the server wraps): the transport is covered by test_mcp_server.py.
"""

from __future__ import annotations

from pathlib import Path

from eidolons.hosts.mcp.tools import Toolbox
from tests.conftest import clean_env, emit_cmd, run_cli


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
