"""The stepwise receiver checker (ADR 0005), fed raw inputs: no file is opened. Order
is enforced; each step's rule refuses with its code."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from eidolons.ecl.contract import ContractError, ContractSetUnavailable
from eidolons.ecl.integrity import digest_bytes
from eidolons.ecl.receiver import CheckOrderError, ReceiptJudgement, ReceiverCheck
from eidolons.io.contracts import ContractSet
from tests._builders import edit, envelope_for

PAYLOAD = b"# Scout report\n\n## Decision target\nx\n"
SHA = hashlib.sha256(PAYLOAD).hexdigest()
CONTRACTS = ContractSet.builtin()


def envelope(**changes: Any) -> dict[str, Any]:
    """The sender builder's envelope for PAYLOAD, then raw edits (tests/_builders.py)."""
    return edit(envelope_for(PAYLOAD, edge_origin="implicit", thread_id="t1"), **changes)


def record_for(data: bytes, env: dict[str, Any]) -> dict[str, Any]:
    return {
        "event": "verify_pass",
        "gate": "orchestrator",
        "message_id": env["message_id"],
        "integrity_method": env["integrity"]["method"],
        "integrity_value": env["integrity"]["value"],
        "payload_sha256": env["integrity"]["value"],
        "envelope_sha256": hashlib.sha256(data).hexdigest(),
    }


def run(doc: dict[str, Any], *, payload: bytes = PAYLOAD, record: Any = "auto") -> Any:
    data = json.dumps(doc).encode()
    check = ReceiverCheck("vigil")
    if check.feed_envelope(data) is None:
        return check.decision()
    check.feed_record(record_for(data, doc) if record == "auto" else record)
    check.feed_payload(digest_bytes(payload, "sha256") if check.wants_payload else None)
    check.feed_contracts(CONTRACTS)
    return check.decision()


def test_a_genuine_handoff_passes() -> None:
    decision = run(envelope())
    assert decision and decision.failures == []


@pytest.mark.parametrize(
    "doc, kwargs, code, check",
    [
        (envelope(), {"payload": b"rewritten\n"}, "INTEGRITY_MISMATCH", "reverify"),
        (envelope(), {"record": None}, "UNVERIFIED", "record"),
        (envelope(), {"record": {"event": "verify_fail", "gate": "orchestrator"}},
         "INTEGRITY_MISMATCH", "record"),
        (envelope(integrity__value="PARENT_FILLS_ME"), {}, "UNVERIFIED", "integrity"),
        (envelope(integrity__method="md5"), {}, "SCHEMA_INVALID", "integrity"),
        (envelope(performative="DELEGATE"), {}, "PERFORMATIVE_NOT_ALLOWED", "C-2"),
        (envelope(to__eidolon="forge"), {}, "UNDECLARED_EDGE", "edge"),
        (envelope(constraints={"trust_level": "high"}, ise={"assertion_grade": "validated"}),
         {}, "UNVERIFIED", "trust"),
        (envelope(envelope_version="2.0", constraints={"trust_level": "high"}), {},
         "UNVERIFIED", "trust"),
    ],
)  # fmt: skip
def test_each_step_refuses_with_its_code(
    doc: dict[str, Any], kwargs: dict[str, Any], code: str, check: str
) -> None:
    decision = run(doc, **kwargs)
    assert not decision
    assert (code, check) in {(f.code, f.check) for f in decision.failures}, decision.failures


@pytest.mark.parametrize(
    "raw", [b"", b"{", b"[]", b'{"a": 1, "a": 2}', b"\xef\xbb\xbf{}", b'{"x": NaN}']
)
def test_malformed_envelope_bytes_end_the_check(raw: bytes) -> None:
    check = ReceiverCheck("vigil")
    assert check.feed_envelope(raw) is None and check.done
    decision = check.decision()
    assert not decision and decision.failures[0].code == "SCHEMA_INVALID"
    with pytest.raises(CheckOrderError):
        check.feed_record(None)


def test_steps_out_of_order_or_twice_are_refused() -> None:
    data = json.dumps(envelope()).encode()
    check = ReceiverCheck("vigil")
    with pytest.raises(CheckOrderError):
        check.feed_record(None)  # before the envelope
    check.feed_envelope(data)
    with pytest.raises(CheckOrderError):
        check.feed_envelope(data)  # twice
    with pytest.raises(CheckOrderError):
        check.feed_contracts(CONTRACTS)  # skipping record and payload
    with pytest.raises(CheckOrderError):
        check.decision()  # before the last step


def test_a_receipt_for_other_payload_bytes_is_refused() -> None:
    doc = envelope()
    check = ReceiverCheck("vigil")
    check.feed_envelope(json.dumps(doc).encode())
    check.feed_record(None, receipt=ReceiptJudgement(None, "0" * 64))
    check.feed_payload(digest_bytes(PAYLOAD, "sha256"))
    check.feed_contracts(CONTRACTS)
    decision = check.decision()
    assert not decision and decision.failures[0].check == "receipt"


def test_a_contract_set_that_failed_to_load_refuses_every_edge() -> None:
    doc = envelope()
    data = json.dumps(doc).encode()
    check = ReceiverCheck("vigil")
    check.feed_envelope(data)
    check.feed_record(record_for(data, doc))
    check.feed_payload(digest_bytes(PAYLOAD, "sha256"))
    check.feed_contracts(ContractSetUnavailable(ContractError("x.yaml", "broken")))
    decision = check.decision()
    assert not decision and decision.failures[0].code == "UNDECLARED_EDGE"


def test_the_payload_is_handed_over_only_on_pass() -> None:
    doc = envelope()
    data = json.dumps(doc).encode()
    kept = digest_bytes(PAYLOAD, "sha256")
    kept.data = PAYLOAD
    check = ReceiverCheck("vigil")
    check.feed_envelope(data)
    check.feed_record(None)  # nothing on record: refused
    check.feed_payload(kept)
    check.feed_contracts(CONTRACTS)
    assert check.decision().payload is None
