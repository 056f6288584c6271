"""The JSON Schemas shipped in ``data/schemas``: well-formed, and saying what the digest says."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from contract_helpers import SCHEMA_DIR, SHARED_ECL
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

SCHEMAS = {p.name: json.loads(p.read_text(encoding="utf-8")) for p in SCHEMA_DIR.glob("*.json")}
REGISTRY: Registry[Any] = Registry().with_resources(
    (doc["$id"], Resource.from_contents(doc)) for doc in SCHEMAS.values()
)


def validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(SCHEMAS[name], registry=REGISTRY)


def errors(name: str, instance: Any) -> list[str]:
    return [e.message for e in validator(name).iter_errors(instance)]


def test_the_expected_schemas_are_shipped() -> None:
    assert sorted(SCHEMAS) == [
        "context-delta.v1.json",
        "envelope.v1.json",
        "envelope.v2.1.json",
        "envelope.v2.json",
        "handoff-contract.v1.json",
        "handoff-event.v1.json",
        "performative.v1.json",
    ]


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_schema_is_valid_2020_12_with_its_id(name: str) -> None:
    schema = SCHEMAS[name]
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == f"https://eidolons.dev/schemas/{name}"
    Draft202012Validator.check_schema(schema)


def test_performative_set_is_the_closed_ten() -> None:
    ten = ["REQUEST", "INFORM", "PROPOSE", "CRITIQUE", "DECIDE", "DELEGATE", "ACKNOWLEDGE",
           "ESCALATE", "RESUME", "REFUSE"]  # fmt: skip
    assert SCHEMAS["performative.v1.json"]["$defs"]["performative"]["enum"] == ten
    for p in ten:
        assert errors("performative.v1.json", p) == []
    assert errors("performative.v1.json", "QUERY")


# --------------------------------------------------------------------------- envelopes

# written by hand, not by tests/_builders.py: these tests judge the shipped JSON Schemas
# independently of the library, whose builder and envelope model apply the same rules in
# code (a base document made by that code could hide a mistake both share); an ECL 1.0
# envelope without context_delta, with placeholder digests
ENVELOPE: dict[str, Any] = {
    "envelope_version": "1.0",
    "message_id": "01942d10-0001-7e04-9c5d-2df1b8c3e701",
    "thread_id": "01942d10-0001-7e04-9c5d-2df1b8c3e701",
    "parent_id": None,
    "from": {"eidolon": "atlas", "version": "1.5.1"},
    "to": {"eidolon": "vigil", "version": "n/a"},
    "performative": "PROPOSE",
    "edge_origin": "roster",
    "objective": "Hand off a scout report.",
    "artifact": {
        "kind": "scout-report",
        "schema_version": "1.0",
        "path": "scout-report.md",
        "sha256": "0" * 64,
        "size_bytes": 1,
    },
    "integrity": {"method": "sha256", "value": "0" * 64},
    "trace": {"ts": "2026-07-02T10:00:00Z", "host": "raw", "model": "m", "tier": "standard"},
}
ISE: dict[str, Any] = {
    "assertion_grade": "validated",
    "provenance": {
        "methodology_version": "atlas-1.5.1",
        "lateral_consults": [{"eidolon": "forge", "performative": "QUERY"}],
    },
    "receiver_authorization": {"auto_route": True, "auto_merge": False, "auto_deploy": False},
}
VERIFICATION = {"fresh_context": True, "checker": "vigil", "transcript_access": "none"}
V1, V2, V21 = "envelope.v1.json", "envelope.v2.json", "envelope.v2.1.json"


def envelope(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(ENVELOPE)
    data.update(changes)
    return data


@pytest.mark.parametrize(
    ("version", "accepted_by"),
    [
        ("1.0", {V1, V2, V21}),
        ("1.0.7", {V1, V2, V21}),
        ("1.1", {V2, V21}),
        ("1.2", {V2, V21}),
        ("2.0", {V2, V21}),
        ("2.0.1", {V2, V21}),
        ("2.1", {V21}),
        ("2.1.3", {V21}),
        ("2.2", set()),
        ("1.3", set()),
        ("2", set()),
        ("1.0.x", set()),
    ],
)
def test_envelope_version_patterns(version: str, accepted_by: set[str]) -> None:
    for name in (V1, V2, V21):
        assert (not errors(name, envelope(envelope_version=version))) == (name in accepted_by), name


def test_ise_is_v2_only_and_verification_v21_only() -> None:
    with_ise = envelope(envelope_version="2.0", ise=ISE)
    assert errors(V1, envelope(ise=ISE))
    assert errors(V2, with_ise) == []
    assert errors(V21, with_ise) == []
    with_verification = envelope(envelope_version="2.1", ise={**ISE, "verification": VERIFICATION})
    assert errors(V21, with_verification) == []
    assert errors(V2, envelope(envelope_version="2.0", ise={**ISE, "verification": VERIFICATION}))
    bad = {**ISE, "verification": {**VERIFICATION, "transcript_access": "full"}}
    assert errors(V21, envelope(envelope_version="2.1", ise=bad))
    assert errors(V21, envelope(envelope_version="2.1", ise={"provenance": ISE["provenance"]}))


def test_lateral_consult_performative_is_a_plain_string() -> None:
    for performative in ("QUERY", "INFORM", "whatever"):
        consults = [{"eidolon": "forge", "performative": performative}]
        ise = {
            **ISE,
            "provenance": {"methodology_version": "a-1.0.0", "lateral_consults": consults},
        }
        assert errors(V21, envelope(envelope_version="2.1", ise=ise)) == []
    assert "lateral_consults" in SCHEMAS[V21]["$comment"]
    assert "lateral_consults" in SCHEMAS[V2]["$comment"]


def test_emitted_request_origin_is_v2_only() -> None:
    assert errors(V1, envelope(edge_origin="emitted-request"))
    assert errors(V2, envelope(edge_origin="emitted-request")) == []
    assert errors(V21, envelope(edge_origin="emitted-request")) == []


@pytest.mark.parametrize("name", [V1, V2, V21])
def test_ids_are_non_empty_strings_not_necessarily_uuids(name: str) -> None:
    odd = "01942c7f-3c4d-7e04-9c5d-4fg3daE5g9c4"
    assert errors(name, envelope(message_id=odd, thread_id="t", parent_id="p")) == []
    assert errors(name, envelope(message_id=""))
    assert errors(name, envelope(parent_id=""))
    assert errors(name, envelope(thread_id=7))


@pytest.mark.parametrize("name", [V1, V2, V21])
def test_extension_keys_and_closed_top_level(name: str) -> None:
    assert errors(name, envelope(x_acme_ticket="T-1", x_a={"any": 1})) == []
    assert errors(name, envelope(extra="no"))
    assert errors(name, envelope(x_Acme="no"))
    assert errors(name, envelope(x_="no"))


@pytest.mark.parametrize("name", [V1, V2, V21])
def test_envelope_field_rules(name: str) -> None:
    art = ENVELOPE["artifact"]
    assert errors(name, envelope(artifact={**art, "path": "/etc/passwd"}))
    assert errors(name, envelope(artifact={**art, "path": "a/../b"}))
    assert errors(name, envelope(artifact={**art, "sha256": "A" * 64}))
    assert errors(name, envelope(integrity={"method": "ed25519", "value": "0" * 64}))
    assert errors(name, envelope(objective="x" * 241))
    assert errors(name, envelope(to={"eidolon": "vigil", "version": "1.0"}))
    assert errors(name, envelope(trace={**ENVELOPE["trace"], "tier": "fast"}))
    delta = {"token_budget": 10, "tokens_used": 5, "input_handles": ["mission.md"], "summary": "s"}
    assert errors(name, envelope(context_delta=delta)) == []
    assert errors(name, envelope(context_delta={**delta, "summary": ""}))
    missing = {k: v for k, v in ENVELOPE.items() if k != "trace"}
    assert errors(name, missing)
    assert errors(name, envelope(parent_id=None)) == []


FIXTURES = SHARED_ECL / "conformance-fixtures"
# fixture -> does envelope.v2.1.json accept it (only the shape failures are refused)
FIXTURE_SHAPES = {
    "conformant-handoff": True,
    "missing-integrity": True,
    "undeclared-edge": True,
    "over-budget-context": True,
    "conformant-ise-v2": True,
    "ise-missing-hierarchy": False,
    "v1-on-v2-compat": True,
    "high-trust-sha256-v2": True,
    "conformant-ise-v2.1": True,
    "conformant-high-trust-v2.1": True,
    "ise-verification-invalid-v2.1": False,
    "high-trust-no-ise-v2.1": True,
}


@pytest.mark.parametrize("fixture", sorted(FIXTURE_SHAPES))
def test_conformance_fixture_envelopes(fixture: str) -> None:
    path = FIXTURES / fixture / "scout-report.envelope.json"
    if not path.exists():
        pytest.skip(f"{path} not available")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert (errors(V21, data) == []) is FIXTURE_SHAPES[fixture]


# --------------------------------------------------------------------------- events

EVENT: dict[str, Any] = {
    "ts": "2026-07-02T10:00:00Z",
    "event": "verify_pass",
    "message_id": "01942d10-0001-7e04-9c5d-2df1b8c3e701",
    "thread_id": "01942d10-0001-7e04-9c5d-2df1b8c3e701",
    "from": "atlas@1.5.1",
    "to": "vigil@n/a",
    "performative": "PROPOSE",
    "integrity_method": "sha256",
}
EV = "handoff-event.v1.json"


def test_seed_event_shapes_are_valid() -> None:
    assert errors(EV, EVENT) == []
    # The seeds' verify_fail line has no performative.
    refusal = {k: v for k, v in EVENT.items() if k != "performative"}
    refusal.update(event="verify_fail", verify_failure_code="UNVERIFIED", decision="refused")
    assert errors(EV, refusal) == []
    unparseable = {
        **refusal,
        "thread_id": "unknown",
        "message_id": "unknown",
        "from": "unknown@n/a",
    }
    assert errors(EV, unparseable) == []


def test_verify_failure_code_iff_verify_fail() -> None:
    assert errors(EV, {**EVENT, "event": "verify_fail"})
    assert errors(EV, {**EVENT, "verify_failure_code": "INTEGRITY_MISMATCH"})
    ok = {**EVENT, "event": "verify_fail", "verify_failure_code": "INTEGRITY_MISMATCH"}
    assert errors(EV, ok) == []
    assert errors(EV, {**ok, "verify_failure_code": "INTEGRITY_FAIL"})
    assert errors(EV, {k: v for k, v in EVENT.items() if k != "performative"})


def test_project_fields_on_events() -> None:
    extra = {
        "decision": "accepted",
        "gate": "orchestrator",
        "verdict": "pass",
        "payload_sha256": "a" * 64,
        "integrity_value": "b" * 64,
        "verifier": "eidolons 0.1.0",
        "emitter": "eidolons 0.1.0",
        "reason": "ok",
        "receiver": "vigil",
        "context_tokens": 12,
        "model": "m",
        "tier": "trance",
    }
    assert errors(EV, {**EVENT, **extra}) == []
    assert errors(EV, {**EVENT, "decision": "maybe"})
    assert errors(EV, {**EVENT, "gate": "kernel"})
    assert errors(EV, {**EVENT, "payload_sha256": "xyz"})
    assert errors(EV, {**EVENT, "unknown_field": 1})
    assert errors(EV, {**EVENT, "thread_id": ""})
    assert errors(EV, {**EVENT, "from": "atlas"})
