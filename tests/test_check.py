"""``eidolons check`` and the conformance rule engine (:mod:`eidolons.ecl.rules`).

Three parts: the twelve upstream fixtures through the real CLI (verdicts and key lines of
the fixtures README); every gate's failure path on a crafted envelope, through the pure
engine with an in-memory payload reader (exact reason strings); and the CLI itself
(JSON schema, level filter, usage errors, directory walk, R-1 levels, robustness).
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eidolons.ecl.contract import context_results, edge_results
from eidolons.ecl.envelope import GateResult
from eidolons.ecl.rules.integrity import PayloadFacts, PayloadUnavailable
from eidolons.ecl.rules.run import exit_code, run_gates
from eidolons.gates.checker import check_envelope
from eidolons.io.contracts import Contract, ContractSet
from tests._builders import DROP, edit, envelope_for
from tests._builders import write_pair as write_files
from tests.conftest import FIXTURE_HMAC_KEY, FIXTURES, clean_env, needs_fixtures, run_cli

FIXTURE_CONTRACTS = FIXTURES / "_contracts"
ENVELOPE = "scout-report.envelope.json"

PAYLOAD = (
    b"---\nkind: scout-report\n---\n\n# Scout report\n\n## Decision target\nx\n\n"
    b"## Findings\n- one\n\n## Gaps\n- none\n\n## Scope\nsmall\n"
)
SHA = hashlib.sha256(PAYLOAD).hexdigest()
KEY = b"test-key"
MAC = hmac.new(KEY, PAYLOAD, hashlib.sha256).hexdigest()

BASE: dict[str, Any] = envelope_for(
    PAYLOAD,
    path="scout-report.md",
    message_id="01942d10-0001-7e04-9c5d-2df1b8c3e701",
    sender="atlas@1.5.1",
    to="spectra@4.3.1",
    edge_origin="roster",
    objective="Hand off the scout report.",
    schema_version="2.0",
    token_budget=4000,
    tokens_used=120,
    input_handles=("mission.md",),
    summary="Three race sites found.",
    trust_level="standard",
    ts="2026-07-02T10:00:00Z",
)

CONTRACT_DOC: dict[str, Any] = {
    "contract_version": "1.0",
    "from": "atlas",
    "to": "spectra",
    "edge_origin": "roster",
    "performatives_allowed": ["PROPOSE", "INFORM", "REFUSE"],
    "artifacts": [
        {
            "kind": "scout-report",
            "schema_ref": "../schemas/per-eidolon/scout-report.v1.json",
            "required_sections": ["decision_target", "findings", "gaps", "scope"],
        }
    ],
    "context_delta": {"token_budget_max": 4000},
    "notes": "test",
}


def contract(**changes: Any) -> Contract:
    doc = copy.deepcopy(CONTRACT_DOC)
    doc.update(changes)
    return Contract.from_dict(doc, "test")


CONTRACTS = ContractSet([contract()], ["test"])


def envelope(**changes: Any) -> dict[str, Any]:
    """BASE with changes; a dotted key sets a nested field, ``...=DROP`` removes it."""
    return edit(BASE, **changes)


def memory_reader(
    payload: bytes = PAYLOAD, key: bytes | None = None
) -> Callable[[str, bool, bool], PayloadFacts]:
    def reader(artifact_path: str, want_hmac: bool, keep: bool) -> PayloadFacts:
        mac = hmac.new(key, payload, hashlib.sha256).hexdigest() if want_hmac and key else None
        return PayloadFacts(
            len(payload), hashlib.sha256(payload).hexdigest(), mac, payload if keep else None
        )

    return reader


def gates(
    env: Any,
    *,
    payload: bytes = PAYLOAD,
    key: bytes | None = None,
    strict: bool = False,
    contracts: ContractSet = CONTRACTS,
) -> dict[str, GateResult]:
    data = env if isinstance(env, bytes) else json.dumps(env).encode()
    results = run_gates(data, contracts, memory_reader(payload, key), strict=strict)
    ids = [r.id for r in results]
    assert len(ids) == len(set(ids)), ids
    return {r.id: r for r in results}


def not_ok(results: dict[str, GateResult]) -> dict[str, tuple[str, str, str | None]]:
    return {k: (r.level, r.status, r.reason) for k, r in results.items() if r.status != "ok"}


# --------------------------------------------------------------------------- fixtures (CLI)

FIXTURE_CASES: dict[str, tuple[int, list[str]]] = {
    "conformant-handoff": (
        0,
        [
            "[OK]   I-3 MUST integrity_match <scout-report.envelope.json>",
            "[OK]   C-1 MUST contract_for_edge_exists <scout-report.envelope.json>",
            "[OK]   D-1 MUST tokens_used_within_envelope_budget <scout-report.envelope.json>",
            "[OK]   E-3.compat INFO v1x_accepted_under_v2_receiver",
            "Result: OK (exit 0)",
        ],
    ),
    "missing-integrity": (2, ["[FAIL] I-3 MUST integrity_match"]),
    "undeclared-edge": (
        2,
        [
            "[FAIL] C-1 MUST contract_for_edge_exists <scout-report.envelope.json> "
            "(no contract for atlas -> no-such-eidolon)"
        ],
    ),
    "over-budget-context": (
        2,
        [
            "[FAIL] D-1 MUST tokens_used_within_envelope_budget "
            "<scout-report.envelope.json> (used=5000 budget=200)",
            "[FAIL] D-2 MUST tokens_used_within_contract_budget "
            "<scout-report.envelope.json> (used=5000 contract_max=4000)",
        ],
    ),
    "conformant-ise-v2": (
        0,
        ["[OK]   S-1 MUST ise_block_shape", "[OK]   I-3 MUST integrity_match"],
    ),
    "ise-missing-hierarchy": (2, ["[FAIL] S-1 MUST ise_block_shape"]),
    "v1-on-v2-compat": (0, ["[OK]   E-3.compat INFO v1x_accepted_under_v2_receiver"]),
    "conformant-ise-v2.1": (
        0,
        [
            "[OK]   S-4 MUST ise_verification_shape",
            "[OK]   S-3 MUST ise_required_at_high",
            "[OK]   I-5 MUST hmac_recommended_at_high_trust",
        ],
    ),
    "ise-verification-invalid-v2.1": (
        2,
        [
            "[FAIL] S-4 MUST ise_verification_shape <scout-report.envelope.json> "
            "(transcript_access invalid (got 'full'; must be none|artifact-only);)"
        ],
    ),
    "high-trust-no-ise-v2.1": (
        2,
        ["[FAIL] S-3 MUST ise_required_at_high", "[FAIL] I-5 MUST hmac_recommended_at_high_trust"],
    ),
    "high-trust-sha256-v2": (
        4,
        [
            "Result: WARN",
            "[WARN] I-5 SHOULD hmac_recommended_at_high_trust",
            "[WARN] S-3 SHOULD ise_required_at_high",
        ],
    ),
    "conformant-high-trust-v2.1": (
        4,
        [
            "[WARN] I-3 MUST integrity_match <scout-report.envelope.json> "
            "(ECL_HMAC_KEY unset; HMAC unverifiable per §6.2.3)",
            "[OK]   I-5 MUST hmac_recommended_at_high_trust",
            "[OK]   S-3 MUST ise_required_at_high",
            "[OK]   S-4 MUST ise_verification_shape",
        ],
    ),
}


def check(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> Any:
    return run_cli("check", *args, cwd=cwd, env=env)


@needs_fixtures
@pytest.mark.parametrize("name", sorted(FIXTURE_CASES))
def test_fixture_verdict_and_key_lines(name: str, tmp_path: Path) -> None:
    expected_exit, lines = FIXTURE_CASES[name]
    r = check(FIXTURES / name, "--contracts", FIXTURE_CONTRACTS, cwd=tmp_path)
    assert r.code == expected_exit, r.out + r.err
    out_lines = r.out.splitlines()
    for line in lines:
        assert any(o.startswith(line) for o in out_lines), (line, r.out)
    result_line = {
        0: "Result: OK (exit 0)",
        2: "Result: FAIL — one or more MUSTs failed (exit 2)",
        4: "Result: WARN — passes MUSTs with grandfathered warnings (exit 4)",
    }[expected_exit]
    assert out_lines[-1] == result_line
    assert r.err == ""


@needs_fixtures
def test_undeclared_edge_skips_the_rest_of_the_graph_and_d2(tmp_path: Path) -> None:
    r = check(
        FIXTURES / "undeclared-edge", "--contracts", FIXTURE_CONTRACTS, "--json", cwd=tmp_path
    )
    ids = [x["id"] for x in r.json()["results"]]
    assert "C-1" in ids and not {"C-2", "C-3", "C-4", "D-2"} & set(ids)


@needs_fixtures
def test_hmac_fixture_passes_with_the_key(tmp_path: Path) -> None:
    folder = FIXTURES / "conformant-high-trust-v2.1"
    r = check(
        folder,
        "--contracts",
        FIXTURE_CONTRACTS,
        cwd=tmp_path,
        env=clean_env(ECL_HMAC_KEY=FIXTURE_HMAC_KEY),
    )
    assert r.code == 0, r.out
    assert "[OK]   I-3 MUST integrity_match <scout-report.envelope.json>" in r.out
    wrong = check(
        folder, "--contracts", FIXTURE_CONTRACTS, cwd=tmp_path, env=clean_env(ECL_HMAC_KEY="no")
    )
    assert wrong.code == 2 and "(hmac mismatch)" in wrong.out


@needs_fixtures
def test_all_fixtures_in_one_run_json(tmp_path: Path) -> None:
    r = check(FIXTURES, "--contracts", FIXTURE_CONTRACTS, "--json", cwd=tmp_path)
    doc = r.json()
    assert r.code == 2 and doc["exit_code"] == 2
    assert doc["envelopes"] == 12
    assert doc["target"] == str(FIXTURES)
    by_envelope: dict[str, list[dict[str, Any]]] = {}
    for res in doc["results"]:
        by_envelope.setdefault(Path(res["target"]).parent.name, []).append(res)
    assert sorted(by_envelope) == sorted(FIXTURE_CASES)
    # LC_ALL=C order of the whole path: "conformant-ise-v2.1/..." sorts before "...-v2/..."
    c_order = sorted(FIXTURE_CASES, key=lambda n: os.fsencode(str(FIXTURES / n / ENVELOPE)))
    assert list(by_envelope) == c_order
    assert c_order.index("conformant-ise-v2.1") < c_order.index("conformant-ise-v2")
    for name, results in by_envelope.items():
        assert exit_code(GateResult(**r) for r in results) == FIXTURE_CASES[name][0], name


@needs_fixtures
def test_json_missing_integrity(tmp_path: Path) -> None:
    r = check(
        FIXTURES / "missing-integrity" / ENVELOPE,
        "--contracts",
        FIXTURE_CONTRACTS,
        "--json",
        cwd=tmp_path,
    )
    doc = r.json()
    assert r.code == 2 and doc["exit_code"] == 2
    assert set(doc) >= {
        "target",
        "ecl_version_targeted",
        "envelopes",
        "level_filter",
        "results",
        "exit_code",
    }
    assert doc["envelopes"] == 1 and doc["level_filter"] == "ALL"
    i3 = next(x for x in doc["results"] if x["id"] == "I-3")
    assert i3 == {
        "id": "I-3",
        "level": "MUST",
        "status": "fail",
        "name": "integrity_match",
        "target": str(FIXTURES / "missing-integrity" / ENVELOPE),
        "reason": "expected="
        + "deadbeef" * 8
        + " got="
        + hashlib.sha256(
            (FIXTURES / "missing-integrity" / "scout-report.md").read_bytes()
        ).hexdigest(),
    }
    assert all("reason" not in x for x in doc["results"] if x["id"] == "E-1")
    assert doc["counts"]["fail"] >= 1


# --------------------------------------------------------------------------- engine: gates

CONFORMANT_IDS = [
    "E-1", "E-2", "E-3", "E-4", "E-5", "E-6", "E-7", "E-8",
    "I-1", "I-2", "I-3", "I-4", "I-5",
    "C-1", "C-2", "C-3", "C-4",
    "D-0", "D-1", "D-2", "D-3",
    "S-3", "R-1",
]  # fmt: skip


def test_conformant_envelope_runs_every_gate_in_upstream_order() -> None:
    results = run_gates(json.dumps(BASE).encode(), CONTRACTS, memory_reader())
    assert [r.id for r in results] == CONFORMANT_IDS
    assert all(results) and exit_code(results) == 0
    assert results[-1].level == "INFO"
    levels = {r.id: r.level for r in results}
    assert levels["I-5"] == "MUST" and levels["S-3"] == "MUST"  # 2.1 envelope


def test_target_is_stamped_on_every_result() -> None:
    results = run_gates(json.dumps(BASE).encode(), CONTRACTS, memory_reader(), target="/x/a")
    assert {r.target for r in results} == {"/x/a"}


def test_e1_strict_json_and_the_libraries_that_still_run() -> None:
    bad = json.dumps(BASE).replace('"performative"', '"performative": "INFORM", "performative"')
    results = gates(bad.encode())
    assert not_ok(results) == {
        "E-1": ("MUST", "fail", "duplicate JSON key 'performative'"),
        "I-1": ("MUST", "fail", "got: <empty>"),
        "C-1": ("MUST", "fail", "no contract for  -> "),
        "D-0": ("SHOULD", "warn", "envelope omits context_delta"),
    }
    assert list(results) == ["E-1", "I-1", "I-5", "C-1", "D-0", "S-3"]
    assert results["S-3"].level == "SHOULD"
    assert gates(b"{not json")["E-1"].reason == (
        "not valid JSON: Expecting property name enclosed in double quotes (line 1 column 2)"
    )
    assert gates(b'{"a": NaN}')["E-1"].status == "fail"


def test_e1_non_object_top_level_is_json_but_has_no_fields() -> None:
    results = gates(b"[1, 2]")
    assert results["E-1"].status == "ok"
    assert results["E-2"].reason == (
        "missing: envelope_version message_id thread_id parent_id from to performative "
        "objective artifact integrity trace"
    )


def test_e2_missing_and_null_fields() -> None:
    results = gates(envelope(objective=DROP, trace=None, parent_id=None))
    assert results["E-2"].reason == "missing: objective trace"
    assert gates(envelope(parent_id=DROP))["E-2"].reason == "missing: parent_id"


@pytest.mark.parametrize(
    ("version", "reason"),
    [
        ("2.2", "got: 2.2 (expected 1.0|1.1|1.2|2.0|2.1 variant)"),
        ("2.1.x", "got: 2.1.x (expected 1.0|1.1|1.2|2.0|2.1 variant)"),
        ("1.0.", "got: 1.0. (expected 1.0|1.1|1.2|2.0|2.1 variant)"),
        (2.1, "got: 2.1 (expected 1.0|1.1|1.2|2.0|2.1 variant)"),
        (DROP, "got:  (expected 1.0|1.1|1.2|2.0|2.1 variant)"),
    ],
)
def test_e3_unsupported_versions(version: Any, reason: str) -> None:
    results = gates(envelope(envelope_version=version))
    assert (results["E-3"].status, results["E-3"].reason) == ("fail", reason)
    assert "E-3.compat" not in results


@pytest.mark.parametrize("version", ["1.0", "1.1.3", "1.2"])
def test_e3_compat_info_for_v1(version: str) -> None:
    results = gates(envelope(envelope_version=version))
    compat = results["E-3.compat"]
    assert (compat.level, compat.status, compat.name) == (
        "INFO",
        "ok",
        "v1x_accepted_under_v2_receiver",
    )
    assert compat.reason == (
        "v1.x envelope accepted under v2.0 receiver, §7.3 window valid through 2027-05-13"
    )
    assert list(results).index("E-3.compat") == list(results).index("E-3") + 1
    assert results["S-3"].level == "SHOULD" and results["I-5"].level == "SHOULD"


def test_e4_e5_e8() -> None:
    assert gates(envelope(performative="SHOUT"))["E-4"].reason == "got: SHOUT"
    assert gates(envelope(from__eidolon="Atlas"))["E-5"].reason == "from=Atlas to=spectra"
    assert gates(envelope(to__eidolon="spectra\nx"))["E-5"].status == "fail"  # whole string
    assert gates(envelope(trace__tier="deep"))["E-8"].reason == "got: deep"
    assert gates(envelope(trace__tier=DROP))["E-8"].reason == "got: "


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/etc/passwd", "absolute path: /etc/passwd"),
        ("a/../scout-report.md", "contains '..': a/../scout-report.md"),
        ("a..b.md", "contains '..': a..b.md"),
        ("", "missing artifact.path"),
    ],
)
def test_e6_artifact_path(path: str, reason: str) -> None:
    result = gates(envelope(artifact__path=path))["E-6"]
    assert (result.level, result.status, result.reason) == ("MUST", "fail", reason)


def test_e7_missing_edge_origin_warns() -> None:
    results = gates(envelope(edge_origin=DROP))
    assert not_ok(results) == {"E-7": ("SHOULD", "warn", "missing edge_origin")}
    assert exit_code(results.values()) == 4


def test_i1_not_hex64_stops_the_payload_gates() -> None:
    results = gates(envelope(integrity__value=SHA.upper()))
    assert results["I-1"].reason == f"got: {SHA.upper()}"
    assert not {"I-2", "I-3", "I-4"} & set(results) and "I-5" in results
    assert gates(envelope(integrity__value=DROP))["I-1"].reason == "got: <empty>"


def test_i2_reader_failures() -> None:
    def unresolved(path: str, want_hmac: bool, keep: bool) -> PayloadFacts:
        raise PayloadUnavailable("", unresolved=True)

    def refused(path: str, want_hmac: bool, keep: bool) -> PayloadFacts:
        raise PayloadUnavailable("not a regular file", unresolved=False, path="/p/x.md")

    data = json.dumps(BASE).encode()
    r = {x.id: x for x in run_gates(data, CONTRACTS, unresolved)}
    assert r["I-2"].reason == "artifact.path=scout-report.md unresolved"
    assert not {"I-3", "I-4", "R-1"} & set(r) and r["I-5"].status == "ok"
    r = {x.id: x for x in run_gates(data, CONTRACTS, refused)}
    assert r["I-2"].reason == "/p/x.md not readable (not a regular file)"


def test_i2_never_resolves_an_unsafe_path() -> None:
    calls: list[str] = []

    def reader(path: str, want_hmac: bool, keep: bool) -> PayloadFacts:
        calls.append(path)
        return memory_reader()(path, want_hmac, keep)

    env = envelope(artifact__path="../outside.md")
    results = {r.id: r for r in run_gates(json.dumps(env).encode(), CONTRACTS, reader)}
    assert results["I-2"].reason == (
        "artifact.path=../outside.md unresolved (not a safe relative path)"
    )
    assert calls == []


def test_i3_paths() -> None:
    bad = "0" * 64
    assert gates(envelope(integrity__value=bad))["I-3"].reason == f"expected={bad} got={SHA}"
    hm = envelope(integrity__method="hmac-sha256", integrity__value=MAC)
    nokey = gates(hm)["I-3"]
    assert (nokey.level, nokey.status, nokey.reason) == (
        "MUST",
        "warn",
        "ECL_HMAC_KEY unset; HMAC unverifiable per §6.2.3",
    )
    assert gates(hm, key=KEY)["I-3"].status == "ok"
    assert gates(hm, key=b"other")["I-3"].reason == "hmac mismatch"
    md5 = gates(envelope(integrity__method="md5"))["I-3"]
    assert (md5.name, md5.status, md5.reason) == (
        "integrity_method_supported",
        "fail",
        "method=md5 (expected sha256|hmac-sha256)",
    )


def test_i4_size_mismatch_warns() -> None:
    results = gates(envelope(artifact__size_bytes=1))
    assert not_ok(results) == {"I-4": ("SHOULD", "warn", f"declared=1 actual={len(PAYLOAD)}")}
    assert gates(envelope(artifact__size_bytes=str(len(PAYLOAD))))["I-4"].status == "warn"
    assert gates(envelope(artifact__size_bytes=float(len(PAYLOAD))))["I-4"].status == "ok"


def test_i5_high_trust_sha256_by_version() -> None:
    high = {"constraints__trust_level": "high", "ise": {"assertion_grade": "validated"}}
    v21 = gates(envelope(**high))["I-5"]
    assert (v21.level, v21.status, v21.reason) == (
        "MUST",
        "fail",
        "trust_level=high requires integrity.method=hmac-sha256 at ECL v2.1 (spec §6.2.6); "
        "got sha256",
    )
    v20 = gates(envelope(envelope_version="2.0", **high))["I-5"]
    assert (v20.level, v20.status, v20.reason) == (
        "SHOULD",
        "warn",
        "trust_level=high + integrity.method=sha256 — RECOMMENDED hmac-sha256 (ECL v1.1 §6.4)",
    )
    hm = envelope(integrity__method="hmac-sha256", integrity__value=MAC, **high)
    assert gates(hm, key=KEY)["I-5"] == GateResult(
        "I-5", "MUST", "ok", "hmac_recommended_at_high_trust"
    )


def test_c1_no_contract_stops_the_graph() -> None:
    results = gates(envelope(to__eidolon="nobody"))
    assert not_ok(results) == {"C-1": ("MUST", "fail", "no contract for atlas -> nobody")}
    assert not {"C-2", "C-3", "C-4", "D-2", "R-1"} & set(results)
    assert "D-1" in results


def test_c2_c3_c4() -> None:
    assert gates(envelope(performative="DECIDE"))["C-2"].reason == (
        "performative=DECIDE not in contract"
    )
    c3 = gates(envelope(artifact__kind="spec"))
    assert c3["C-3"].reason == "kind=spec not in contract" and "R-1" not in c3
    c4 = gates(envelope(edge_origin="composition"))["C-4"]
    assert (c4.level, c4.status, c4.reason) == (
        "SHOULD",
        "warn",
        "envelope=composition contract=roster",
    )


def test_edge_and_context_results_are_usable_alone() -> None:
    assert [r.id for r in edge_results(BASE, contract())] == ["C-1", "C-2", "C-3", "C-4"]
    assert [r.id for r in edge_results(BASE, None)] == ["C-1"]
    assert [r.id for r in context_results(BASE, contract())] == ["D-0", "D-1", "D-2", "D-3"]
    no_max = contract(context_delta={})
    assert [r.id for r in context_results(BASE, no_max)] == ["D-0", "D-1", "D-3"]
    assert [r.id for r in context_results(BASE, None)] == ["D-0", "D-1", "D-3"]


def test_d0_missing_or_null_context_delta() -> None:
    for value in (DROP, None):
        results = gates(envelope(context_delta=value))
        assert not_ok(results) == {"D-0": ("SHOULD", "warn", "envelope omits context_delta")}
        assert not {"D-1", "D-2", "D-3"} & set(results)


def test_d1_d2_budgets() -> None:
    over = gates(envelope(context_delta__tokens_used=5000, context_delta__token_budget=200))
    assert over["D-1"].reason == "used=5000 budget=200"
    assert over["D-2"].reason == "used=5000 contract_max=4000"
    contract_only = gates(
        envelope(context_delta__tokens_used=4500, context_delta__token_budget=5000)
    )
    assert not_ok(contract_only) == {"D-2": ("MUST", "fail", "used=4500 contract_max=4000")}
    missing = gates(envelope(context_delta={"summary": "s"}))
    assert missing["D-1"].status == "ok" and missing["D-2"].status == "ok"  # default 0


def test_d1_non_integers_fail() -> None:
    text = gates(envelope(context_delta__tokens_used="12"))
    assert text["D-1"].reason == "used=12 budget=4000 (tokens_used must be a non-negative integer)"
    assert text["D-2"].reason == (
        "used=12 contract_max=4000 (tokens_used must be a non-negative integer)"
    )
    frac = gates(envelope(context_delta__token_budget=1.5))
    assert frac["D-1"].reason == (
        "used=120 budget=1.5 (token_budget must be a non-negative integer)"
    )
    assert gates(envelope(context_delta__tokens_used=-1))["D-1"].status == "fail"
    assert gates(envelope(context_delta__token_budget=4000.0))["D-1"].status == "ok"
    weird = gates(envelope(context_delta="lots"))
    assert weird["D-1"].reason == "used= budget= (context_delta must be an object)"


def test_d3_long_summary_warns() -> None:
    results = gates(envelope(context_delta__summary="é" * 400))  # 800 UTF-8 bytes
    assert results["D-3"].status == "ok"  # (800 + 1) // 4 == 200: not above 200
    long = gates(envelope(context_delta__summary="x" * 900))["D-3"]
    assert (long.level, long.status, long.reason) == ("SHOULD", "warn", "heuristic≈225")


def test_s1_grade() -> None:
    missing = gates(envelope(ise={"provenance": {"methodology_version": "atlas-1.5.1"}}))
    assert missing["S-1"].reason == (
        "ise.assertion_grade is required when ise block is present (spec §6.5.2)"
    )
    bogus = gates(envelope(ise={"assertion_grade": "bogus"}))
    assert bogus["S-1"].reason == (
        "ise.assertion_grade invalid: got 'bogus'; "
        "must be unverified|self-attested|validated|human-reviewed"
    )
    for absent in (None, False):
        assert "S-1" not in gates(envelope(ise=absent))


def test_s2_authorization_values() -> None:
    def s2(authz: Any) -> GateResult:
        return gates(
            envelope(ise={"assertion_grade": "validated", "receiver_authorization": authz})
        )["S-2"]

    assert s2({"auto_merge": "yes"}).reason == (
        "ise.receiver_authorization invalid field values: auto_merge=yes (must be boolean)"
    )
    assert s2({"auto_route": "true", "auto_deploy": 1}).reason == (
        'ise.receiver_authorization invalid field values: auto_route="true" (must be boolean) '
        "auto_deploy=1 (must be boolean)"
    )
    assert s2({"auto_route": True, "auto_merge": None}).status == "ok"
    assert s2("x").reason == "ise.receiver_authorization must be an object (got string)"
    assert s2(None).status == "ok"


def test_s4_shape_only_for_v21() -> None:
    def s4(verification: Any, version: str = "2.1") -> GateResult | None:
        ise = {"assertion_grade": "validated", "verification": verification}
        return gates(envelope(envelope_version=version, ise=ise)).get("S-4")

    full = {"fresh_context": True, "checker": "vigil", "transcript_access": "full"}
    assert s4(full).reason == (  # type: ignore[union-attr]
        "transcript_access invalid (got 'full'; must be none|artifact-only);"
    )
    many = {"fresh_context": "yes", "checker": "Vigil"}
    assert s4(many).reason == (  # type: ignore[union-attr]
        "fresh_context must be boolean (got type string); checker invalid slug (got 'Vigil'); "
        "transcript_access missing;"
    )
    empty = "fresh_context missing; checker missing; transcript_access missing;"
    assert s4({}).reason == empty  # type: ignore[union-attr]  # {} is truthy for jq
    assert s4({"checker": ""}).reason == empty  # type: ignore[union-attr]
    assert s4(full, version="2.0") is None
    assert s4(None) is None


def test_s3_levels_by_version() -> None:
    high = {"constraints__trust_level": "high", "integrity__method": "hmac-sha256"}
    high["integrity__value"] = MAC
    v21 = gates(envelope(**high), key=KEY)
    assert not_ok(v21) == {
        "S-3": (
            "MUST",
            "fail",
            "trust_level=high requires an ise.* block at ECL v2.1 (spec §6.5.5); ise absent",
        )
    }
    v20 = gates(envelope(envelope_version="2.0", **high), key=KEY)
    assert not_ok(v20) == {
        "S-3": (
            "SHOULD",
            "warn",
            "trust_level=high without ise.* block; see spec §6.5.5. "
            "[PROMOTION-CANDIDATE: MUST at v2.1]",
        )
    }
    v1 = gates(envelope(envelope_version="1.2", **high), key=KEY)["S-3"]
    assert (v1.level, v1.status) == ("SHOULD", "ok")
    null_ise = gates(envelope(ise=None, **high), key=KEY)["S-3"]
    assert null_ise.status == "fail"


def test_ise_gate_order() -> None:
    ise = {
        "assertion_grade": "validated",
        "verification": {"fresh_context": True, "checker": "vigil", "transcript_access": "none"},
    }
    ids = [
        r.id for r in run_gates(json.dumps(envelope(ise=ise)).encode(), CONTRACTS, memory_reader())
    ]
    assert ids[ids.index("S-1") :] == ["S-1", "S-2", "S-4", "S-3", "R-1"]


def test_r1_info_by_default_must_when_strict() -> None:
    payload = PAYLOAD.replace(b"## Gaps", b"## Not gaps")
    env = envelope(
        artifact__sha256=hashlib.sha256(payload).hexdigest(),
        artifact__size_bytes=len(payload),
        integrity__value=hashlib.sha256(payload).hexdigest(),
    )
    info = gates(env, payload=payload)
    assert not_ok(info) == {"R-1": ("INFO", "fail", "missing sections: gaps")}
    assert exit_code(info.values()) == 0
    strict = gates(env, payload=payload, strict=True)
    assert strict["R-1"].level == "MUST" and exit_code(strict.values()) == 2
    not_markdown = gates(envelope(artifact__path="scout-report.txt"), payload=payload)
    assert "R-1" not in not_markdown


def test_exit_code_rule() -> None:
    def r(level: str, status: str) -> GateResult:
        return GateResult("X", level, status, "x")

    assert exit_code([]) == 0
    assert exit_code([r("INFO", "fail"), r("MUST", "ok")]) == 0
    assert exit_code([r("INFO", "warn")]) == 4
    assert exit_code([r("SHOULD", "fail"), r("MUST", "warn")]) == 3
    assert exit_code([r("SHOULD", "fail"), r("MUST", "fail")]) == 2
    assert not r("MUST", "warn") and r("INFO", "ok")


# --------------------------------------------------------------------------- engine: files


def write_pair(folder: Path, name: str = "scout-report", **changes: Any) -> Path:
    changes.setdefault("artifact__path", f"{name}.md")
    return write_files(folder, name, PAYLOAD, envelope(**changes))


def by_id(results: list[GateResult]) -> dict[str, GateResult]:
    return {r.id: r for r in results}


def test_check_envelope_on_files(tmp_path: Path) -> None:
    path = write_pair(tmp_path / "proj" / "h")
    results = check_envelope(path, CONTRACTS, root=tmp_path / "proj", key=None)
    assert all(results) and [r.id for r in results] == CONFORMANT_IDS
    assert {r.target for r in results} == {str(path)}


def test_check_envelope_payload_missing_or_outside(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    missing = write_pair(root / "h", artifact__path="gone.md")
    r = by_id(check_envelope(missing, CONTRACTS, root=root, key=None))
    assert r["I-2"].reason == "artifact.path=gone.md unresolved"
    (tmp_path / "secret.md").write_bytes(PAYLOAD)
    link = root / "h" / "link.md"
    link.symlink_to(tmp_path / "secret.md")
    outside = write_pair(root / "h", "other", artifact__path="link.md")
    r = by_id(check_envelope(outside, CONTRACTS, root=root, key=None))
    reason = r["I-2"].reason
    assert reason is not None
    assert reason.startswith("artifact.path=link.md unresolved (payload ")
    assert "resolves outside" in reason
    (root / "h" / "dir.md").mkdir()
    directory = write_pair(root / "h", "third", artifact__path="dir.md")
    r = by_id(check_envelope(directory, CONTRACTS, root=root, key=None))
    where = root / "h" / "dir.md"
    assert r["I-2"].reason == f"{where} not readable ({where} is not a regular file)"


def test_check_envelope_unreadable_file_is_e1(tmp_path: Path) -> None:
    folder = tmp_path / "x.envelope.json"
    folder.mkdir()
    r = check_envelope(folder, CONTRACTS, root=tmp_path, key=None)
    assert r[0].id == "E-1" and r[0].status == "fail" and r[0].reason is not None
    assert "not a regular file" in r[0].reason
    assert exit_code(r) == 2


# --------------------------------------------------------------------------- CLI


def test_cli_text_layout(tmp_path: Path) -> None:
    path = write_pair(tmp_path / "h")
    r = check(path, "--contracts", contract_dir(tmp_path), cwd=tmp_path)
    lines = r.out.splitlines()
    assert r.code == 0, r.out + r.err
    assert lines[:7] == [
        "ECL conformance check",
        f"Target:        {path}",
        "Target ECL:    2.1",
        "Envelopes:     1",
        f"Contracts:     builtin, {contract_dir(tmp_path)}",
        "Level filter:  ALL",
        "----",
    ]
    assert lines[7] == "[OK]   E-1 MUST envelope_is_json <scout-report.envelope.json>"
    assert lines[-2:] == ["----", "Result: OK (exit 0)"]
    assert len(lines) == 7 + len(CONFORMANT_IDS) + 2


def contract_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "contracts"
    if not folder.exists():
        folder.mkdir()
        import yaml

        (folder / "atlas-to-spectra.yaml").write_text(yaml.safe_dump(CONTRACT_DOC))
    return folder


def test_cli_level_filter(tmp_path: Path) -> None:
    path = write_pair(tmp_path / "h", envelope_version="1.2", edge_origin=DROP)
    args = (path, "--contracts", contract_dir(tmp_path))
    full = check(*args, cwd=tmp_path)
    must = check(*args, "--level", "MUST", cwd=tmp_path)
    should = check(*args, "--level=SHOULD", cwd=tmp_path)
    assert full.code == must.code == should.code == 4
    assert "[OK]   E-2 MUST required_fields_present" in must.out
    assert "[WARN] E-7 SHOULD edge_origin_populated" in must.out  # warnings always shown
    assert "[OK]   I-4 SHOULD" in full.out and "[OK]   I-4 SHOULD" not in must.out
    assert "E-3.compat INFO" in full.out and "E-3.compat INFO" not in must.out
    assert "[OK]   I-4 SHOULD" in should.out and "E-3.compat INFO" not in should.out
    assert "Level filter:  MUST" in must.out
    as_json = check(*args, "--level", "MUST", "--json", cwd=tmp_path).json()
    assert as_json["level_filter"] == "MUST"
    assert len(as_json["results"]) == len(check(*args, "--json", cwd=tmp_path).json()["results"])


def test_cli_r1_info_then_must_with_strict(tmp_path: Path) -> None:
    folder = tmp_path / "h"
    folder.mkdir()
    payload = PAYLOAD.replace(b"## Scope", b"## Range")
    (folder / "scout-report.md").write_bytes(payload)
    digest = hashlib.sha256(payload).hexdigest()
    env = envelope(artifact__sha256=digest, integrity__value=digest)
    env["artifact"]["size_bytes"] = len(payload)
    (folder / ENVELOPE).write_text(json.dumps(env))
    args = (folder, "--contracts", contract_dir(tmp_path))
    r = check(*args, cwd=tmp_path)
    assert r.code == 0
    assert (
        "[FAIL] R-1 INFO required_sections_present <scout-report.envelope.json> "
        "(missing sections: scope)" in r.out
    )
    strict = check(*args, "--strict", cwd=tmp_path)
    assert strict.code == 2 and "[FAIL] R-1 MUST required_sections_present" in strict.out
    assert check(*args, "--strict", "--json", cwd=tmp_path).json()["strict"] is True


def test_cli_directory_walk_order_and_filters(tmp_path: Path) -> None:
    top = tmp_path / "walk"
    for sub in ("a", "a-c", "b/deep", "B"):
        write_pair(top / sub)
    (top / "notes.json").write_text("{}")
    (top / "a" / "x.envelope.json.bak").write_text("{}")
    (top / "linked").symlink_to(top / "a", target_is_directory=True)
    (top / "alias.envelope.json").symlink_to(top / "a" / ENVELOPE)
    r = check(top, "--contracts", contract_dir(tmp_path), "--json", cwd=tmp_path)
    doc = r.json()
    assert r.code == 0 and doc["envelopes"] == 4
    order = list(dict.fromkeys(x["target"] for x in doc["results"]))
    expected = [str(top / s / ENVELOPE) for s in ("B", "a", "a-c", "b/deep")]
    assert order == sorted(expected, key=os.fsencode)
    assert order == [str(top / s / ENVELOPE) for s in ("B", "a-c", "a", "b/deep")]


def test_cli_several_paths_and_duplicates(tmp_path: Path) -> None:
    one = write_pair(tmp_path / "one")
    two = write_pair(tmp_path / "two")
    r = check(
        two, one, tmp_path / "two", "--contracts", contract_dir(tmp_path), "--json", cwd=tmp_path
    )
    doc = r.json()
    assert doc["envelopes"] == 2 and doc["target"] == str(two)
    assert doc["targets"] == [str(two), str(one), str(tmp_path / "two")]
    order = list(dict.fromkeys(x["target"] for x in doc["results"]))
    assert order == [str(two), str(one)]


def test_cli_malformed_envelope_among_good_ones(tmp_path: Path) -> None:
    top = tmp_path / "mixed"
    write_pair(top / "a")
    write_pair(top / "c")
    (top / "b").mkdir()
    (top / "b" / "broken.envelope.json").write_text('{"envelope_version": "2.1",')
    r = check(top, "--contracts", contract_dir(tmp_path), "--json", cwd=tmp_path)
    doc = r.json()
    assert r.code == 2 and doc["envelopes"] == 3
    per: dict[str, list[str]] = {}
    for x in doc["results"]:
        per.setdefault(Path(x["target"]).parent.name, []).append(x["id"])
    assert per["a"] == per["c"] == CONFORMANT_IDS
    broken = [x for x in doc["results"] if x["target"].endswith("broken.envelope.json")]
    assert broken[0]["id"] == "E-1" and broken[0]["status"] == "fail"
    assert broken[0]["reason"].startswith("not valid JSON: ")


def test_cli_escapes_control_characters(tmp_path: Path) -> None:
    path = write_pair(tmp_path / "h", performative="X\n[OK]   forged")
    r = check(path, "--contracts", contract_dir(tmp_path), cwd=tmp_path)
    assert r.code == 2
    assert "(got: X\\n[OK]   forged)" in r.out
    assert not any(line.startswith("[OK]   forged") for line in r.out.splitlines())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "eidolons: no PATH given"),
        (("missing-dir",), "eidolons: Path not found: missing-dir"),
        (("plain.json",), "eidolons: Not an envelope file: "),
        (("empty",), "eidolons: No *.envelope.json files found under "),
        (("h", "--level", "LOUD"), "eidolons: --level must be MUST, SHOULD or ALL, got 'LOUD'"),
        (("h", "--target-version", "9.9"), "eidolons: Unsupported --target-version: 9.9"),
        (("h", "--contracts", "nowhere"), "eidolons: nowhere: contracts directory does not exist"),
        (("h", "--contracts", "badc"), "eidolons: "),
        (("h", "--bogus"), "eidolons: unrecognized arguments: --bogus"),
        (("h", "--level"), "eidolons: argument --level: expected one argument"),
        (("h", "--root", "nowhere"), "eidolons: --root 'nowhere' is not a directory"),
    ],
)
def test_cli_usage_errors_exit_1(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    write_pair(tmp_path / "h")
    (tmp_path / "plain.json").write_text("{}")
    (tmp_path / "empty").mkdir()
    (tmp_path / "badc").mkdir()
    (tmp_path / "badc" / "atlas-to-spectra.yaml").write_text("from: atlas\n")
    r = check(*args, cwd=tmp_path)
    assert r.code == 1, (r.code, r.out, r.err)
    assert r.err.startswith(message), r.err
    assert r.out == ""


def test_cli_version_prints_the_version_and_exits_0(tmp_path: Path) -> None:
    from eidolons import __version__

    r = check("--version", cwd=tmp_path)
    assert (r.code, r.out, r.err) == (0, f"eidolons {__version__}\n", "")


def test_cli_usage_line_starts_with_a_capital_as_upstream(tmp_path: Path) -> None:
    r = check("--help", cwd=tmp_path)
    assert r.code == 0 and r.out.startswith("Usage: eidolons check ") and "usage:" not in r.out
    assert "--contracts DIR" in r.out
    for args in ((), ("--bogus",)):
        r = check(*args, cwd=tmp_path)
        assert r.code == 1 and r.out == ""
        first, *usage = r.err.splitlines()
        assert first.startswith("eidolons: ") and usage[0].startswith("Usage: eidolons check ")


def test_cli_target_version(tmp_path: Path) -> None:
    write_pair(tmp_path / "h")
    args = ("h", "--json")
    assert check(*args, cwd=tmp_path).json()["ecl_version_targeted"] == "2.1"
    (tmp_path / "h" / "ECL_VERSION").write_text("2.0\n")
    assert check(*args, cwd=tmp_path).json()["ecl_version_targeted"] == "2.0"
    r = check(*args, "--target-version", "1.2", cwd=tmp_path)
    assert r.json()["ecl_version_targeted"] == "1.2"


def test_cli_builtin_contracts_and_project_contracts_only_narrow(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    path = write_pair(project / "h", performative="DECIDE")
    r = check(path, "--root", project, "--json", cwd=tmp_path)
    c2 = next(x for x in r.json()["results"] if x["id"] == "C-2")
    assert c2["reason"] == "performative=DECIDE not in contract"  # the builtin contract
    override = project / ".eidolons" / "contracts"
    override.mkdir(parents=True)
    import yaml

    doc = copy.deepcopy(CONTRACT_DOC)
    doc["performatives_allowed"] = ["DECIDE"]
    (override / "atlas-to-spectra.yaml").write_text(yaml.safe_dump(doc))
    r = check(path, "--root", project, "--json", cwd=tmp_path)
    # a project file can narrow an edge, never widen it: DECIDE stays refused
    assert r.code == 2 and r.json()["contracts"] == ["builtin", str(override)]
    c2 = next(x for x in r.json()["results"] if x["id"] == "C-2")
    assert c2["status"] == "fail" and c2["reason"] == "performative=DECIDE not in contract"


def test_cli_help_exits_0(tmp_path: Path) -> None:
    r = check("--help", cwd=tmp_path)
    assert r.code == 0 and "--contracts DIR" in r.out and "--strict" in r.out
