"""The sender checks its own hand-off: emit runs the receiver's own rules
before writing, refuses with the receiver's code and reason line, asks for the flags a
high-trust edge needs, refuses an unsafe --thread and an unresolvable --out; the library
does the same; a four-hop pipeline passes end to end with what emit asks for."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import eidolons
from eidolons.ecl.receiver import Failure
from eidolons.gates.sender import HandoffRefused
from tests.conftest import Run, clean_env, emit_cmd

Cli = Callable[..., Run]
KEYED = clean_env(ECL_HMAC_KEY="k" * 32, EIDOLONS_MEMORY="off")
ISE = '{"assertion_grade": "self-attested"}'


def test_refused_with_the_receivers_code_and_reason_line(cli: Cli, project: Path) -> None:
    payload = project / "s.md"
    payload.write_text("# Scout\n\n## Decision target\nx\n## Scope\ny\n")
    args = emit_cmd(payload, "--input-handle", "mission.md", to="spectra", performative="PROPOSE")
    r = cli(*args, env=KEYED)
    lines = r.err.splitlines()
    assert r.code == 3 and r.out == "" and len(lines) == 2
    assert lines[0].startswith("eidolons emit: REFUSE: MISSING_REQUIRED_SECTION: spectra would")
    assert not (project / "s.envelope.json").exists()  # nothing written, nothing traced
    assert not (project / ".eidolons" / ".trace").exists()
    # --no-check writes it anyway with a warning; the receiver then says the same thing
    r = cli(*args, "--no-check", env=KEYED)
    assert r.code == 0 and "warning: --no-check: spectra will refuse" in r.err
    assert cli("verify-envelope", project / "s.envelope.json", env=KEYED).code == 0
    got = cli("verify-incoming", payload, "--as", "spectra", env=KEYED).err.splitlines()
    assert got == [
        "[spectra-verify-incoming] REFUSE: MISSING_REQUIRED_SECTION from atlas",
        lines[1],
    ]


def test_high_trust_edge_asks_for_its_flags_up_front(cli: Cli, project: Path) -> None:
    payload = project / "c.md"
    payload.write_text("# Change summary\n")
    base = emit_cmd(payload, sender="apivr", performative="PROPOSE", kind="change-summary")
    r = cli(*base, env=KEYED)
    assert r.code == 2 and "apivr -> vigil is high trust: add --hmac" in r.err
    assert "--ise JSON" in r.err
    r = cli(*base, "--hmac", env=KEYED)
    assert r.code == 2 and "--ise JSON" in r.err and "--hmac" not in r.err.split("add ")[1]
    r = cli(*base, "--hmac", "--ise", ISE, "--json", env=KEYED)
    assert r.code == 0, r.err
    assert r.json()["envelope"]["constraints"]["trust_level"] == "high"  # the contract's
    r = cli(*base, "--hmac", "--envelope-version", "2.0", "--force", env=KEYED)
    assert r.code == 0, r.err  # before 2.1 no ise block is required


@pytest.mark.parametrize("thread", ["../x", "a b", ".hidden", "x" * 300, "t/1"])
def test_unsafe_thread_is_refused(cli: Cli, project: Path, thread: str) -> None:
    (project / "p.md").write_text("# p\n")
    r = cli(*emit_cmd("p.md", "--thread", thread))
    assert r.code == 2 and "not a safe thread id" in r.err
    assert not (project / "p.envelope.json").exists()


def test_out_the_receiver_cannot_resolve_is_refused(cli: Cli, project: Path) -> None:
    (project / "a").mkdir()
    (project / "b").mkdir()
    (project / "a" / "r.md").write_text("# the payload\n")
    (project / "b" / "r.md").write_text("# another file with the same name\n")
    r = cli(*emit_cmd("a/r.md", "--out", "b/x.envelope.json"))
    assert r.code == 2 and "would resolve artifact.path" in r.err and "b/r.md" in r.err
    assert not (project / "b" / "x.envelope.json").exists()
    (project / "b" / "r.md").unlink()
    assert cli(*emit_cmd("a/r.md", "--out", "b/x.envelope.json")).code == 0


def test_library_emit_envelope_applies_the_same_defaults_and_checks(project: Path) -> None:
    payload = project / "s.md"
    payload.write_text("# no sections\n")
    kwargs = dict(
        sender=eidolons.AgentRef("atlas", "1.4.2"),
        recipient=eidolons.AgentRef("spectra", "4.11.0"),
        performative="PROPOSE",
        kind="scout-report",
        objective="o",
        root=project,
    )
    with pytest.raises(HandoffRefused) as info:
        eidolons.emit_envelope(payload, **kwargs)  # type: ignore[arg-type]
    assert [f.code for f in info.value.failures][:1] == ["MISSING_REQUIRED_SECTION"]
    assert not (project / "s.envelope.json").exists()
    result = eidolons.emit_envelope(payload, check=False, **kwargs)  # type: ignore[arg-type]
    assert result.envelope["edge_origin"] == "roster"  # the contract's defaults
    assert result.envelope["constraints"] == {"trust_level": "standard"}
    assert {f.code for f in result.refusals} == {"MISSING_REQUIRED_SECTION", "SCHEMA_INVALID"}


def test_four_hop_pipeline_passes_with_what_emit_asks_for(cli: Cli, project: Path) -> None:
    """human -> atlas -> spectra -> apivr -> vigil: every hop emitted as the sender's
    self-check asks, verified by the orchestrator, accepted by its receiver."""
    (project / "mission.md").write_text("# Mission\n")
    hops = [
        ("human", "atlas", "REQUEST", "prompt", "# Map the auth flow\n", []),
        ("atlas", "spectra", "PROPOSE", "scout-report",
         "# Scout\n## Decision target\n## Findings\n## Gaps\n## Scope\n",
         ["--input-handle", "mission.md"]),
        ("spectra", "apivr", "PROPOSE", "spec",
         "# Spec\n## Stories\n## Validation gates\n## Agent hints\n## Given when then\n", []),
        ("apivr", "vigil", "PROPOSE", "change-summary", "# Change summary\n",
         ["--hmac", "--ise", ISE]),
    ]  # fmt: skip
    thread = None
    for sender, to, performative, kind, body, extra in hops:
        payload = project / ".eidolons" / "handoffs" / f"{sender}-{to}.md"
        payload.parent.mkdir(parents=True, exist_ok=True)
        payload.write_text(body)
        more: list[str] = ["--thread", thread] if thread else []
        args = emit_cmd(payload, "--json", *extra, *more, sender=sender, to=to,
                        performative=performative, kind=kind)  # fmt: skip
        r = cli(*args, env=KEYED)
        assert r.code == 0, (sender, to, r.err)
        thread = thread or r.json()["envelope"]["thread_id"]
        envelope = Path(r.json()["envelope_path"])
        assert cli("verify-envelope", envelope, env=KEYED).code == 0
        r = cli("verify-incoming", payload, "--as", to, env=KEYED)
        assert r.code == 0, (sender, to, r.err)
        assert r.err.startswith(f"[{to}-verify-incoming] PASS: {kind} from {sender} ")


def test_a_contract_set_that_fails_to_load_refuses_through_the_one_loader(
    cli: Cli, project: Path
) -> None:
    """emit loads contracts through :func:`eidolons.io.contracts.load_contracts`:
    a broken --contracts DIR is the typed fail-closed set, refused as the receiver would,
    nothing written; the library's older spelling (a ContractError) still refuses."""
    from eidolons.ecl.contract import ContractError, ContractSetUnavailable
    from eidolons.io.contracts import load_contracts

    bad = project / "bad"
    bad.mkdir()
    (bad / "x.yaml").write_text("from: atlas\nto: [vigil\n")
    payload = project / "s.md"
    payload.write_text("# Scout\n")
    r = cli(*emit_cmd(payload, "--contracts", bad), env=KEYED)
    lines = r.err.splitlines()
    assert r.code == 3 and r.out == "", r.err
    assert lines[0].startswith("eidolons emit: REFUSE: UNDECLARED_EDGE: vigil would refuse")
    assert "contract set failed to load: " in lines[1] and "invalid YAML" in lines[1]
    assert not (project / "s.envelope.json").exists()
    unavailable = load_contracts(project, [bad])
    assert isinstance(unavailable, ContractSetUnavailable)
    for contracts in (unavailable, unavailable.error, ContractError("contracts", "gone")):
        first = _refusal(project, payload, contracts)
        assert first.code == "UNDECLARED_EDGE" and "contract set failed to load" in first.message
    assert not (project / "s.envelope.json").exists()


def _refusal(project: Path, payload: Path, contracts: object) -> Failure:
    """The first failure library ``emit`` refuses atlas -> vigil with, given ``contracts``."""
    from eidolons.gates.sender import emit, parse_agent

    with pytest.raises(HandoffRefused) as refused:
        emit(
            payload,
            sender=parse_agent("atlas", "sender"),
            recipient=parse_agent("vigil", "to"),
            performative="PROPOSE",
            kind="scout-report",
            objective="o",
            root=project,
            contracts=contracts,  # type: ignore[arg-type]  # a caller that ignores the types
        )
    first: Failure = refused.value.failures[0]
    return first


@pytest.mark.parametrize(
    "contracts",
    [OSError("disk gone"), {"atlas": "vigil"}, "builtin"],
    ids=["an-exception", "a-dict", "a-string"],
)
def test_emit_takes_contracts_by_the_receivers_one_rule(project: Path, contracts: object) -> None:
    """Anything but a contract set (an exception a loader raised, a stray value) is the
    fail-closed unavailable set, for emit as for the receiver gate
    (:func:`eidolons.ecl.contract.as_contract_set`): refused, nothing written, never a
    traceback."""
    from eidolons.ecl.contract import ContractSetUnavailable
    from eidolons.ecl.contract import as_contract_set as receiver_rule  # the receiver's import
    from eidolons.gates.sender import self_check

    payload = project / "s.md"
    payload.write_text("# Scout\n")
    first = _refusal(project, payload, contracts)
    assert first.code == "UNDECLARED_EDGE" and "contract set failed to load" in first.message
    unavailable = receiver_rule(contracts)
    assert isinstance(unavailable, ContractSetUnavailable)
    assert unavailable.reason in first.message  # the receiver's words
    assert not (project / "s.envelope.json").exists()
    from tests._builders import envelope_for

    failures = self_check(envelope_for(b"# Scout\n"), "vigil", contracts, b"# Scout\n")  # type: ignore[arg-type]
    assert any("contract set failed to load" in f.message for f in failures)
