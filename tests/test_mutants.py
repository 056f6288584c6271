"""Tests written to kill mutants of the gates that the rest of the suite let survive.

Each pins one check that other checks mostly shadow, so deleting it alone went unnoticed:
the receiver's rule 3 (the orchestrator's record must match the envelope field by field,
and only verify_pass/verify_fail events count), and payload resolution (a dangling first
candidate stops the search; the located file is opened without following a symlink).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eidolons.ecl.envelope import parse_envelope
from eidolons.gates.receiver import INTEGRITY_MISMATCH, judge_record
from eidolons.io.payload import PayloadError, locate_payload, open_payload
from tests.conftest import Run, clean_env, emit_payload, read_trace
from tests.test_receiver import handoff, incoming

Cli = Callable[..., Run]
OTHER_TAG = "0" * 64
HMAC_KEY = "mutant-tests-hmac-key-of-32-bytes"


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


def test_payload_swapped_for_a_symlink_after_it_was_located_is_not_opened(
    tmp_path: Path,
) -> None:
    """The file located is opened (by descriptor) when it is located: swapping it for a
    link to a file outside the boundary afterwards never makes the gate read the link."""
    root = tmp_path / "proj"
    (root / "handoff").mkdir(parents=True)
    secret = tmp_path / "outside-secret.txt"
    secret.write_text("not for the gate\n")
    payload = root / "handoff" / "r.md"
    payload.write_text("# r\n")
    envelope = root / "handoff" / "r.envelope.json"
    envelope.write_text("{}")
    location = locate_payload(envelope, "r.md", root)
    assert location.real == payload.resolve()
    payload.unlink()
    payload.symlink_to(secret)  # the race: after the boundary check, before the read
    with open_payload(location) as stream:  # the descriptor located is the one read
        assert stream.read() == b"# r\n"


def test_dangling_symlink_candidate_stops_the_search(tmp_path: Path) -> None:
    """The first candidate that exists decides, even as a dangling symlink: breaking it
    never lets resolution fall through to a file planted at a later candidate."""
    root = tmp_path / "proj"
    (root / "handoff").mkdir(parents=True)
    envelope = root / "handoff" / "r.envelope.json"
    envelope.write_text("{}")
    (root / "handoff" / "r.md").symlink_to(root / "handoff" / "gone.md")
    (root / "r.md").write_text("# planted at the project-root candidate\n")
    with pytest.raises(PayloadError, match="dangling"):
        locate_payload(envelope, "r.md", root)
