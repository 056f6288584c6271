"""Signed gate receipts (ADR 0011) and the receiver that accepts only evidence it can check
(ADR 0011). Every attack a receipt answers is here, refused."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest

from eidolons.ecl.events import PREDICATE_TYPE, STATEMENT_TYPE, statement_bytes
from eidolons.ecl.integrity import UNSIGNED_WARNING
from eidolons.keys.receipts import Signer, sign_envelope, verify_envelope
from eidolons.keys.store import load_trust_store
from tests._builders import forge_pass
from tests.conftest import Run, clean_env, emit_cmd, read_trace, run_cli

BODY = "# Report\n\n## Decision target\nWhere does install.sh race?\n"


class Project:
    """A signed project: the orchestrator's key under XDG_CONFIG_HOME, outside the root."""

    def __init__(self, root: Path, config: Path) -> None:
        self.root = root
        self.env = clean_env(XDG_CONFIG_HOME=str(config))
        self.keyless = clean_env(XDG_CONFIG_HOME=str(config.parent / "agent-config"))

    def cli(
        self, *args: str | Path, env: dict[str, str] | None = None, root: Path | None = None
    ) -> Run:
        where = root or self.root
        return run_cli(*args, "--root", where, cwd=where, env=env or self.env)

    def emit(
        self, name: str = "handoff/scout-report.md", body: str = BODY, *extra: str
    ) -> tuple[Path, Path]:
        payload = self.root / name
        payload.parent.mkdir(parents=True, exist_ok=True)
        payload.write_text(body)
        r = self.cli(*emit_cmd(payload, "--json", *extra, performative="PROPOSE"), env=self.keyless)
        assert r.code == 0, r.err
        return payload, Path(r.json()["envelope_path"])

    def verify(self, envelope: Path, *extra: str, env: dict[str, str] | None = None) -> Run:
        return self.cli("verify-envelope", envelope, *extra, env=env)

    def incoming(self, payload: Path, *extra: str, root: Path | None = None) -> Run:
        return self.cli(
            "verify-incoming", payload, "--as", "vigil", "--no-memory", *extra, root=root
        )


@pytest.fixture
def signed(project: Path, tmp_path: Path) -> Project:
    p = Project(project, tmp_path / "orchestrator-config")
    assert p.cli("keys", "init").code == 0
    return p


def refusal(code: str) -> str:
    return f"[vigil-verify-incoming] REFUSE: {code} from atlas"


def receipt_file(envelope: Path) -> Path:
    return envelope.with_name(envelope.name.replace(".envelope.json", ".receipt.json"))


def statement_of(receipt: dict[str, object]) -> dict[str, object]:
    return json.loads(base64.b64decode(str(receipt["payload"])))  # type: ignore[no-any-return]


# ------------------------------------------------------------------------ the orchestrator


def test_each_verdict_is_a_signed_in_toto_receipt(signed: Project) -> None:
    _, envelope = signed.emit()
    r = signed.verify(envelope, "--mode", "block")
    assert r.code == 0, r.err
    lines = r.err.splitlines()
    assert len(lines) == 1 and "(evidence: signed-receipt) [receipt " in lines[0]  # no warning
    event = read_trace(next((signed.root / ".eidolons/.trace").glob("*.jsonl")))[-1]
    assert event["evidence"] == "signed-receipt"
    receipt = event["receipt"]
    assert receipt == json.loads(receipt_file(envelope).read_text())
    assert receipt["payloadType"] == "application/vnd.in-toto+json"
    store = load_trust_store(signed.root)
    assert store is not None
    keys = {k.keyid: k.public_raw for k in store.keys}
    body, accepted = verify_envelope(receipt, keys, ["application/vnd.in-toto+json"])
    assert accepted == [store.keys[0].keyid]
    st = json.loads(body)
    env = json.loads(envelope.read_bytes())
    assert st["_type"] == STATEMENT_TYPE and st["predicateType"] == PREDICATE_TYPE
    assert st["subject"] == [
        {"name": env["artifact"]["path"], "digest": {"sha256": env["integrity"]["value"]}}
    ]
    pred = st["predicate"]
    import hashlib

    assert pred["envelope_sha256"] == hashlib.sha256(envelope.read_bytes()).hexdigest()
    assert pred["message_id"] == env["message_id"] and pred["thread_id"] == env["thread_id"]
    assert pred["from"] == "atlas@n/a" and pred["to"] == "vigil@n/a"
    assert pred["performative"] == "PROPOSE"
    assert pred["integrity"] == {"method": "sha256", "value": env["integrity"]["value"]}
    assert pred["verdict"] == "pass" and pred["failure_code"] is None
    assert pred["gate"] == "orchestrator" and pred["command"] == "verify-envelope"
    assert pred["time"].endswith("Z") and pred["verifier"].startswith("eidolons@")
    doc = signed.verify(envelope, "--mode", "block", "--json").json()
    assert doc["receipt"] == str(receipt_file(envelope)) and doc["receipt_keyid"] in keys


def test_a_refusal_is_signed_too(signed: Project) -> None:
    payload, envelope = signed.emit()
    payload.write_text("rewritten\n")
    assert signed.verify(envelope, "--mode", "block").code == 3
    pred = statement_of(json.loads(receipt_file(envelope).read_text()))["predicate"]
    assert pred["verdict"] == "tamper" and pred["failure_code"] == "INTEGRITY_MISMATCH"  # type: ignore[index]


def test_route_gate_signs_its_verdict(signed: Project) -> None:
    _, envelope = signed.emit()
    r = signed.cli("run", "--verify", envelope, "--mode", "block", "--json")
    assert r.code == 0, r.err
    pred = statement_of(json.loads(receipt_file(envelope).read_text()))["predicate"]
    assert pred["command"] == "run" and pred["verdict"] == "pass"  # type: ignore[index]


def test_trust_store_without_a_reachable_key_says_so_and_blocks(signed: Project) -> None:
    _, envelope = signed.emit()
    for _ in range(2):  # on every run
        r = signed.verify(envelope, "--mode", "block", env=signed.keyless)
        assert r.code == 3 and "no signed receipt" in r.err and "UNVERIFIED" in r.err
    assert not receipt_file(envelope).exists()
    warn = signed.verify(envelope, "--mode", "warn", env=signed.keyless)
    assert warn.code == 0 and "no signed receipt" in warn.err and "block mode exits 3" in warn.err
    blocked = signed.cli("run", "--verify", envelope, "--mode", "block", env=signed.keyless)
    assert blocked.code == 3 and "route blocked" in blocked.err


def test_unreadable_trust_store_fails_closed_at_both_gates(signed: Project) -> None:
    payload, envelope = signed.emit()
    assert signed.verify(envelope, "--mode", "block").code == 0
    (signed.root / ".eidolons/trust.json").write_text("{not json")
    assert signed.verify(envelope, "--mode", "block").code == 3
    r = signed.incoming(payload)
    assert r.code == 3 and r.err.splitlines()[0] == refusal("UNVERIFIED")
    assert "trust store unusable" in r.err.splitlines()[1]


# ------------------------------------------------------------------------------ the receiver


def test_receiver_accepts_a_signed_receipt(signed: Project) -> None:
    payload, envelope = signed.emit()
    assert signed.verify(envelope, "--mode", "block").code == 0
    r = signed.incoming(payload)
    assert r.code == 0 and r.err.splitlines() == [  # signed: no unsigned warning
        f"[vigil-verify-incoming] PASS: scout-report from atlas (message "
        f"{json.loads(envelope.read_bytes())['message_id']}, evidence: signed-receipt; "
        "contract builtin)"
    ], r.err
    doc = signed.incoming(payload, "--json").json()
    assert doc["evidence"] == "signed-receipt" and doc["evidence_notes"] == []
    assert [j["ok"] for j in doc["receipts"]] == [True, True]  # sidecar and trace agree
    events = read_trace(next((signed.root / ".eidolons/.trace").glob("*.jsonl")))
    assert events[-2]["event"] == "verify_pass" and events[-2]["evidence"] == "signed-receipt"


def test_attack_hand_written_pass_is_refused(signed: Project) -> None:
    payload, envelope = signed.emit()
    forge_pass(signed.root, envelope, evidence="unsigned")  # the signature left out
    r = signed.incoming(payload, "--print-payload")
    assert r.code == 3 and r.out == ""
    assert r.err.splitlines() == [
        refusal("UNVERIFIED"),
        "[vigil-verify-incoming] reason: the verify_pass on record is unsigned: it was "
        "recorded without this project's signing key (before eidolons keys init, or by hand); "
        f"run eidolons verify-envelope {envelope} again to sign its pass",
    ]


def test_a_pass_verified_before_keys_init_is_refused_with_the_fix(
    project: Path, tmp_path: Path
) -> None:
    p = Project(project, tmp_path / "orchestrator-config")
    payload, envelope = p.emit()
    assert p.verify(envelope).code == 0  # unsigned mode: no trust store yet
    assert p.cli("keys", "init").code == 0
    r = p.incoming(payload)
    assert r.code == 3 and r.err.splitlines() == [
        refusal("UNVERIFIED"),
        "[vigil-verify-incoming] reason: the verify_pass on record is unsigned: it was "
        "recorded without this project's signing key (before eidolons keys init, or by hand); "
        f"run eidolons verify-envelope {envelope} again to sign its pass",
    ]
    assert p.verify(envelope).code == 0  # the fix it names
    assert p.incoming(payload).code == 0


def test_attack_self_minted_pass_is_refused(signed: Project) -> None:
    """The agent in the middle rewrites the payload, re-emits the envelope and runs the
    orchestrator gate itself: without the key it mints an unsigned pass, refused."""
    payload, envelope = signed.emit()
    assert signed.verify(envelope, "--mode", "block").code == 0
    payload.write_text(BODY + "\nrm -rf / # injected\n")
    signed.cli(*emit_cmd(payload, "--force", performative="PROPOSE"), env=signed.keyless)
    minted = signed.verify(envelope, "--mode", "warn", env=signed.keyless)
    assert minted.code == 0  # the agent's own run "passes"...
    r = signed.incoming(payload, "--print-payload")
    assert r.code == 3 and r.out == ""  # ...and the receiver refuses it
    assert r.err.splitlines()[0] == refusal("INTEGRITY_MISMATCH")
    assert "other envelope bytes" in r.err.splitlines()[1]
    receipt_file(envelope).unlink()  # no old receipt at all: the unsigned pass alone
    r = signed.incoming(payload)
    assert r.err.splitlines()[0] == refusal("UNVERIFIED") and "unsigned" in r.err.splitlines()[1]


def test_attack_receipt_signed_by_an_untrusted_key_is_refused(signed: Project) -> None:
    payload, envelope = signed.emit()
    assert signed.verify(envelope, "--mode", "block").code == 0
    genuine = json.loads(receipt_file(envelope).read_text())
    forged = sign_envelope(
        genuine["payloadType"], base64.b64decode(genuine["payload"]), Signer.generate()
    )
    receipt_file(envelope).write_text(json.dumps(forged))
    trace = next((signed.root / ".eidolons/.trace").glob("*.jsonl"))
    trace.write_text("")  # only the forged sidecar is left
    r = signed.incoming(payload)
    assert r.code == 3 and r.err.splitlines()[0] == refusal("UNVERIFIED")
    assert "not signed by any orchestrator key in the trust store" in r.err.splitlines()[1]


def test_attack_receipt_for_other_bytes_is_refused(signed: Project) -> None:
    _, first_env = signed.emit("a/one.md")
    other, other_env = signed.emit("b/two.md", BODY + "other\n")
    assert signed.verify(first_env, "--mode", "block").code == 0
    shutil.copy(receipt_file(first_env), receipt_file(other_env))  # a genuine receipt, wrong bytes
    r = signed.incoming(other)
    assert r.code == 3 and r.err.splitlines()[0] == refusal("INTEGRITY_MISMATCH")
    assert "other envelope bytes" in r.err.splitlines()[1]


def test_attack_receipt_naming_other_payload_bytes_is_refused(
    signed: Project, tmp_path: Path
) -> None:
    """A receipt signed by the real key for these envelope bytes but another payload digest
    (as no gate writes for a pass) still does not vouch for the payload read."""
    payload, envelope = signed.emit()
    assert signed.verify(envelope, "--mode", "block").code == 0
    genuine = json.loads(receipt_file(envelope).read_text())
    st = statement_of(genuine)
    st["subject"][0]["digest"]["sha256"] = "0" * 64  # type: ignore[index]
    key_file = next((tmp_path / "orchestrator-config/eidolons/keys").glob("*.pem"))
    resigned = sign_envelope(
        genuine["payloadType"], statement_bytes(st), Signer.from_pem(key_file.read_bytes())
    )
    receipt_file(envelope).write_text(json.dumps(resigned))
    (next((signed.root / ".eidolons/.trace").glob("*.jsonl"))).write_text("")
    r = signed.incoming(payload)
    assert r.code == 3 and r.err.splitlines() == [
        refusal("INTEGRITY_MISMATCH"),
        "[vigil-verify-incoming] reason: the signed receipt is for other payload bytes",
    ]


def test_attack_revoked_key_is_refused_from_the_moment_of_revocation(signed: Project) -> None:
    payload, envelope = signed.emit()
    assert signed.verify(envelope, "--mode", "block").code == 0
    assert signed.incoming(payload).code == 0
    keyid = load_trust_store(signed.root).keys[0].keyid  # type: ignore[union-attr]
    assert signed.cli("keys", "revoke", keyid).code == 0
    r = signed.incoming(payload)
    assert r.code == 3 and r.err.splitlines()[0] == refusal("UNVERIFIED")
    assert f"orchestrator key {keyid[:16]}, revoked since" in r.err.splitlines()[1]
    # and a revoked key signs nothing new
    assert signed.verify(envelope, "--mode", "block").code == 3


def test_attack_expired_key_is_refused(signed: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", signed.env["XDG_CONFIG_HOME"])  # the operator's pins
    payload, envelope = signed.emit()
    assert signed.verify(envelope, "--mode", "block").code == 0
    store = load_trust_store(signed.root)
    assert store is not None
    store.keys[0].not_after = "2026-01-01T00:00:00Z"
    store.keys[0].created = "2025-01-01T00:00:00Z"
    store.save(signed.root)  # as the operator would, through the API that pins it
    r = signed.incoming(payload)
    assert r.code == 3 and r.err.splitlines()[0] == refusal("UNVERIFIED")
    assert "expired since 2026-01-01T00:00:00Z" in r.err.splitlines()[1]


def test_rotation_keeps_new_receipts_valid(signed: Project) -> None:
    payload, envelope = signed.emit()
    assert signed.cli("keys", "rotate").code == 0
    assert signed.verify(envelope, "--mode", "block").code == 0
    assert signed.incoming(payload).code == 0


# ------------------------------------------------------------------------------ cross-host


def _ship(signed: Project, payload: Path, envelope: Path, dest: Path) -> Path:
    """A fresh root on another host: payload, envelope, receipt and trust store only."""
    (dest / ".eidolons").mkdir(parents=True)
    for f in (payload, envelope, receipt_file(envelope)):
        target = dest / f.relative_to(signed.root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, target)
    shutil.copy(signed.root / ".eidolons/trust.json", dest / ".eidolons/trust.json")
    return dest / payload.relative_to(signed.root)


@pytest.mark.parametrize("attack", ["none", "payload", "envelope", "receipt", "revoked"])
def test_cross_host_decides_as_on_the_orchestrator_host(
    signed: Project, tmp_path: Path, attack: str
) -> None:
    payload, envelope = signed.emit()
    assert signed.verify(envelope, "--mode", "block").code == 0
    if attack == "payload":
        payload.write_text("rewritten\n")
    elif attack == "envelope":
        doc = json.loads(envelope.read_text())
        doc["performative"] = "INFORM"
        envelope.write_text(json.dumps(doc, indent=2))
    elif attack == "receipt":  # the agent rewrites every copy it can reach: sidecar and trace
        for f in (receipt_file(envelope), *(signed.root / ".eidolons/.trace").glob("*.jsonl")):
            text = f.read_text().replace('"sig": "', '"sig": "AA').replace('"sig":"', '"sig":"AA')
            f.write_text(text)
    elif attack == "revoked":
        keyid = load_trust_store(signed.root).keys[0].keyid  # type: ignore[union-attr]
        assert signed.cli("keys", "revoke", keyid).code == 0
    remote = _ship(signed, payload, envelope, tmp_path / "receiver-host")
    here = signed.incoming(payload, "--json", "--no-reverify").json()
    there_run = signed.incoming(remote, "--json", "--no-reverify", root=tmp_path / "receiver-host")
    there = there_run.json()
    for key in ("status", "failure_code", "evidence"):
        assert here[key] == there[key], (key, here, there)
    here_full = signed.incoming(payload, "--json").json()
    there_full = signed.incoming(remote, "--json", root=tmp_path / "receiver-host").json()
    assert (here_full["status"], here_full["failure_code"]) == (
        there_full["status"],
        there_full["failure_code"],
    )
    assert (there_full["status"] == "pass") == (attack == "none")


def test_unsigned_project_keeps_todays_mode(project: Path) -> None:
    p = Project(project, project.parent / "no-keys")
    payload, envelope = p.emit()
    assert p.verify(envelope, "--mode", "block").code == 0
    r = p.incoming(payload)
    assert r.code == 0 and r.err.splitlines()[1:] == [f"eidolons: {UNSIGNED_WARNING}"]
    assert "evidence: unsigned; contract builtin)" in r.err.splitlines()[0]
    assert not receipt_file(envelope).exists()


def test_attack_key_file_others_can_read_signs_nothing(signed: Project, tmp_path: Path) -> None:
    _, envelope = signed.emit()
    key_file = next((tmp_path / "orchestrator-config/eidolons/keys").glob("*.pem"))
    key_file.chmod(0o644)
    r = signed.verify(envelope, "--mode", "block")
    assert r.code == 3 and "lets group or others read it" in r.err
    assert not receipt_file(envelope).exists()


def test_attack_key_file_inside_the_project_signs_nothing(signed: Project, tmp_path: Path) -> None:
    _, envelope = signed.emit()
    key_file = next((tmp_path / "orchestrator-config/eidolons/keys").glob("*.pem"))
    planted = signed.root / "keys" / "orchestrator.pem"  # where every agent can read it
    planted.parent.mkdir()
    planted.write_bytes(key_file.read_bytes())
    planted.chmod(0o600)
    env = {**signed.env, "EIDOLONS_SIGNING_KEY_FILE": str(planted)}
    r = signed.verify(envelope, "--mode", "block", env=env)
    assert r.code == 3 and "inside the project" in r.err
    assert not receipt_file(envelope).exists()


def test_trace_verify_with_an_unreadable_trust_store_fails_closed(signed: Project) -> None:
    """A receipt that cannot be checked is no evidence: ``trace verify`` must not pass a
    verdict on record because the trust store it would check it against is damaged."""
    _, envelope = signed.emit()
    assert signed.verify(envelope, "--mode", "block").code == 0
    thread = json.loads(envelope.read_bytes())["thread_id"]
    assert signed.cli("trace", "verify", thread, "--block").code == 0
    (signed.root / ".eidolons/trust.json").write_text("{not json")
    r = signed.cli("trace", "verify", thread, "--block", "--json")
    assert r.code == 3, r.out
    assert "receipts not checked" in r.err
    doc = r.json()
    assert doc["all_pass"] is False and doc["failed"] == 1


# ------------------------------------------------------------------------ trace verify


def _trace_with_receipt(signed: Project, out: Path, receipt: object | None = None) -> Path:
    """The project's one trace copied to ``out`` and re-linked (the chain holds), with the
    verdict line's receipt replaced by ``receipt`` when given."""
    from eidolons.trace.log import append_event

    (trace,) = (signed.root / ".eidolons/.trace").glob("*.jsonl")
    for raw in trace.read_bytes().splitlines():
        event = {k: v for k, v in json.loads(raw).items() if k not in ("seq", "prev")}
        if receipt is not None and event.get("gate") == "orchestrator":
            event["receipt"] = receipt
        append_event(out, event)
    return out


def _trace_receipt(signed: Project, trace: Path) -> tuple[int, str]:
    r = signed.cli("trace", "verify", trace, "--block", "--json")
    (chain,) = r.json()["chains"]
    assert chain["state"] == "intact", chain
    (entry,) = chain["receipts"]
    return r.code, str(entry["receipt"])


def _key_file(tmp_path: Path, keyid: str) -> Path:
    (found,) = (tmp_path / "orchestrator-config/eidolons/keys").glob(f"{keyid}*.pem")
    return found


def test_trace_verify_refuses_receipts_of_revoked_expired_or_untrusted_keys(
    signed: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", signed.env["XDG_CONFIG_HOME"])  # the operator's pins
    _, envelope = signed.emit()
    assert signed.verify(envelope, "--mode", "block").code == 0
    assert _trace_receipt(signed, _trace_with_receipt(signed, tmp_path / "ok.jsonl")) == (
        0,
        "valid",
    )
    genuine = json.loads(receipt_file(envelope).read_text())
    forged = sign_envelope(
        genuine["payloadType"], base64.b64decode(genuine["payload"]), Signer.generate()
    )
    untrusted = _trace_with_receipt(signed, tmp_path / "untrusted.jsonl", forged)
    assert _trace_receipt(signed, untrusted) == (
        3,
        "invalid: the receipt is not signed by any orchestrator key in the trust store "
        "(self-minted or forged)",
    )
    store = load_trust_store(signed.root)
    assert store is not None
    key = store.keys[0]
    key.created, key.not_after = "2025-01-01T00:00:00Z", "2026-01-01T00:00:00Z"
    store.save(signed.root)
    trace = _trace_with_receipt(signed, tmp_path / "expired.jsonl")
    assert _trace_receipt(signed, trace) == (
        3,
        f"invalid: the receipt is signed by orchestrator key {key.keyid[:16]}, expired since "
        "2026-01-01T00:00:00Z",
    )
    key.not_after, key.revoked = None, "2026-02-01T00:00:00Z"
    store.save(signed.root)
    assert _trace_receipt(signed, trace) == (
        3,
        f"invalid: the receipt is signed by orchestrator key {key.keyid[:16]}, revoked since "
        "2026-02-01T00:00:00Z",
    )
    key.revoked, key.created = None, "2999-01-01T00:00:00Z"
    store.save(signed.root)
    assert _trace_receipt(signed, trace) == (
        3,
        f"invalid: the receipt is signed by orchestrator key {key.keyid[:16]}, not-yet-valid",
    )


def test_trace_verify_judges_keys_as_the_receiver_does(signed: Project, tmp_path: Path) -> None:
    """The one key-validity rule (``TrustStore.verify_signed``): a receipt that a revoked
    key and an active key both signed is valid, whichever signature comes first."""
    from eidolons.keys.store import Signed

    _, envelope = signed.emit()
    assert signed.verify(envelope, "--mode", "block").code == 0
    genuine = json.loads(receipt_file(envelope).read_text())
    old = load_trust_store(signed.root).keys[0].keyid  # type: ignore[union-attr]
    assert signed.cli("keys", "rotate").code == 0
    store = load_trust_store(signed.root)
    assert store is not None
    (new,) = store.active("orchestrator", "2100-01-01T00:00:00Z")
    body = base64.b64decode(genuine["payload"])
    second = sign_envelope(
        genuine["payloadType"], body, Signer.from_pem(_key_file(tmp_path, new.keyid).read_bytes())
    )
    both = dict(genuine, signatures=genuine["signatures"] + second["signatures"])
    now = "2100-01-01T00:00:00Z"
    judged: Signed = store.verify_signed(both, "orchestrator", genuine["payloadType"], now)
    assert judged.key is not None and judged.key.keyid == new.keyid  # the rule says valid
    assert store.get(old) is not None and store.get(old).status(now) == "revoked"  # type: ignore[union-attr]
    trace = _trace_with_receipt(signed, tmp_path / "both.jsonl", both)
    assert _trace_receipt(signed, trace) == (0, "valid")
    only_old = _trace_with_receipt(signed, tmp_path / "old.jsonl", genuine)
    code, status = _trace_receipt(signed, only_old)
    assert code == 3
    assert status.startswith(
        f"invalid: the receipt is signed by orchestrator key {old[:16]}, revoked since "
    )


def test_a_receipt_that_cannot_be_written_is_recorded_and_blocks(signed: Project) -> None:
    """The documented late failure of a pass (README, ADR 0003): the sidecar receipt
    cannot be written, the verdict is recorded with its receipt in the trace, and block
    mode exits 3 (a receiver on another host would find no receipt); warn mode says so
    and exits 0."""
    _, envelope = signed.emit()
    receipt_file(envelope).mkdir()  # nothing can be renamed over a directory
    (receipt_file(envelope) / "x").write_text("")
    r = signed.verify(envelope, "--mode", "block")
    assert r.code == 3 and "receipt not written beside the envelope" in r.err, r.err
    (trace,) = (signed.root / ".eidolons/.trace").glob("*.jsonl")
    last = read_trace(trace)[-1]
    assert last["event"] == "verify_pass" and last["receipt"]["signatures"]
    warn = signed.verify(envelope, "--mode", "warn")
    assert warn.code == 0 and "receipt not written beside the envelope" in warn.err
