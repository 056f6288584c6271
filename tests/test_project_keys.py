"""The orchestrator's key signs only for its own project (ADR 0011).

A project's trust store names the project (a random id made once); ``keys init`` registers
that id and the root's real path for the key on this host, outside the project. The gate
signs only at a registered root, every receipt names its project, and a receiver accepts a
receipt only when the trust store pins the pair (receipt's key, receipt's project). So
nothing minted in a scratch directory -- a plain ``verify-envelope`` beside a copied
``trust.json``, or ``eidolons demo`` -- is evidence in the real project.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eidolons.ecl.events import statement_bytes
from eidolons.keys.receipts import Signer, sign_envelope
from tests.conftest import Run, read_trace, run_cli
from tests.test_receipts import BODY, Project, receipt_file, refusal, statement_of

NAME = "handoff/scout-report.md"


@pytest.fixture
def signed(tmp_path: Path) -> Project:
    """Project P: keys set up on this host (its key under XDG_CONFIG_HOME)."""
    root = tmp_path / "proj"
    (root / ".eidolons").mkdir(parents=True)
    p = Project(root, tmp_path / "orchestrator-config")
    assert p.cli("keys", "init").code == 0
    return p


def config_of(p: Project) -> Path:
    return Path(p.env["XDG_CONFIG_HOME"]) / "eidolons"


def key_file(p: Project) -> Path:
    (found,) = (config_of(p) / "keys").glob("*.pem")
    return found


def project_id(root: Path) -> str:
    return str(json.loads((root / ".eidolons/trust.json").read_text())["project"])


def scratch(tmp_path: Path, p: Project, name: str = "scratch") -> Project:
    """A scratch directory the attacker made, with P's trust store copied in, run with the
    host's real environment (P's key reachable)."""
    root = tmp_path / name
    (root / ".eidolons").mkdir(parents=True)
    shutil.copy(p.root / ".eidolons/trust.json", root / ".eidolons/trust.json")
    other = Project(root, Path(p.env["XDG_CONFIG_HOME"]))
    return other


def plant(src_root: Path, dest_root: Path, files: list[Path]) -> None:
    """Copy ``files`` (under ``src_root``) to the same place under ``dest_root``."""
    for f in files:
        target = dest_root / f.relative_to(src_root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, target)


def trace_lines(root: Path) -> Iterator[tuple[Path, bytes]]:
    for trace in sorted((root / ".eidolons/.trace").glob("*.jsonl")):
        for raw in trace.read_bytes().splitlines():
            yield trace, raw


def copy_records(src_root: Path, dest_root: Path) -> None:
    """Append every orchestrator verdict line of ``src_root``'s traces (receipts included)
    to the same thread's trace under ``dest_root``: an agent copying the trace record."""
    for trace, raw in trace_lines(src_root):
        event = json.loads(raw)
        if event.get("gate") == "orchestrator":
            dest = dest_root / ".eidolons/.trace" / trace.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            with dest.open("ab") as fh:
                fh.write(raw + b"\n")


def resign(p: Project, receipt: dict[str, Any], **predicate: Any) -> dict[str, Any]:
    """``receipt``'s statement with ``predicate`` changed (None removes a field), signed by
    P's real orchestrator key: what the key would have signed elsewhere."""
    st = statement_of(receipt)
    pred = st["predicate"]
    assert isinstance(pred, dict)
    for k, v in predicate.items():
        if v is None:
            pred.pop(k, None)
        else:
            pred[k] = v
    signer = Signer.from_pem(key_file(p).read_bytes())
    return sign_envelope(receipt["payloadType"], statement_bytes(st), signer)


def only_sidecar(p: Project, envelope: Path, receipt: dict[str, Any]) -> None:
    receipt_file(envelope).write_text(json.dumps(receipt))
    for trace in (p.root / ".eidolons/.trace").glob("*.jsonl"):
        trace.write_text("")


# --------------------------------------------------------------------- the scenario


def test_a_pass_minted_beside_a_copied_trust_store_is_refused_by_the_project(
    signed: Project, tmp_path: Path
) -> None:
    """The attacker copies P's trust.json into a scratch directory, writes its own bytes
    there, and runs the orchestrator gate with the host's environment: the key is
    reachable, but the scratch root is not registered, so nothing is signed, and neither
    the files nor the trace record make P's receiver accept the attacker's bytes."""
    attacker = scratch(tmp_path, signed)
    payload, envelope = attacker.emit(NAME, BODY + "\nrm -rf / # injected\n")
    r = attacker.verify(envelope, "--mode", "block")
    assert r.code == 3, r.err
    assert "eidolons keys register" in r.err and "signs only" in r.err
    assert not receipt_file(envelope).exists()
    (event,) = [e for e in read_trace(next((attacker.root / ".eidolons/.trace").glob("*")))
                if e.get("gate") == "orchestrator"]  # fmt: skip
    assert event["event"] == "verify_fail" and event["verdict"] == "unregistered"
    assert "receipt" not in event
    # the files copied beside P's hand-off place, then the trace record as well
    plant(attacker.root, signed.root, [payload, envelope])
    r = signed.incoming(signed.root / NAME)
    assert r.code == 3 and r.err.splitlines()[0] == refusal("UNVERIFIED"), r.err
    copy_records(attacker.root, signed.root)
    r = signed.incoming(signed.root / NAME)
    assert r.code == 3 and r.err.splitlines()[0] == refusal("UNVERIFIED"), r.err


def test_warn_mode_does_not_turn_an_unregistered_root_into_an_unsigned_pass(
    signed: Project, tmp_path: Path
) -> None:
    attacker = scratch(tmp_path, signed)
    _, envelope = attacker.emit()
    r = attacker.verify(envelope, "--mode", "warn", "--json")
    assert r.code == 3, r.err
    doc = r.json()
    assert doc["verdict"] == "unregistered" and doc["receipt"] is None
    assert doc["failure_code"] == "UNVERIFIED"
    assert "eidolons keys register" in doc["message"]
    routed = attacker.cli("run", "--verify", envelope, "--mode", "warn")
    assert routed.code == 3 and "route blocked" in routed.err


def _demo_with_the_trust_store_copied_in(
    signed: Project, kept: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> Run:
    """``eidolons demo --keep KEPT`` run with the host's environment, while an agent copies
    P's trust.json into the demo's project between the demo's emit and its verify."""
    import eidolons.gates.sender

    real_emit = eidolons.gates.sender.emit

    def emit_then_swap(*args: Any, **kwargs: Any) -> Any:
        result = real_emit(*args, **kwargs)
        shutil.copy(signed.root / ".eidolons/trust.json", kept / ".eidolons/trust.json")
        return result

    monkeypatch.setattr(eidolons.gates.sender, "emit", emit_then_swap)
    return run_cli("demo", "--keep", kept, cwd=kept.parent, env=env)


@pytest.mark.parametrize("key_variable", [False, True])
def test_a_demo_run_with_the_trust_store_copied_in_mints_nothing_the_project_accepts(
    signed: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key_variable: bool
) -> None:
    from eidolons.cli.demo import PAYLOAD

    env = dict(signed.env)
    if key_variable:  # the host names its key file: the demo must not use it either
        env["EIDOLONS_SIGNING_KEY_FILE"] = str(key_file(signed))
    kept = tmp_path / "kept"
    _demo_with_the_trust_store_copied_in(signed, kept, monkeypatch, env)
    handoffs = kept / ".eidolons/handoffs"
    envelope = handoffs / "scout-report.envelope.json"
    passes = [json.loads(raw) for _, raw in trace_lines(kept)]
    minted = [e["receipt"] for e in passes if e.get("event") == "verify_pass" and "receipt" in e]
    # whatever the demo signed, P's key signed none of it
    p_key = key_file(signed).stem
    for receipt in minted:
        assert receipt["signatures"][0]["keyid"] != p_key
    # copied beside P's hand-off (the demo's first pass and the original bytes)...
    dest = signed.root / ".eidolons/handoffs"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "scout-report.md").write_text(PAYLOAD, encoding="utf-8")
    shutil.copy(envelope, dest / envelope.name)
    for receipt in minted[:1]:
        receipt_file(dest / envelope.name).write_text(json.dumps(receipt))
    r = signed.incoming(dest / "scout-report.md")
    assert r.code == 3 and r.err.splitlines()[0].startswith(
        "[vigil-verify-incoming] REFUSE: UNVERIFIED"
    ), r.err
    # ...or the demo's trace record copied into P's trace
    receipt_file(dest / envelope.name).unlink(missing_ok=True)
    copy_records(kept, signed.root)
    r = signed.incoming(dest / "scout-report.md")
    assert r.code == 3 and "REFUSE: UNVERIFIED" in r.err.splitlines()[0], r.err


def _tree(directory: Path) -> dict[str, tuple[int, bytes]]:
    out: dict[str, tuple[int, bytes]] = {}
    for path in sorted(directory.rglob("*")):
        st = path.lstat()
        out[str(path.relative_to(directory))] = (
            st.st_mode,
            path.read_bytes() if path.is_file() and not path.is_symlink() else b"",
        )
    return out


def test_the_demo_never_touches_the_hosts_config_and_its_receipts_are_not_the_projects(
    signed: Project, tmp_path: Path
) -> None:
    from eidolons.cli.demo import PAYLOAD

    before = _tree(config_of(signed))
    kept = tmp_path / "kept"
    r = run_cli("demo", "--keep", kept, cwd=tmp_path, env=signed.env)
    assert r.code == 0, r.out + r.err
    assert _tree(config_of(signed)) == before  # keys, pins, heads, indexes: byte for byte
    assert "evidence: signed-receipt" in r.out  # the demo signs, with a key of its own
    envelope = kept / ".eidolons/handoffs/scout-report.envelope.json"
    (first,) = [
        json.loads(raw)["receipt"]
        for _, raw in trace_lines(kept)
        if json.loads(raw).get("event") == "verify_pass"
        and json.loads(raw).get("gate") == "orchestrator"
        and json.loads(raw).get("message_id") == json.loads(envelope.read_text())["message_id"]
    ]
    dest = signed.root / ".eidolons/handoffs"
    dest.mkdir(parents=True)
    (dest / "scout-report.md").write_text(PAYLOAD, encoding="utf-8")
    shutil.copy(envelope, dest / envelope.name)
    receipt_file(dest / envelope.name).write_text(json.dumps(first))
    r = signed.incoming(dest / "scout-report.md")
    assert r.code == 3 and "REFUSE: UNVERIFIED" in r.err.splitlines()[0], r.err
    assert "not signed by any orchestrator key in the trust store" in r.err


# ---------------------------------------------------------------- receipts name the project


def test_each_receipt_names_the_project(signed: Project) -> None:
    _, envelope = signed.emit()
    assert signed.verify(envelope, "--mode", "block").code == 0
    pred = statement_of(json.loads(receipt_file(envelope).read_text()))["predicate"]
    assert pred["project"] == project_id(signed.root)  # type: ignore[index]


def test_a_receipt_the_key_signed_for_another_project_is_refused(signed: Project) -> None:
    """P's own key, a statement for P's exact bytes, but minted for another project."""
    payload, envelope = signed.emit()
    assert signed.verify(envelope, "--mode", "block").code == 0
    genuine = json.loads(receipt_file(envelope).read_text())
    other = "0" * 32
    only_sidecar(signed, envelope, resign(signed, genuine, project=other))
    r = signed.incoming(payload)
    assert r.code == 3 and r.err.splitlines()[0] == refusal("UNVERIFIED"), r.err
    assert f"for project {other}" in r.err.splitlines()[1]
    assert "does not pin" in r.err.splitlines()[1]


def test_a_receipt_that_names_no_project_says_to_verify_again(signed: Project) -> None:
    payload, envelope = signed.emit()
    assert signed.verify(envelope, "--mode", "block").code == 0
    genuine = json.loads(receipt_file(envelope).read_text())
    only_sidecar(signed, envelope, resign(signed, genuine, project=None))
    r = signed.incoming(payload)
    assert r.code == 3 and r.err.splitlines()[0] == refusal("UNVERIFIED"), r.err
    assert "names no project" in r.err and "eidolons verify-envelope" in r.err
    assert signed.verify(envelope, "--mode", "block").code == 0  # re-signed
    assert signed.incoming(payload).code == 0


def test_two_projects_sharing_a_key_do_not_accept_each_others_receipts(
    signed: Project, tmp_path: Path
) -> None:
    """The operator trusts P's key in project Q too (``keys add`` + ``keys register``): Q's
    hand-offs are signed by the same key, but for Q; copied into P, they are refused."""
    q = Project(tmp_path / "q", Path(signed.env["XDG_CONFIG_HOME"]))
    (q.root / ".eidolons").mkdir(parents=True)
    public = signed.cli("keys", "export", key_file(signed).stem).out.strip()
    assert q.cli("keys", "add", public, "--role", "orchestrator").code == 0
    assert q.cli("keys", "register").code == 0, "registered"
    payload, envelope = q.emit(NAME, BODY + "from Q\n")
    assert q.verify(envelope, "--mode", "block").code == 0
    assert q.incoming(payload).code == 0
    plant(q.root, signed.root, [payload, envelope, receipt_file(envelope)])
    copy_records(q.root, signed.root)
    r = signed.incoming(signed.root / NAME)
    assert r.code == 3 and r.err.splitlines()[0] == refusal("UNVERIFIED"), r.err
    assert f"for project {project_id(q.root)}" in r.err.splitlines()[1]


def test_a_receiving_host_accepts_exactly_the_projects_it_pinned(
    signed: Project, tmp_path: Path
) -> None:
    """Another organisation's host keeps its own trust store and pins (P's key, P)."""
    payload, envelope = signed.emit()
    assert signed.verify(envelope, "--mode", "block").code == 0
    b = Project(tmp_path / "b", tmp_path / "b-config")
    (b.root / ".eidolons").mkdir(parents=True)
    plant(signed.root, b.root, [payload, envelope, receipt_file(envelope)])
    keyid = key_file(signed).stem
    public = signed.cli("keys", "export", keyid).out.strip()
    assert b.cli("keys", "add", public, "--role", "orchestrator").code == 0
    r = b.incoming(b.root / NAME)  # pinned for B's own project only: P's receipts refused
    assert r.code == 3 and f"for project {project_id(signed.root)}" in r.err, r.err
    assert f"--project {project_id(signed.root)}" in r.err  # the line says what to run
    pinned = b.cli("keys", "add", public, "--role", "orchestrator", "--project",
                   project_id(signed.root), "--json")  # fmt: skip
    assert pinned.code == 0, pinned.err
    assert sorted(pinned.json()["projects"]) == sorted(
        [project_id(b.root), project_id(signed.root)]
    )
    assert b.incoming(b.root / NAME).code == 0
    shown = b.cli("keys", "show", keyid[:12]).json()
    assert project_id(signed.root) in shown["projects"]


def test_an_older_trust_store_is_refused_until_keys_init_upgrades_it(
    signed: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    payload, envelope = signed.emit()
    assert signed.verify(envelope, "--mode", "block").code == 0
    trust = signed.root / ".eidolons/trust.json"
    doc = json.loads(trust.read_text())  # the format before stores named their project
    old = {"version": 1, "keys": doc["keys"], "require_sender_signature": []}
    for k in old["keys"]:
        k.pop("projects", None)
    trust.write_text(json.dumps(old, indent=2) + "\n")
    assert signed.cli("keys", "pin").code == 0  # the operator's own older store
    r = signed.incoming(payload)
    assert r.code == 3 and r.err.splitlines()[0] == refusal("UNVERIFIED"), r.err
    assert "older trust store" in r.err and "eidolons keys init" in r.err
    v = signed.verify(envelope, "--mode", "block")
    assert v.code == 3 and "eidolons keys init" in v.err
    up = signed.cli("keys", "init", "--json")
    assert up.code == 0, up.err
    upgraded = json.loads(trust.read_text())
    assert upgraded["version"] == 2 and len(upgraded["project"]) == 32
    assert upgraded["keys"][0]["projects"] == [upgraded["project"]]
    assert signed.verify(envelope, "--mode", "block").code == 0
    assert signed.incoming(payload).code == 0


def test_trace_verify_judges_the_project_by_the_same_rule(signed: Project) -> None:
    _, envelope = signed.emit()
    assert signed.verify(envelope, "--mode", "block").code == 0
    genuine = json.loads(receipt_file(envelope).read_text())
    (trace,) = (signed.root / ".eidolons/.trace").glob("*.jsonl")
    thread = json.loads(envelope.read_text())["thread_id"]
    assert signed.cli("trace", "verify", thread, "--block").code == 0
    from tests.test_receipts import _trace_receipt, _trace_with_receipt

    foreign = resign(signed, genuine, project="1" * 32)
    out = _trace_with_receipt(signed, trace.parent.parent / "copy.jsonl", foreign)
    code, status = _trace_receipt(signed, out)
    assert code == 3 and status.startswith("invalid: ") and "for project 1111" in status


# ---------------------------------------------------------------- registration on the host


def test_init_registers_the_project_outside_it(signed: Project) -> None:
    registry = config_of(signed) / "projects.json"
    assert oct(registry.stat().st_mode & 0o777) == "0o600"
    doc = json.loads(registry.read_text())
    keyid = key_file(signed).stem
    assert doc["keys"][keyid][project_id(signed.root)]["root"] == os.path.realpath(signed.root)
    assert not list(signed.root.rglob("projects.json"))


def test_a_moved_project_receives_as_it_is_but_signs_only_once_registered(
    signed: Project, tmp_path: Path
) -> None:
    payload, envelope = signed.emit()
    assert signed.verify(envelope, "--mode", "block").code == 0
    old_root = signed.root
    moved = Project(tmp_path / "moved", Path(signed.env["XDG_CONFIG_HOME"]))
    os.rename(old_root, moved.root)
    moved_payload = moved.root / payload.relative_to(old_root)
    moved_envelope = moved.root / envelope.relative_to(old_root)
    assert moved.cli("keys", "pin").code == 0  # the pin is keyed by path (ADR 0011)
    assert moved.incoming(moved_payload).code == 0  # existing receipts stay valid
    r = moved.verify(moved_envelope, "--mode", "block")
    assert r.code == 3 and "eidolons keys register" in r.err
    assert str(old_root) in r.err  # where it is registered
    assert moved.cli("keys", "register").code == 0
    assert moved.verify(moved_envelope, "--mode", "block").code == 0
    assert moved.incoming(moved_payload).code == 0
    # the registration moved: a directory made at the old path no longer signs
    again = scratch(tmp_path, moved, "proj")
    assert again.root == old_root
    _, env2 = again.emit()
    assert again.verify(env2, "--mode", "block").code == 3


def test_keys_init_in_a_moved_project_points_at_keys_register(
    signed: Project, tmp_path: Path
) -> None:
    moved = Project(tmp_path / "moved", Path(signed.env["XDG_CONFIG_HOME"]))
    os.rename(signed.root, moved.root)
    assert moved.cli("keys", "pin").code == 0
    r = moved.cli("keys", "init", "--json")
    assert r.code == 0 and r.json()["registered"] is False
    assert "eidolons keys register" in r.json()["note"]


@pytest.mark.parametrize("mode", ["block", "warn"])
def test_a_broken_registry_signs_nothing(signed: Project, mode: str) -> None:
    _, envelope = signed.emit()
    (config_of(signed) / "projects.json").write_text("{not json")
    r = signed.verify(envelope, "--mode", mode)
    assert r.code == 3 and "projects.json" in r.err  # warn mode lets no unsigned pass by
    assert not receipt_file(envelope).exists()


def test_keys_register_needs_a_reachable_key(signed: Project) -> None:
    r = signed.cli("keys", "register", env=signed.keyless)
    assert r.code == 3 and r.err.startswith("eidolons: ") and r.err.count("\n") == 1


def test_doctor_reports_a_root_not_registered_for_its_key(signed: Project, tmp_path: Path) -> None:
    moved = Project(tmp_path / "moved", Path(signed.env["XDG_CONFIG_HOME"]))
    os.rename(signed.root, moved.root)
    assert moved.cli("keys", "pin").code == 0
    r = run_cli("doctor", "--json", "--root", moved.root, cwd=moved.root, env=moved.env)
    found = [f for f in r.json()["findings"] if f["check"] == "keys"]
    assert any("not registered" in f["message"] and "keys register" in f["message"]
               for f in found), found  # fmt: skip
    assert moved.cli("keys", "register").code == 0
    r = run_cli("doctor", "--json", "--root", moved.root, cwd=moved.root, env=moved.env)
    assert not [f for f in r.json()["findings"] if "registered" in f["message"]]


def test_a_sender_key_and_a_new_store_name_the_project_but_register_nothing(
    tmp_path: Path,
) -> None:
    p = Project(tmp_path / "s", tmp_path / "s-config")
    (p.root / ".eidolons").mkdir(parents=True)
    assert p.cli("keys", "init", "--role", "sender:atlas").code == 0
    doc = json.loads((p.root / ".eidolons/trust.json").read_text())
    assert doc["version"] == 2 and len(doc["project"]) == 32
    assert "projects" not in doc["keys"][0]  # a sender's key vouches for envelopes only
    assert not (tmp_path / "s-config/eidolons/projects.json").exists()
    listed = p.cli("keys", "list")
    assert listed.out.splitlines()[0] == f"project {doc['project']}"


@pytest.mark.parametrize(
    "extra",
    [
        ("--project", "not-an-id"),
        ("--project", "A" * 32),
        ("--role", "sender:atlas", "--project", "0" * 32),
    ],
)
def test_keys_add_refuses_a_bad_project(signed: Project, extra: tuple[str, ...]) -> None:
    public = signed.cli("keys", "export", key_file(signed).stem).out.strip()
    args = ("--role", "orchestrator", *extra) if extra[0] != "--role" else extra
    r = signed.cli("keys", "add", public, *args)
    assert r.code == 2 and r.err.startswith("eidolons: ") and r.err.count("\n") == 1, r.err


def test_keys_add_of_a_key_already_trusted_for_the_project_is_a_usage_error(
    signed: Project,
) -> None:
    public = signed.cli("keys", "export", key_file(signed).stem).out.strip()
    r = signed.cli("keys", "add", public, "--role", "orchestrator")
    assert r.code == 2 and "already trusted for" in r.err
