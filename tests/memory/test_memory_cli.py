"""``eidolons memory recall|ingest|stats``: exit codes, output, root discovery, and the
ingest gate step (a refused, skipped or unverifiable hand-off is never ingested)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eidolons.cli import memory as command
from eidolons.cli.main import main
from eidolons.errors import InputError
from eidolons.memory import MemoryConfig, open_memory
from eidolons.memory.local import LocalMemory

from .._builders import write_pair
from ..conftest import Run, run_cli
from .conftest import make_handoff, seed

GATE_REFUSALS = [
    "INTEGRITY_MISMATCH",
    "UNVERIFIED",
    "SCHEMA_INVALID",
    "UNDECLARED_EDGE",
    "PERFORMATIVE_NOT_ALLOWED",
    "ARTIFACT_KIND_NOT_ALLOWED",
    "CONTEXT_OVER_BUDGET",
    "MISSING_REQUIRED_SECTION",
]


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("EIDOLONS_MEMORY", "EIDOLONS_MEMORY_COMMAND", "EIDOLONS_MEMORY_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("EIDOLONS_MEMORY_PROJECT", raising=False)
    project = tmp_path / "proj"
    (project / ".eidolons").mkdir(parents=True)
    monkeypatch.setenv("EIDOLONS_ROOT", str(project))
    return project


def store_of(root: Path) -> LocalMemory:
    memory = open_memory(root, MemoryConfig())
    assert isinstance(memory, LocalMemory)
    return memory


def crystals(root: Path) -> int:
    memory = store_of(root)
    try:
        return int(memory.stats().get("crystals", 0))
    finally:
        memory.close()


def write_handoff(root: Path, objective: str = "Audit the trace writer.") -> tuple[Path, bytes]:
    envelope, raw = make_handoff(objective=objective)
    path = write_pair(root / "handoff", "scout-report", raw, envelope)
    return path, raw


class Judged:
    """What a gate hands its on-pass callback: the envelope it judged."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data


OnPass = Callable[[Any, Any], Any]


def passing(payload: Any) -> Callable[[Path, Path, OnPass], tuple[bool, str]]:
    """A gate that passes and hands ``payload`` (as judged) to the callback."""

    def gate(envelope_path: Path, root: Path, on_pass: OnPass) -> tuple[bool, str]:
        on_pass(Judged(json.loads(envelope_path.read_bytes())), payload)
        return True, "PASS"

    return gate


def memory_cli(capsys: pytest.CaptureFixture[str], *args: str) -> Run:
    code = main(["memory", *args])
    out, err = capsys.readouterr()
    return Run(code, out, err)


# -- recall ------------------------------------------------------------------------------


def test_recall_on_an_empty_project(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = memory_cli(capsys, "recall", "anything", "--json")
    assert r.code == 0, r.err
    assert r.json()["records"] == []
    assert r.json()["backend"] == "local"
    assert not (root / ".eidolons" / "memory").exists()


def test_recall_finds_an_ingested_handoff(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    memory = store_of(root)
    envelope, raw = make_handoff(objective="Audit the trace writer.")
    ident = memory.ingest(envelope, raw)["id"]
    memory.close()
    r = memory_cli(capsys, "recall", "trace writer", "--json")
    assert [record["id"] for record in r.json()["records"]] == [ident]
    text = memory_cli(capsys, "recall", "trace writer")
    assert text.code == 0
    assert "backend local: 1 record (" in text.out
    assert "scout-report: Audit the trace writer." in text.out


def test_recall_as_a_receiver_and_by_layer(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    memory = store_of(root)
    forge_only = seed(
        memory,
        "semantic",
        {"summary": "Secret forge fact.", "scope": {"agent_class_visibility": "forge"}},
    )["id"]
    procedural = seed(memory, "procedural", {"summary": "Forge fact procedure.", "scope": {}})["id"]
    memory.close()

    def found(*args: str) -> set[str]:
        r = memory_cli(capsys, "recall", "forge fact", "--json", *args)
        assert r.code == 0, r.err
        return {record["id"] for record in r.json()["records"]}

    assert found() == {forge_only, procedural}
    assert found("--as", "vigil") == {procedural}
    assert found("--as", "forge") == {forge_only, procedural}
    assert found("--layers", "semantic") == {forge_only}
    assert found("--k", "1") in ({forge_only}, {procedural})


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--layers", "dreams"], "eidolons: --layers: unknown layer(s) dreams"),
        (["--k", "0"], "eidolons: --k must be at least 1"),
        (["--root", "/nonexistent/dir"], "eidolons: --root '/nonexistent/dir' is not a directory"),
    ],
)
def test_recall_usage_errors(
    root: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    r = memory_cli(capsys, "recall", "q", *args)
    assert r.code == 2
    assert r.err.startswith(message)
    assert "Traceback" not in r.err


def test_argparse_errors_exit_2(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert memory_cli(capsys, "recall", "q", "--k", "many").code == 2
    assert memory_cli(capsys).code == 2  # no action


def test_memory_off_and_misconfigured(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EIDOLONS_MEMORY", "off")
    r = memory_cli(capsys, "recall", "q", "--json")
    assert r.code == 3  # not done: exit 3 (ADR 0003)
    assert r.json()["status"] == "skipped"
    assert memory_cli(capsys, "stats").code == 3  # not done: exit 3 (ADR 0003)
    monkeypatch.setenv("EIDOLONS_MEMORY", "sqlite")
    r = memory_cli(capsys, "recall", "q")
    assert r.code == 2
    assert r.err.startswith("eidolons: EIDOLONS_MEMORY must be off, local or mcp")


def test_stats(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = memory_cli(capsys, "stats", "--json")
    assert r.code == 0
    assert (r.json()["status"], r.json()["crystals"]) == ("empty", 0)
    memory = store_of(root)
    envelope, raw = make_handoff(sender="mallory")
    memory.ingest(envelope, raw)
    memory.close()
    stats = memory_cli(capsys, "stats", "--json").json()
    assert stats["crystals"] == 1
    assert stats["by_validation_state"] == {"quarantined": 1}
    assert "crystals: 1" in memory_cli(capsys, "stats").out


def test_root_discovery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EIDOLONS_ROOT", raising=False)
    project = tmp_path / "repo"
    nested = project / "a" / "b"
    nested.mkdir(parents=True)
    (project / ".git").mkdir()
    monkeypatch.chdir(nested)
    from eidolons.io.config import find_root

    bound = vars(command)["find_root"]  # the name the command calls (imported, not re-exported)
    assert bound is find_root  # the one rule, no copy of it in the command
    assert bound(None) == project.resolve()
    (project / "a" / ".eidolons").mkdir()
    assert bound(None) == (project / "a").resolve()
    monkeypatch.setenv("EIDOLONS_ROOT", str(project))
    assert bound(None) == project.resolve()
    assert bound(str(nested)) == nested.resolve()
    bare = tmp_path / "bare"
    bare.mkdir()
    monkeypatch.delenv("EIDOLONS_ROOT")
    monkeypatch.chdir(bare)
    assert bound(None) in (bare.resolve(), *bare.resolve().parents)


# -- ingest: the gate decides ------------------------------------------------------------


def test_ingest_after_a_pass(root: Path) -> None:
    path, raw = write_handoff(root)
    first = command.ingest_envelope(path, root, gate=passing(raw))
    assert first.exit_code == 0, first.message
    assert first.message.startswith("ingested ")
    assert first.gate == {"passed": True, "code": "PASS"}
    assert first.memory is not None and first.memory["commit_status"] == "committed"
    again = command.ingest_envelope(path, root, gate=passing(raw))
    assert again.exit_code == 0
    assert again.message.startswith("already ingested ")
    assert crystals(root) == 1


@pytest.mark.parametrize("code", GATE_REFUSALS)
def test_a_refused_handoff_is_never_ingested(root: Path, code: str) -> None:
    path, _raw = write_handoff(root)

    def gate(envelope_path: Path, project: Path, on_pass: OnPass) -> tuple[bool, str]:
        return False, code  # a refusing gate never calls on_pass

    outcome = command.ingest_envelope(path, root, gate=gate)
    assert outcome.exit_code == 3  # refused (ADR 0003)
    assert code in outcome.message
    assert outcome.memory is None
    assert not (root / ".eidolons" / "memory").exists()


@pytest.mark.parametrize("handed", [None, "text, not bytes", "no call"])
def test_a_pass_without_verified_bytes_is_not_ingested(root: Path, handed: Any) -> None:
    path, _ = write_handoff(root)

    def gate(envelope_path: Path, project: Path, on_pass: OnPass) -> tuple[bool, str]:
        if handed != "no call":
            on_pass(Judged(json.loads(envelope_path.read_bytes())), handed)
        return True, "PASS"

    outcome = command.ingest_envelope(path, root, gate=gate)
    assert outcome.exit_code == 3
    assert not (root / ".eidolons" / "memory").exists()


def test_unavailable_or_crashing_gate_fails_closed(root: Path) -> None:
    path, _ = write_handoff(root)

    def missing(envelope_path: Path, project: Path, on_pass: OnPass) -> tuple[bool, str]:
        raise ImportError("eidolons.gates.receiver")

    def crashing(envelope_path: Path, project: Path, on_pass: OnPass) -> tuple[bool, str]:
        raise RuntimeError("bug in the gate")

    for gate in (missing, crashing):
        outcome = command.ingest_envelope(path, root, gate=gate)
        assert outcome.exit_code == 3
        assert "refusing to ingest" in outcome.message
    assert not (root / ".eidolons" / "memory").exists()


def test_memory_refusal_after_a_pass(root: Path) -> None:
    path, raw = write_handoff(root)
    outcome = command.ingest_envelope(path, root, gate=passing(raw + b"not what was signed"))
    assert outcome.exit_code == 3  # refused (ADR 0003)
    assert "INGEST_PAYLOAD_HASH_MISMATCH" in outcome.message
    assert crystals(root) == 0


def test_what_is_ingested_is_the_envelope_the_gate_judged(root: Path) -> None:
    """The file swapped while the gate ran: the command never reads it again; what the
    gate judged (and handed its callback) is what is ingested."""
    path, raw = write_handoff(root)
    judged = json.loads(path.read_bytes())

    def swapping(envelope_path: Path, project: Path, on_pass: OnPass) -> tuple[bool, str]:
        doc = json.loads(envelope_path.read_text())
        doc["objective"] = "Something else entirely."
        envelope_path.write_text(json.dumps(doc))
        on_pass(Judged(judged), raw)
        return True, "PASS"

    outcome = command.ingest_envelope(path, root, gate=swapping)
    assert outcome.exit_code == 0, outcome.message
    memory = store_of(root)
    try:
        found = memory.recall({}, "Something else entirely", k=5)
    finally:
        memory.close()
    assert all("Something else" not in json.dumps(r) for r in found.get("records", []))


def test_missing_or_non_regular_envelope_file(root: Path) -> None:
    with pytest.raises(InputError):
        command.ingest_envelope(root / "nope.envelope.json", root, gate=passing(b""))
    fifo = root / "fifo.envelope.json"
    os.mkfifo(fifo)  # a blocking read would hang this test
    with pytest.raises(InputError, match="not a regular file"):
        command.ingest_envelope(fifo, root, gate=passing(b""))


def test_memory_off_is_reported(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EIDOLONS_MEMORY", "off")
    path, raw = write_handoff(root)
    assert (
        command.ingest_envelope(path, root, gate=passing(raw)).exit_code == 3
    )  # not done: exit 3 (ADR 0003)


# -- ingest through the command line -----------------------------------------------------


def test_cli_ingest_uses_the_gate_hook(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, raw = write_handoff(root)
    calls: list[Path] = []

    def gate(envelope_path: Path, project: Path, on_pass: OnPass) -> tuple[bool, str]:
        calls.append(envelope_path)
        return passing(raw)(envelope_path, project, on_pass)

    monkeypatch.setattr(command, "receiver_gate", gate)
    r = memory_cli(capsys, "ingest", str(path), "--json")
    assert r.code == 0, r.err
    assert calls == [path]
    doc = r.json()
    assert doc["gate"] == {"passed": True, "code": "PASS"}
    assert doc["memory"]["status"] == "ingested"
    text = memory_cli(capsys, "ingest", str(path))
    assert text.code == 0 and text.out.startswith("already ingested ")


def test_cli_ingest_refusal_goes_to_stderr(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = write_handoff(root)
    monkeypatch.setattr(command, "receiver_gate", lambda e, r, p: (False, "INTEGRITY_MISMATCH"))
    r = memory_cli(capsys, "ingest", str(path))
    assert r.code == 3  # refused (ADR 0003)
    assert r.err == (
        "eidolons: receiver gate refused the hand-off: INTEGRITY_MISMATCH; not ingested\n"
    )
    assert r.out == ""


def test_cli_ingest_fails_closed_without_the_gate_module(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "eidolons.gates.receiver", None)
    path, _ = write_handoff(root)
    r = memory_cli(capsys, "ingest", str(path))
    assert r.code == 3
    assert r.err == "eidolons: receiver gate unavailable; refusing to ingest\n"
    assert not (root / ".eidolons" / "memory").exists()


def test_cli_ingest_bad_input_exits_2(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(command, "receiver_gate", passing(b""))
    r = memory_cli(capsys, "ingest", str(root / "missing.envelope.json"))
    assert r.code == 2
    assert r.err.startswith("eidolons: ") and "no such envelope file" in r.err


def test_cli_as_a_subprocess(root: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EIDOLONS_")}
    r = run_cli("memory", "recall", "anything", "--json", cwd=root, env=env)
    assert r.code == 0, r.err
    assert r.json()["backend"] == "local"


def test_end_to_end_ingest_through_the_real_gate(cli: Callable[..., Run], project: Path) -> None:
    from tests.test_receiver import handoff  # emit + orchestrator gate (run --verify)

    payload = handoff(cli, project, "atlas", "vigil", "PROPOSE", "scout-report")
    envelope_path = payload.with_suffix(".envelope.json")
    ok = cli("memory", "ingest", envelope_path, "--json")
    assert ok.code == 0, ok.err
    assert ok.json()["gate"] == {"passed": True, "code": "PASS"}
    assert ok.json()["memory"]["status"] == "ingested"
    found = cli("memory", "recall", "scout-report atlas", "--json")
    assert [r["id"] for r in found.json()["records"]] == [ok.json()["memory"]["id"]]
    payload.write_text("tampered\n", encoding="utf-8")
    refused = cli("memory", "ingest", envelope_path, "--json")
    assert refused.code == 3, refused.err
    assert refused.json()["gate"]["passed"] is False
    assert refused.json()["memory"] is None
    assert cli("memory", "stats", "--json").json()["crystals"] == 1
