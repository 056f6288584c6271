"""Forged evidence: a pass is evidence only when the project's trust store, the receipt and
the orchestrator's record all stand for the envelope judged. A root without the trust
store, a trust store behind a link or deleted, a record for another digest or of another
kind, a pass smuggled into a string: each is refused."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from eidolons.ecl.envelope import parse_envelope
from eidolons.ecl.receiver import judge_record
from eidolons.gates.receiver import INTEGRITY_MISMATCH
from tests.conftest import Run, clean_env, emit_cmd, emit_payload, read_trace
from tests.security._probes import EVIL, TAMPERED, Cli, envelope_of, load, trace_of, verified
from tests.test_receipts import Project
from tests.test_receiver import handoff, incoming


def _rewrite_and_reemit(p: Project, payload: Path) -> None:
    payload.write_text(TAMPERED)
    envelope = payload.with_name(payload.stem + ".envelope.json")
    envelope.unlink()
    p.emit(str(payload.relative_to(p.root)), TAMPERED)


def test_a_handoff_is_not_judged_under_a_root_without_its_trust_store(
    signed: Project,
    tmp_path: Path,
) -> None:
    """An agent rewrites a signed project's hand-off, then points the gates at a root of
    its own that has no trust store: unsigned mode, where its own pass is evidence."""
    payload, envelope = signed.emit()
    assert signed.verify(envelope).code == 0
    _rewrite_and_reemit(signed, payload)
    fake = tmp_path / "fake"
    (fake / ".eidolons").mkdir(parents=True)
    signed.cli("verify-envelope", envelope, env=signed.keyless, root=fake)
    r = signed.incoming(payload, "--print-payload", root=fake)
    assert r.code == 3, r
    assert "rewritten by an agent" not in r.out
    assert r.err.startswith("[vigil-verify-incoming] REFUSE: UNVERIFIED from atlas\n")


def test_a_nested_root_does_not_judge_the_projects_handoff(
    signed: Project,
) -> None:
    """The same with a `.eidolons/` the agent made in a subdirectory: from there the
    nearest root is the agent's, with no trust store."""
    payload, envelope = signed.emit()
    _rewrite_and_reemit(signed, payload)
    sub = signed.root / "sub"
    (sub / ".eidolons").mkdir(parents=True)
    signed.cli("verify-envelope", envelope, env=signed.keyless, root=sub)
    r = signed.incoming(payload, "--print-payload", root=sub)
    assert r.code == 3, r
    assert "rewritten by an agent" not in r.out


def test_a_trust_store_reached_through_a_link_is_no_trust_store(
    signed: Project,
    tmp_path: Path,
) -> None:
    """`.eidolons/trust.json` swapped for a link to a store the agent writes elsewhere (one
    listing its own key as the orchestrator's) is never followed: every gate refuses."""
    payload, envelope = signed.emit()
    assert signed.verify(envelope).code == 0
    trust = signed.root / ".eidolons" / "trust.json"
    elsewhere = tmp_path / "agent-trust.json"
    elsewhere.write_bytes(trust.read_bytes())
    trust.unlink()
    trust.symlink_to(elsewhere)
    r = signed.incoming(payload)
    assert r.code == 3, r
    assert "trust store unusable" in r.err and "symbolic link" in r.err


def test_deleting_the_trust_store_does_not_downgrade_a_signed_handoff(
    signed: Project,
) -> None:
    """The agent deletes `.eidolons/trust.json`, rewrites the payload, re-emits the envelope
    and mints an unsigned pass: the receipt beside the envelope, or on record, says the
    project was signed, so "no trust store" is a refusal, not unsigned mode."""
    payload, envelope = signed.emit()
    assert signed.verify(envelope).code == 0
    (signed.root / ".eidolons" / "trust.json").unlink()
    _rewrite_and_reemit(signed, payload)
    assert signed.verify(envelope, env=signed.keyless).code == 0  # unsigned pass on record
    # on the orchestrator's host the pin refuses it (ADR 0011); on a host with no pin for
    # this project (a receiver's), the receipt beside the envelope does
    here = signed.incoming(payload, "--print-payload")
    assert here.code == 3 and "rewritten by an agent" not in here.out, here
    unpinned = signed.cli(
        "verify-incoming",
        payload,
        "--as",
        "vigil",
        "--no-memory",
        "--print-payload",
        env=signed.keyless,
    )
    assert unpinned.code == 3, unpinned
    assert "rewritten by an agent" not in unpinned.out
    assert "never judged unsigned" in unpinned.err


OTHER_TAG = "0" * 64


HMAC_KEY = "record-tests-hmac-key-of-32-bytes"


def orchestrator_record(project: Path, envelope: Path) -> dict[str, Any]:
    thread = json.loads(envelope.read_text())["thread_id"]
    events = read_trace(project / ".eidolons" / ".trace" / f"{thread}.jsonl")
    return [e for e in events if e.get("gate") == "orchestrator"][-1]


def test_record_for_another_digest_is_refused_even_over_the_same_envelope_bytes(
    cli: Cli, project: Path
) -> None:
    """A verify_pass whose integrity_value differs from the envelope's is no evidence, even
    when its envelope_sha256 and payload_sha256 happen to match (a forged or damaged
    record): the receiver refuses, with and without re-verification."""
    payload = handoff(cli, project, "atlas", "vigil", "PROPOSE", "scout-report")
    envelope = payload.with_suffix(".envelope.json")
    record = orchestrator_record(project, envelope)
    assert record["event"] == "verify_pass"
    trace = project / ".eidolons" / ".trace" / f"{record['thread_id']}.jsonl"
    with trace.open("a") as fh:
        fh.write(json.dumps({**record, "integrity_value": OTHER_TAG}, separators=(",", ":")))
        fh.write("\n")
    for extra in ([], ["--no-reverify"]):
        r = incoming(cli, payload, "vigil", *extra, "--print-payload")
        assert r.code == 3, r.err
        assert r.out == ""
        assert r.err == (
            "[vigil-verify-incoming] REFUSE: INTEGRITY_MISMATCH from atlas\n"
            "[vigil-verify-incoming] reason: the pass on record is for another digest "
            "(envelope swapped)\n"
        )


@pytest.mark.parametrize("hmac", [False, True])
def test_judge_record_demands_every_field_of_the_record(
    cli: Cli, project: Path, hmac: bool
) -> None:
    """Rule 3 field by field, on genuine SHA-256 and HMAC records: another tag, another
    method or other envelope bytes on record (or the field missing) is INTEGRITY_MISMATCH."""
    extra = ("--hmac",) if hmac else ()
    env_vars = clean_env(ECL_HMAC_KEY=HMAC_KEY if hmac else None)

    def run(*args: str | Path, env: dict[str, str] | None = None) -> Run:
        return cli(*args, env=env_vars)

    _, envelope, _ = emit_payload(run, project, "handoff/r.md", "# r\n", *extra)
    assert run("verify-envelope", envelope, "--block").code == 0
    data = envelope.read_bytes()
    env = parse_envelope(data)
    envelope_sha256 = hashlib.sha256(data).hexdigest()
    record = orchestrator_record(project, envelope)
    assert env.integrity_method == ("hmac-sha256" if hmac else "sha256")
    assert judge_record(env, record, envelope_sha256) is None  # the genuine record holds
    for name, value in [
        ("integrity_value", OTHER_TAG),
        ("integrity_method", "sha256" if hmac else "hmac-sha256"),
        ("envelope_sha256", OTHER_TAG),
    ]:
        judged = judge_record(env, {**record, name: value}, envelope_sha256)
        assert judged is not None and judged[0] == INTEGRITY_MISMATCH, name
        missing = {k: v for k, v in record.items() if k != name}
        judged = judge_record(env, missing, envelope_sha256)
        assert judged is not None and judged[0] == INTEGRITY_MISMATCH, f"no {name}"
    if not hmac:  # a SHA-256 pass must also have hashed the bytes the tag names
        judged = judge_record(env, {**record, "payload_sha256": OTHER_TAG}, envelope_sha256)
        assert judged is not None and judged[0] == INTEGRITY_MISMATCH


def test_only_verification_events_are_records_even_from_the_orchestrator(
    cli: Cli, project: Path
) -> None:
    """The latest verify_pass/verify_fail decides: a later event of another kind carrying
    the orchestrator's gate and a pass's fields neither overrides a verify_fail nor
    stands in for a pass."""
    payload = handoff(cli, project, "atlas", "vigil", "PROPOSE", "scout-report")
    envelope = payload.with_suffix(".envelope.json")
    record = orchestrator_record(project, envelope)
    trace = project / ".eidolons" / ".trace" / f"{record['thread_id']}.jsonl"
    with trace.open("a") as fh:
        for kind in ("verify_fail", "receive"):
            fh.write(json.dumps({**record, "event": kind}, separators=(",", ":")) + "\n")
    for extra in ([], ["--no-reverify"]):
        r = incoming(cli, payload, "vigil", *extra, "--print-payload")
        assert r.code == 3 and r.out == ""
        assert r.err.startswith(
            "[vigil-verify-incoming] REFUSE: INTEGRITY_MISMATCH from atlas\n"
            "[vigil-verify-incoming] reason: the orchestrator gate recorded verify_fail"
        )


def test_pass_smuggled_inside_a_string_is_not_evidence(cli: Cli, project: Path) -> None:
    """The receiver pre-filters trace lines on the message id; a whole forged pass inside a
    string of another event matches the filter but is never decoded as an event."""
    payload = project / "p.md"
    payload.write_bytes(EVIL)
    r = cli(*emit_cmd(payload))
    assert r.code == 0
    envelope = envelope_of(payload)
    doc = load(envelope)
    forged = {
        "event": "verify_pass",
        "message_id": doc["message_id"],
        "gate": "orchestrator",
        "integrity_method": "sha256",
        "integrity_value": doc["integrity"]["value"],
        "payload_sha256": doc["integrity"]["value"],
    }
    with trace_of(project, envelope).open("a") as fh:
        fh.write(json.dumps({"event": "note", "reason": json.dumps(forged)}) + "\n")
        fh.write(json.dumps({"event": "verify_pass", "gate": "orchestrator "}) + "\n")
    r = incoming(cli, payload, "vigil", "--no-reverify", "--print-payload")
    assert r.code == 3 and r.out == "" and "UNVERIFIED" in r.err


def test_forged_orchestrator_fail_after_a_pass_refuses(cli: Cli, project: Path) -> None:
    """Appending to the trace can deny a hand-off, never grant one: the latest record wins."""
    payload = verified(cli, project)
    trace = trace_of(project, envelope_of(payload))
    record = [e for e in read_trace(trace) if e.get("gate") == "orchestrator"][-1]
    with trace.open("a") as fh:
        fh.write(json.dumps({**record, "event": "verify_fail"}) + "\n")
    r = incoming(cli, payload, "vigil", "--print-payload")
    assert r.code == 3 and r.out == "" and "INTEGRITY_MISMATCH" in r.err
