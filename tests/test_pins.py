"""Host pins (ADR 0011): deleting or rewriting a signed project's trust store never
downgrades it to unsigned mode, nor adds an agent's key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eidolons.keys.receipts import Signer
from tests._builders import forge_pass
from tests.conftest import Run, clean_env, emit_payload, run_cli


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return clean_env(XDG_CONFIG_HOME=str(tmp_path / "orchestrator"))


def run(project: Path, env: dict[str, str], *args: str | Path) -> Run:
    return run_cli(*args, cwd=project, env=env)


def handoff(project: Path, env: dict[str, str]) -> tuple[Path, Path]:
    def cli(*args: str | Path, env: dict[str, str] | None = None) -> Run:
        return run_cli(*args, cwd=project, env=env)

    body = "# r\n\n## Decision target\nx\n"
    payload, envelope, _ = emit_payload(cli, project, "h/r.md", body, env=env)
    return payload, envelope


def test_attack_deleting_the_trust_store_does_not_downgrade(
    project: Path, env: dict[str, str]
) -> None:
    assert run(project, env, "keys", "init").code == 0
    payload, envelope = handoff(project, env)
    (project / ".eidolons/trust.json").unlink()  # the agent removes the trust anchor...
    forge_pass(project, envelope)  # ...and writes its own pass
    r = run(project, env, "verify-incoming", payload, "--as", "vigil", "--no-memory")
    assert r.code == 3
    assert r.err.splitlines()[0] == "[vigil-verify-incoming] REFUSE: UNVERIFIED from atlas"
    assert "never downgraded to unsigned" in r.err.splitlines()[1]
    assert run(project, env, "verify-envelope", envelope, "--mode", "block").code == 3


def test_attack_adding_a_key_to_the_trust_store_by_hand(project: Path, env: dict[str, str]) -> None:
    import base64
    import hashlib

    assert run(project, env, "keys", "init").code == 0
    payload, _ = handoff(project, env)
    store = project / ".eidolons/trust.json"
    doc = json.loads(store.read_text())
    rogue = Signer.generate()  # the agent's own "orchestrator" key
    doc["keys"].append({
        "keyid": hashlib.sha256(rogue.public_raw).hexdigest(), "algorithm": "ed25519",
        "public_key": base64.b64encode(rogue.public_raw).decode(), "role": "orchestrator",
        "created": "2026-01-01T00:00:00Z", "not_after": None, "revoked": None,
        "projects": [doc["project"]],
    })  # fmt: skip
    store.write_text(json.dumps(doc, indent=2) + "\n")
    r = run(project, env, "verify-incoming", payload, "--as", "vigil", "--no-memory")
    assert r.code == 3 and "differs from the one this host pinned" in r.err
    # the operator accepts the change explicitly, and only then
    assert run(project, env, "keys", "pin").code == 0
    assert (
        run(project, env, "keys", "list", "--json").json()["keys"][1]["keyid"]
        == doc["keys"][1]["keyid"]
    )


def test_keys_commands_keep_the_pin_current_and_unpin_forgets_it(
    project: Path, env: dict[str, str]
) -> None:
    assert run(project, env, "keys", "init").code == 0
    assert run(project, env, "keys", "rotate").code == 0
    assert run(project, env, "keys", "require-signature", "atlas", "vigil").code == 0
    assert run(project, env, "keys", "list").code == 0  # every change went through the pin
    (project / ".eidolons/trust.json").unlink()
    assert run(project, env, "keys", "list").code == 2
    r = run(project, env, "keys", "unpin", "--json")
    assert r.code == 0 and r.json()["unpinned"] is True
    assert run(project, env, "keys", "list").code == 0  # unpinned and gone: an unsigned project


def test_receiver_host_pins_a_copied_store(
    project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    assert run(project, env, "keys", "init").code == 0
    remote = tmp_path / "remote"
    (remote / ".eidolons").mkdir(parents=True)
    (remote / ".eidolons/trust.json").write_bytes((project / ".eidolons/trust.json").read_bytes())
    receiver = clean_env(XDG_CONFIG_HOME=str(tmp_path / "receiver"))
    r = run(remote, receiver, "keys", "pin", "--json")
    assert r.code == 0 and Path(r.json()["pins"]).parent == tmp_path / "receiver/eidolons"
    (remote / ".eidolons/trust.json").write_text('{"version": 1, "keys": []}\n')
    assert run(remote, receiver, "keys", "list").code == 2
