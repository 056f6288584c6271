"""Every event this tool writes validates against the shipped ``handoff-event.v1.json``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests._schemas import validation_errors
from tests.conftest import Run, clean_env, emit_cmd, read_trace
from tests.test_receiver import MISSION, handoff

Cli = Callable[..., Run]


def test_all_event_kinds_validate(cli: Cli, project: Path) -> None:
    payload = handoff(cli, project, "atlas", "vigil", "PROPOSE", "scout-report")
    envelope = payload.with_suffix(".envelope.json")
    assert cli("verify-incoming", payload, "--as", "vigil").code == 0  # verify_pass, receive
    payload.write_text("tampered")
    assert cli("verify-envelope", envelope, "--block").code == 3  # verify_fail refused
    assert cli("verify-envelope", envelope, "--mode", "warn").code == 0  # verify_fail warned
    assert cli("verify-incoming", payload, "--as", "vigil").code == 3  # receiver verify_fail
    (project / "bad.md").write_text("x")
    (project / "bad.envelope.json").write_text("{not json")
    assert cli("verify-envelope", project / "bad.envelope.json").code == 2
    assert cli("verify-incoming", project / "bad.md", "--as", "vigil").code == 3
    keyed = clean_env(ECL_HMAC_KEY="k" * 32)
    (project / "h.md").write_text("# h\n")
    assert cli(*emit_cmd("h.md", "--hmac", **MISSION), env=keyed).code == 0
    assert cli("verify-envelope", "h.envelope.json", "--block").code == 3  # no_key
    events = [
        e for f in sorted((project / ".eidolons/.trace").glob("*.jsonl")) for e in read_trace(f)
    ]
    kinds = {(e["event"], e.get("gate"), e.get("decision")) for e in events}
    assert {
        ("emit", "sender", None),
        ("verify_pass", "orchestrator", None),
        ("verify_pass", "receiver", None),
        ("receive", "receiver", None),
        ("verify_fail", "orchestrator", "refused"),
        ("verify_fail", "orchestrator", "warned"),
        ("verify_fail", "receiver", "refused"),
    } <= kinds
    for event in events:
        assert validation_errors(event, "handoff-event.v1.json") == [], json.dumps(event)


def test_signed_project_events_validate(project: Path, tmp_path: Path) -> None:
    """receipt, evidence (signed-receipt+sender-signature), seq and prev are in the schema."""
    from tests.conftest import run_cli

    env = clean_env(XDG_CONFIG_HOME=str(tmp_path / "cfg"))

    def cli(*args: str | Path) -> Run:
        return run_cli(*args, cwd=project, env=env)

    assert cli("keys", "init").code == 0
    assert cli("keys", "init", "--role", "sender:atlas").code == 0
    (project / "r.md").write_text("# r\n\n## Decision target\nx\n")
    assert cli(*emit_cmd("r.md", "--sign", performative="PROPOSE")).code == 0
    assert cli("verify-envelope", "r.envelope.json", "--block").code == 0
    assert cli("verify-incoming", "r.md", "--as", "vigil", "--no-memory").code == 0
    (project / "r.md").write_text("tampered")
    assert cli("verify-envelope", "r.envelope.json", "--block").code == 3
    events = [
        e for f in sorted((project / ".eidolons/.trace").glob("*.jsonl")) for e in read_trace(f)
    ]
    passes = [e for e in events if e["event"] == "verify_pass"]
    assert [(e["gate"], e.get("evidence")) for e in passes] == [
        ("orchestrator", "signed-receipt+sender-signature"),  # it signed the receipt
        ("receiver", "signed-receipt+sender-signature"),
    ]
    assert sum(1 for e in events if "receipt" in e) == 2 and all("seq" in e for e in events)
    for event in events:
        assert validation_errors(event, "handoff-event.v1.json") == [], json.dumps(event)
