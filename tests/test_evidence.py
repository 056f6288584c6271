"""Every pass says which evidence it rested on (ADR 0010): in its trace event and output."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from eidolons.ecl.integrity import UNSIGNED_WARNING, combine
from tests.conftest import Run, clean_env, emit_payload, read_trace

Cli = Callable[..., Run]
KEYED = clean_env(ECL_HMAC_KEY="evidence-tests-hmac-key-of-32-bytes!")


def _trace(project: Path, env: dict[str, object]) -> list[dict[str, object]]:
    return read_trace(project / ".eidolons/.trace" / f"{env['thread_id']}.jsonl")


def test_combine_orders_and_defaults() -> None:
    assert combine() == "unsigned"
    assert combine("hmac", "signed-receipt") == "signed-receipt+hmac"
    assert combine("unsigned", "hmac", "sender-signature") == "unsigned+sender-signature+hmac"
    assert combine("signed-receipt", "unsigned") == "signed-receipt"


def test_unsigned_orchestrator_pass_says_so(cli: Cli, project: Path) -> None:
    _, env_path, env = emit_payload(cli, project)
    r = cli("verify-envelope", env_path, "--mode", "block")
    assert r.code == 0
    assert r.err.splitlines()[0].endswith("(evidence: unsigned)")
    assert r.err.splitlines()[1:] == [f"eidolons: {UNSIGNED_WARNING}"]
    assert _trace(project, env)[-1]["evidence"] == "unsigned"
    doc = cli("verify-envelope", env_path, "--mode", "block", "--json").json()
    assert doc["evidence"] == "unsigned" and doc["evidence_notes"] == [UNSIGNED_WARNING]


def test_hmac_orchestrator_pass_rests_on_hmac(cli: Cli, project: Path) -> None:
    payload = project / "h.md"
    payload.write_text("# x\n")
    r = cli(
        "emit", payload, "--from", "atlas", "--to", "vigil", "--performative", "INFORM",
        "--kind", "scout-report", "--objective", "o", "--hmac", "--json", env=KEYED,
    )  # fmt: skip
    env_path = Path(r.json()["envelope_path"])
    doc = cli("verify-envelope", env_path, "--mode", "block", "--json", env=KEYED).json()
    assert doc["verdict"] == "pass" and doc["evidence"] == "hmac"
    r = cli("verify-incoming", payload, "--as", "vigil", "--json", env=KEYED)
    assert r.code == 0 and r.json()["evidence"] == "unsigned+hmac"


def test_failures_carry_no_evidence(cli: Cli, project: Path) -> None:
    payload, env_path, env = emit_payload(cli, project)
    payload.write_text("rewritten\n")
    doc = cli("verify-envelope", env_path, "--mode", "block", "--json").json()
    assert doc["verdict"] == "tamper" and doc["evidence"] is None
    assert "evidence" not in _trace(project, env)[-1]


def test_unsigned_receiver_pass_says_so_once(cli: Cli, project: Path) -> None:
    payload, env_path, env = emit_payload(cli, project)
    assert cli("verify-envelope", env_path, "--mode", "block").code == 0
    r = cli("verify-incoming", payload, "--as", "vigil")
    assert r.code == 0 and r.err == (
        f"[vigil-verify-incoming] PASS: scout-report from atlas (message {env['message_id']}, "
        "evidence: unsigned; contract builtin)\n"
        f"eidolons: {UNSIGNED_WARNING}\n"
    )
    events = _trace(project, env)
    assert events[-2]["event"] == "verify_pass" and events[-2]["evidence"] == "unsigned"
    doc = cli("verify-incoming", payload, "--as", "vigil", "--json").json()
    assert doc["evidence"] == "unsigned" and doc["evidence_notes"] == [UNSIGNED_WARNING]
