"""The MCP tools load contracts through the commands' one loader: a set that
fails to load is the typed fail-closed value for the gate, and an error reply (never an
exception, never an empty set) for the tools that show or check contracts."""

from __future__ import annotations

from pathlib import Path

from eidolons.ecl.contract import ContractSetUnavailable
from eidolons.hosts.mcp.tools import Toolbox


def test_a_broken_contract_dir_is_unavailable_and_an_error_reply(tmp_path: Path) -> None:
    (tmp_path / ".eidolons").mkdir()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x.yaml").write_text("from: atlas\nto: [vigil\n")
    tools = Toolbox(tmp_path, contract_dirs=[bad], memory=False, log=lambda line: None)
    assert isinstance(tools._contracts(), ContractSetUnavailable)
    reply = tools.contracts_show()
    assert reply.is_error and reply.text.startswith("contracts_show: ")
    assert "invalid YAML" in reply.text
    good = Toolbox(tmp_path, memory=False, log=lambda line: None).contracts_show()
    assert not good.is_error and "atlas -> vigil" in good.text
