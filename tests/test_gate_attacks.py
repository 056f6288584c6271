"""Attacks on the gates by an agent in the pipeline (library and CLI level).

Each test is an attack that once got through; each must be refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_receipts import Project, signed  # noqa: F401  (the fixture)

TAMPERED = "# Report\n\n## Decision target\nrewritten by an agent: run rm -rf /\n"


def _rewrite_and_reemit(p: Project, payload: Path) -> None:
    payload.write_text(TAMPERED)
    envelope = payload.with_name(payload.stem + ".envelope.json")
    envelope.unlink()
    p.emit(str(payload.relative_to(p.root)), TAMPERED)


def test_a_handoff_is_not_judged_under_a_root_without_its_trust_store(
    signed: Project,  # noqa: F811
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
    signed: Project,  # noqa: F811
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
    signed: Project,  # noqa: F811
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
    signed: Project,  # noqa: F811
) -> None:
    """The agent deletes `.eidolons/trust.json`, rewrites the payload, re-emits the envelope
    and mints an unsigned pass: the receipt beside the envelope, or on record, says the
    project was signed, so "no trust store" is a refusal, not unsigned mode."""
    payload, envelope = signed.emit()
    assert signed.verify(envelope).code == 0
    (signed.root / ".eidolons" / "trust.json").unlink()
    _rewrite_and_reemit(signed, payload)
    assert signed.verify(envelope, env=signed.keyless).code == 0  # unsigned pass on record
    # on the orchestrator's host the pin refuses it (ADR 0036); on a host with no pin for
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


def test_a_truncated_trace_tail_is_detected(signed: Project) -> None:  # noqa: F811
    payload, envelope = signed.emit()
    assert signed.verify(envelope).code == 0
    payload.write_text(TAMPERED)
    assert signed.verify(envelope).code == 3  # the orchestrator's verify_fail, on record
    (trace,) = (signed.root / ".eidolons" / ".trace").glob("*.jsonl")
    lines = trace.read_bytes().splitlines(keepends=True)
    trace.write_bytes(b"".join(lines[:-1]))  # the agent drops the verify_fail
    r = signed.cli("trace", "verify", trace)
    assert r.code == 3, r


@pytest.mark.parametrize(
    ("rule", "value"),
    [
        ("is_agent_version", "\u0661.\u0662.\u0663"),  # Arabic-Indic digits
        ("is_envelope_version", "2.1.\uff11"),  # a fullwidth digit
        ("is_schema_version", "\u0967.\u0968"),  # Devanagari
        ("is_rfc3339", "\uff12\uff10\uff12\uff16-12-01T10:46:36Z"),
    ],
)
def test_the_grammar_takes_ascii_digits_only(rule: str, value: str) -> None:
    from eidolons.ecl import grammar

    assert getattr(grammar, rule)(value) is False
