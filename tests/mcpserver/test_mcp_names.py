"""A file name that is not UTF-8 never ends ``eidolons mcp serve``.

Python spells the byte ``\\xff`` of a name as the lone surrogate ``\\udcff``, which no
JSON-RPC message can carry: a reply holding one was never sent, the pending call was
never answered and every later call failed. Every reply (text and structured content
alike) passes through one sanitiser, which escapes such characters as the text's
escaping spells them (``\\udcff``, six ASCII characters) and leaves every other string as
it is. Each tool is called with the byte in every place a name reaches its reply from:
the project root, a ``--contracts`` directory, an envelope in a checked directory; then
the server must still answer the next call.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eidolons.hosts.mcp.tools import Reply, wire_safe
from tests.mcpserver.conftest import McpSession, _session, make_handoff, texts

FF = os.fsdecode(b"\xff")  # the name's byte as Python spells it: "\udcff"
ESCAPED = "\\udcff"  # how a reply spells it
BUILTIN = Path(__file__).resolve().parents[2] / "src" / "eidolons" / "data" / "contracts"


def strings(value: Any) -> Iterator[str]:
    """Every str in a JSON-like value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings(key)
            yield from strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings(item)


def names_escaped(result: Any) -> str:
    """All the strings of a result's text and structured parts, after checking that the
    name's byte is there escaped, and nowhere as the raw surrogate."""
    found = [c.text for c in result.content if getattr(c, "type", "") == "text"]
    found += list(strings(result.structured_content))
    assert not any(FF in s for s in found)
    joined = "\n".join(found)
    assert ESCAPED in joined, joined
    return joined


@pytest.fixture(scope="module")
def names_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("names") / f"proj{FF}"
    (root / ".eidolons").mkdir(parents=True)
    (root / "handoffs").mkdir()
    checked = root / "checked"
    checked.mkdir()
    (checked / f"{FF}.envelope.json").write_text("{}\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def contracts(names_root: Path) -> Path:
    where = names_root.parent / f"contracts{FF}"
    where.mkdir()
    shutil.copy(BUILTIN / "atlas-to-vigil.yaml", where / "atlas-to-vigil.yaml")
    return where


@pytest.fixture(scope="module")
def named(names_root: Path, contracts: Path) -> Iterator[McpSession]:
    yield from _session(names_root, "--as", "vigil", "--no-memory", "--contracts", str(contracts))


def still_answers(session: McpSession) -> None:
    r = session.call("trace_show", {"thread": "no-such-thread"})
    assert r.is_error is True and "no trace for thread" in texts(r)


def test_read_verified_answers_with_names_escaped(named: McpSession, names_root: Path) -> None:
    h = make_handoff(names_root)
    r = named.call("read_verified", {"artifact": h.rel})
    assert r.is_error is False, texts(r)
    assert r.content[0].text.encode("utf-8") == h.payload.read_bytes()  # exact, unescaped
    h.payload.write_bytes(b"tampered")
    r = named.call("read_verified", {"artifact": h.rel})
    assert r.is_error is True
    assert texts(r).startswith("[vigil-verify-incoming] REFUSE: INTEGRITY_MISMATCH from atlas")
    assert f"proj{ESCAPED}" in names_escaped(r)
    still_answers(named)


def test_verify_incoming_answers_with_names_escaped(named: McpSession, names_root: Path) -> None:
    h = make_handoff(names_root)
    r = named.call("verify_incoming", {"artifact": h.rel})
    assert r.is_error is False, texts(r)
    assert f"contracts{ESCAPED}" in names_escaped(r)  # the contract's source
    assert r.structured_content["envelope"].startswith(str(names_root.parent))
    still_answers(named)


def test_verify_envelope_answers_with_names_escaped(named: McpSession, names_root: Path) -> None:
    h = make_handoff(names_root, verify=False)
    r = named.call("verify_envelope", {"envelope": h.envelope.relative_to(names_root).as_posix()})
    assert r.is_error is False and r.structured_content["verdict"] == "pass", texts(r)
    assert f"proj{ESCAPED}" in names_escaped(r)
    still_answers(named)


def test_emit_answers_with_names_escaped(named: McpSession, names_root: Path) -> None:
    (names_root / "handoffs" / "vigil-report.md").write_text("# Debug report\n", encoding="utf-8")
    r = named.call(
        "emit",
        {
            "payload": "handoffs/vigil-report.md",
            "to": "kupo@1.0.0",
            "performative": "INFORM",
            "kind": "root-cause-report",
            "objective": "Report.",
        },
    )
    assert r.is_error is False, texts(r)
    assert f"proj{ESCAPED}" in names_escaped(r)
    assert (names_root / "handoffs" / "vigil-report.envelope.json").is_file()
    still_answers(named)


def test_trace_show_answers_in_a_root_so_named(named: McpSession, names_root: Path) -> None:
    h = make_handoff(names_root)
    r = named.call("trace_show", {"thread": h.thread})
    assert r.is_error is False, texts(r)
    assert [e["event"] for e in r.structured_content["events"]] == ["emit", "verify_pass"]
    still_answers(named)


def test_check_answers_for_an_envelope_so_named(named: McpSession, names_root: Path) -> None:
    r = named.call("check", {"paths": ["checked"]})
    assert r.is_error is True  # "{}" fails the MUSTs
    assert f"{ESCAPED}.envelope.json" in names_escaped(r)
    (report,) = r.structured_content["envelopes"]
    assert report["envelope"].endswith(f"checked/{ESCAPED}.envelope.json")
    still_answers(named)


def test_contracts_show_answers_for_a_directory_so_named(named: McpSession) -> None:
    r = named.call("contracts_show", {"sender": "atlas", "receiver": "vigil"})
    assert r.is_error is False, texts(r)
    (record,) = r.structured_content["contracts"]
    assert record["source"].endswith(f"contracts{ESCAPED}/atlas-to-vigil.yaml")
    names_escaped(r)
    still_answers(named)


def test_the_sanitiser_escapes_only_what_cannot_be_encoded() -> None:
    reply = Reply(
        f"line one\nname {FF}",
        {f"k{FF}": [f"v{FF}", {"deep": (FF, 1)}], "plain": "tab\there, é, ✓", "n": 3},
    )
    safe = wire_safe(reply)
    assert safe.text == f"line one\nname {ESCAPED}"  # a newline is no name's problem here
    assert safe.structured == {
        f"k{ESCAPED}": [f"v{ESCAPED}", {"deep": [ESCAPED, 1]}],
        "plain": "tab\there, é, ✓",
        "n": 3,
    }
    verified = Reply("# exact payload\n\x1b[0m text\n", {"digest": "ab"})
    assert wire_safe(verified) == verified  # encodable text is handed over unchanged
