"""``eidolons keys``: the signing key outside the project, the trust store, a key's life."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from eidolons.keys.store import TrustStore, TrustStoreError, load_trust_store
from tests.conftest import Run, clean_env, run_cli

Cli = Callable[..., Run]


@pytest.fixture
def keyenv(tmp_path: Path) -> dict[str, str]:
    """The private keys live under XDG_CONFIG_HOME, outside the project."""
    return clean_env(XDG_CONFIG_HOME=str(tmp_path / "config"))


def keys(project: Path, env: dict[str, str], *args: str) -> Run:
    return run_cli("keys", *args, "--root", project, cwd=project, env=env)


def test_init_creates_a_0600_key_outside_the_project_and_trusts_it(
    project: Path, keyenv: dict[str, str], tmp_path: Path
) -> None:
    r = keys(project, keyenv, "init", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["status"] == "created" and doc["role"] == "orchestrator"
    private = Path(doc["private_key"])
    assert private.parent == tmp_path / "config/eidolons/keys"
    assert private.name == f"{doc['keyid']}.pem"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert stat.S_IMODE(private.parent.stat().st_mode) == 0o700
    assert b"PRIVATE KEY" in private.read_bytes()
    store = load_trust_store(project)
    assert store is not None and [k.keyid for k in store.keys] == [doc["keyid"]]
    raw = json.loads((project / ".eidolons/trust.json").read_text())
    assert "PRIVATE" not in json.dumps(raw)
    entry = raw["keys"][0]
    assert entry["role"] == "orchestrator" and entry["revoked"] is None
    assert entry["created"].endswith("Z") and entry["not_after"] is None


def test_init_is_idempotent(project: Path, keyenv: dict[str, str]) -> None:
    first = keys(project, keyenv, "init", "--json").json()
    again = keys(project, keyenv, "init", "--json")
    assert again.code == 0 and again.json()["status"] == "exists"
    assert again.json()["keyid"] == first["keyid"]
    assert len(load_trust_store(project).keys) == 1  # type: ignore[union-attr]
    assert len(list(Path(first["private_key"]).parent.iterdir())) == 1


def test_init_on_a_host_without_the_private_key_mints_no_rival(
    project: Path, keyenv: dict[str, str], tmp_path: Path
) -> None:
    first = keys(project, keyenv, "init", "--json").json()
    elsewhere = clean_env(XDG_CONFIG_HOME=str(tmp_path / "other-host"))
    r = keys(project, elsewhere, "init", "--json")
    assert r.code == 0 and r.json()["status"] == "no-private-key"
    assert r.json()["keyid"] == first["keyid"]
    assert len(load_trust_store(project).keys) == 1  # type: ignore[union-attr]


def test_key_file_inside_the_project_is_refused(project: Path, keyenv: dict[str, str]) -> None:
    inside = project / "secrets" / "orchestrator.pem"
    env = {**keyenv, "EIDOLONS_SIGNING_KEY_FILE": str(inside)}
    r = keys(project, env, "init")
    assert r.code == 3 and "inside the project" in r.err
    assert not inside.exists() and not (project / ".eidolons/trust.json").exists()


def test_key_file_others_can_read_is_refused(project: Path, keyenv: dict[str, str]) -> None:
    private = Path(keys(project, keyenv, "init", "--json").json()["private_key"])
    private.chmod(0o644)
    r = keys(project, keyenv, "init")
    assert r.code == 3 and "lets group or others read it" in r.err
    private.chmod(0o640)
    assert keys(project, keyenv, "init").code == 3
    private.chmod(0o600)
    assert keys(project, keyenv, "init").code == 0


def test_explicit_key_file_outside_the_project(
    project: Path, keyenv: dict[str, str], tmp_path: Path
) -> None:
    path = tmp_path / "vault" / "gate.pem"
    env = {**keyenv, "EIDOLONS_SIGNING_KEY_FILE": str(path)}
    doc = keys(project, env, "init", "--json").json()
    assert doc["status"] == "created" and doc["private_key"] == str(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert keys(project, env, "init", "--json").json()["status"] == "exists"


def test_revoke_rotate_list(project: Path, keyenv: dict[str, str]) -> None:
    first = keys(project, keyenv, "init", "--json").json()["keyid"]
    rot = keys(project, keyenv, "rotate", "--json").json()
    assert rot["revoked"] == [first] and rot["keyid"] != first
    listed = {k["keyid"]: k for k in keys(project, keyenv, "list", "--json").json()["keys"]}
    assert listed[first]["status"] == "revoked" and listed[first]["revoked_reason"] == "rotated"
    assert listed[rot["keyid"]]["status"] == "active"
    r = keys(project, keyenv, "revoke", rot["keyid"][:12])
    assert r.code == 0 and "revoked orchestrator key" in r.out
    assert keys(project, keyenv, "revoke", rot["keyid"][:12]).code == 2  # already revoked
    text = keys(project, keyenv, "list").out
    assert text.count("revoked") == 2


def test_export_add_and_expiry(project: Path, keyenv: dict[str, str], tmp_path: Path) -> None:
    init = keys(project, keyenv, "init", "--role", "sender:atlas", "--json").json()
    public = keys(project, keyenv, "export", init["keyid"][:10]).out.strip()
    other = tmp_path / "receiver-host"
    (other / ".eidolons").mkdir(parents=True)
    r = keys(other, keyenv, "add", public, "--role", "sender:atlas", "--json")
    assert r.code == 0 and r.json()["keyid"] == init["keyid"]
    assert keys(other, keyenv, "add", public, "--role", "sender:atlas").code == 2  # twice
    expired = keys(
        other, keyenv, "add", _fresh_public(), "--role", "orchestrator",
        "--not-after", "2001-01-01T00:00:00Z", "--json",
    )  # fmt: skip
    assert expired.code == 0 and expired.json()["status"] == "expired"
    assert keys(other, keyenv, "add", "bm90IGEga2V5", "--role", "orchestrator").code == 2
    assert keys(other, keyenv, "add", public, "--role", "boss").code == 2


def _fresh_public() -> str:
    import base64

    from eidolons.keys.receipts import Signer

    return base64.b64encode(Signer.generate().public_raw).decode()


def test_require_signature_policy(project: Path, keyenv: dict[str, str]) -> None:
    assert keys(project, keyenv, "require-signature", "atlas", "vigil").code == 0
    assert keys(project, keyenv, "require-signature", "*", "gilgamesh").code == 0
    store = load_trust_store(project)
    assert store is not None
    assert store.requires_sender_signature("atlas", "vigil")
    assert store.requires_sender_signature("forge", "gilgamesh")
    assert not store.requires_sender_signature("vigil", "atlas")
    assert keys(project, keyenv, "require-signature", "atlas", "vigil", "--off").code == 0
    assert not load_trust_store(project).requires_sender_signature("atlas", "vigil")  # type: ignore[union-attr]
    assert keys(project, keyenv, "require-signature", "Bad", "vigil").code == 2


def _store_with_key(role: str, projects: object, version: int = 2) -> bytes:
    """A store whose one key has ``projects`` (None: the field left out)."""
    from eidolons.keys.receipts import Signer
    from eidolons.keys.store import TrustedKey

    entry = TrustedKey(Signer.generate().public_raw, role, "2026-01-01T00:00:00Z").to_dict()
    if projects is not None:
        entry["projects"] = projects
    doc: dict[str, object] = {"version": version, "keys": [entry]}
    if version == 2:
        doc["project"] = "0" * 32
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    "raw",
    [
        b"{",
        b"[]",
        b'{"version": 1, "version": 1, "keys": []}',
        b'{"version": 2, "keys": []}',
        b'{"version": 1, "keys": [{"keyid": "x"}]}',
        b'{"version": 1, "keys": [], "extra": 1}',
        b'{"version": 1, "keys": [], "require_sender_signature": ["atlas"]}',
        # version 2 names its project, and pins projects on each orchestrator key
        b'{"version": 2, "project": "00", "keys": []}',
        b'{"version": 2, "project": "' + b"A" * 32 + b'", "keys": []}',
        b'{"version": 1, "project": "' + b"0" * 32 + b'", "keys": []}',
        b'{"version": true, "keys": []}',
        _store_with_key("orchestrator", None),
        _store_with_key("orchestrator", ["0" * 32, "0" * 32]),
        _store_with_key("orchestrator", ["xyz"]),
        _store_with_key("orchestrator", "0" * 32),
        _store_with_key("sender:atlas", ["0" * 32]),
        _store_with_key("orchestrator", ["0" * 32], version=1),
    ],
)
def test_malformed_trust_store_fails_closed(
    project: Path, keyenv: dict[str, str], raw: bytes
) -> None:
    (project / ".eidolons/trust.json").write_bytes(raw)
    with pytest.raises(TrustStoreError):
        load_trust_store(project)
    r = keys(project, keyenv, "list")
    assert r.code == 2 and r.err.startswith("eidolons: ") and "Traceback" not in r.err


def test_trust_store_entry_checks(project: Path) -> None:
    from eidolons.keys.receipts import Signer
    from eidolons.keys.store import TrustedKey

    key = TrustedKey(Signer.generate().public_raw, "orchestrator", "2026-01-01T00:00:00Z")
    doc = key.to_dict()
    store = TrustStore(project / "t.json", [key])
    assert TrustStore.parse(store.to_bytes(), store.path).keys[0].keyid == key.keyid
    doc["keyid"] = "0" * 64  # an id that does not match its key
    bad = json.dumps({"version": 1, "keys": [doc]}).encode()
    with pytest.raises(TrustStoreError, match="keyid does not match"):
        TrustStore.parse(bad, store.path)
    assert key.status("2025-12-31T23:59:59Z") == "not-yet-valid"
    key.revoked = "2026-06-01T00:00:00.5Z"
    assert key.status("2026-06-01T00:00:00.499Z") == "active"
    assert key.status("2026-06-01T00:00:00.500Z") == "revoked"


def test_dangling_trust_store_symlink_is_not_no_trust_store(project: Path) -> None:
    os.symlink(project / "nowhere.json", project / ".eidolons/trust.json")
    with pytest.raises(TrustStoreError):
        load_trust_store(project)


def test_trust_store_is_never_reached_through_a_link(project: Path, tmp_path: Path) -> None:
    """An agent that swaps .eidolons/ (or trust.json) for a link to its own store gets a
    refusal, not its keys trusted."""
    elsewhere = tmp_path / "attacker"
    elsewhere.mkdir()
    (elsewhere / "trust.json").write_text('{"version": 1, "keys": []}')
    os.symlink(elsewhere / "trust.json", project / ".eidolons/trust.json")
    with pytest.raises(TrustStoreError, match="symbolic link"):
        load_trust_store(project)
    os.unlink(project / ".eidolons/trust.json")
    os.rename(project / ".eidolons", project / ".eidolons-real")
    os.symlink(elsewhere, project / ".eidolons")
    with pytest.raises(TrustStoreError, match="symbolic link"):
        load_trust_store(project)


def test_init_role_is_the_library_call_eidolons_init_uses(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eidolons.keys.lifecycle import init_role

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    first = init_role(project)
    assert first["status"] == "created" and Path(first["private_key"]).is_file()
    again = init_role(project)
    assert again["status"] == "exists" and again["keyid"] == first["keyid"]
    assert again["private_key"] == first["private_key"]
    sender = init_role(project, "sender:atlas")
    assert sender["status"] == "created" and sender["keyid"] != first["keyid"]
    assert [k.role for k in load_trust_store(project).keys] == ["orchestrator", "sender:atlas"]  # type: ignore[union-attr]


def test_verify_signed_is_the_one_key_validity_rule(tmp_path: Path) -> None:
    """Receipts and sender signatures both go through TrustStore.verify_signed: only a key
    of the role, active now, counts; a revoked co-signer does not hide an active one."""
    from eidolons.keys.receipts import Signer, sign_envelope
    from eidolons.keys.store import ORCHESTRATOR, TrustedKey

    revoked, active, stranger = Signer.generate(), Signer.generate(), Signer.generate()
    store = TrustStore(
        tmp_path / "trust.json",
        [
            TrustedKey(revoked.public_raw, ORCHESTRATOR, "2026-01-01T00:00:00Z",
                       revoked="2026-02-01T00:00:00Z"),
            TrustedKey(active.public_raw, ORCHESTRATOR, "2026-01-01T00:00:00Z"),
            TrustedKey(stranger.public_raw, "sender:vigil", "2026-01-01T00:00:00Z"),
        ],
    )  # fmt: skip
    now, kind = "2026-06-01T00:00:00Z", "application/x-test"
    both = sign_envelope(kind, b"body", revoked)
    both["signatures"] += sign_envelope(kind, b"body", active)["signatures"]
    signed = store.verify_signed(both, ORCHESTRATOR, kind, now)
    assert signed.body == b"body" and signed.key is not None
    assert signed.key.keyid == active.keyid and signed.inactive is None

    only_revoked = store.verify_signed(sign_envelope(kind, b"x", revoked), ORCHESTRATOR, kind, now)
    assert only_revoked.key is None and only_revoked.inactive is not None
    assert only_revoked.inactive.keyid == revoked.keyid

    # a key of another role (or of no role) never vouches: self-minted or forged
    other_role = store.verify_signed(sign_envelope(kind, b"x", stranger), ORCHESTRATOR, kind, now)
    assert other_role.key is None and other_role.inactive is None
    before = store.verify_signed(both, ORCHESTRATOR, kind, "2025-12-31T00:00:00Z")
    assert before.key is None and before.inactive is not None  # not yet valid


@pytest.mark.parametrize("value", ["", "cfg", "./cfg", ".eidolons/../cfg"])
def test_a_relative_xdg_config_home_is_ignored(value: str) -> None:
    # the XDG spec: a relative path is invalid and ignored; followed, it would put this
    # host's keys, trust pins, trace heads and verdict indexes under the current
    # directory, usually the project an agent writes
    from eidolons.hosts.hook.events import user_key_dir
    from eidolons.io.paths import config_dir

    home = os.path.join(os.path.expanduser("~"), ".config", "eidolons")
    assert config_dir({"XDG_CONFIG_HOME": value}) == home
    assert config_dir({"XDG_CONFIG_HOME": "/abs/cfg"}) == "/abs/cfg/eidolons"
    saved = {k: os.environ.pop(k, None) for k in ("XDG_CONFIG_HOME", "EIDOLONS_KEY_DIR")}
    try:
        os.environ["XDG_CONFIG_HOME"] = value
        assert user_key_dir() == home  # the hook's protected key directory: the same rule
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None)
            if v is not None:
                os.environ[k] = v
