"""Gate receipts as in-toto Statements (ADR 0011): building one and judging one. Pure.

A receipt is a DSSE envelope (``payloadType: application/vnd.in-toto+json``) whose body
is the Statement built by :func:`statement_bytes`:

- ``_type`` ``https://in-toto.io/Statement/v1``;
- ``subject``: the payload (``name`` = ``artifact.path``, ``digest.sha256`` = the SHA-256
  of the bytes hashed), or, when no payload was hashed, the envelope file itself;
- ``predicateType`` :data:`PREDICATE_TYPE`; ``predicate``: ``project`` (the id of the
  project whose gate signed it, from its trust store), ``message_id, thread_id, from,
  to, performative, integrity {method, value}, envelope_sha256, verdict, failure_code,
  gate, command, time, verifier``.

:func:`judge_statement` decides, over the exact bytes a trusted signature covered,
whether a receipt vouches for *this* envelope and payload: the statement must be an
eidolons receipt written by the orchestrator gate, for these exact envelope bytes and (when
the receiver hashed the payload) these payload bytes, with verdict ``pass``. A valid
receipt for other bytes, or a signed verdict that is not a pass, is INTEGRITY_MISMATCH;
anything that is not such a statement is UNVERIFIED. Whether the statement's
``project`` counts is the trust store's rule (the pair of the signing key and the
project, :meth:`eidolons.keys.store.TrustStore.project_refusal`), applied before this one.
"""

from __future__ import annotations

from eidolons.ecl.grammar import loads_strict
from eidolons.errors import EnvelopeError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://eidolons.dev/attestation/ecl-verification/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
RECEIPT_GATE = "orchestrator"


def statement(
    *,
    subject_name: str,
    subject_sha256: str,
    predicate: dict[str, Any],
) -> dict[str, Any]:
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": subject_name, "digest": {"sha256": subject_sha256}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


def statement_bytes(doc: dict[str, Any]) -> bytes:
    """The serialized body: compact, sorted, ASCII JSON (the signature covers these bytes;
    verifiers parse the bytes they verified, never a re-encoding)."""
    from eidolons.ecl.grammar import dumps

    return dumps(doc, compact=True, sort_keys=True).encode()


def parse_statement(body: bytes) -> dict[str, Any] | None:
    """The statement, or None when the body is not an eidolons receipt statement."""
    try:
        doc = loads_strict(body)
    except EnvelopeError:
        return None
    if not isinstance(doc, dict) or doc.get("_type") != STATEMENT_TYPE:
        return None
    if doc.get("predicateType") != PREDICATE_TYPE or not isinstance(doc.get("predicate"), dict):
        return None
    subject = doc.get("subject")
    if not isinstance(subject, list) or len(subject) != 1 or not isinstance(subject[0], dict):
        return None
    digest = subject[0].get("digest")
    if not isinstance(digest, dict) or not isinstance(digest.get("sha256"), str):
        return None
    return doc


def judge_names(
    pred: dict[str, Any], *, message_id: str | None, envelope_sha256: str
) -> tuple[str, str] | None:
    """None when the predicate is an orchestrator verdict on these exact envelope bytes
    and this ``message_id`` (whatever the verdict and payload); else (code, why)."""
    if pred.get("gate") != RECEIPT_GATE:
        return "UNVERIFIED", f"the receipt was written by gate {pred.get('gate')!r}"
    if pred.get("envelope_sha256") != envelope_sha256:
        return "INTEGRITY_MISMATCH", "the signed receipt is for other envelope bytes"
    if pred.get("message_id") != message_id:
        return "INTEGRITY_MISMATCH", "the signed receipt is for another message_id"
    return None


def judge_statement(
    doc: dict[str, Any],
    *,
    message_id: str | None,
    envelope_sha256: str,
    payload_sha256: str | None,
) -> tuple[str, str] | None:
    """None when the statement vouches for this envelope (and payload); else (code, why)."""
    pred = doc["predicate"]
    problem = judge_names(pred, message_id=message_id, envelope_sha256=envelope_sha256)
    if problem is not None:
        return problem
    subject_sha = doc["subject"][0]["digest"]["sha256"]
    if payload_sha256 is not None and subject_sha != payload_sha256:
        return "INTEGRITY_MISMATCH", "the signed receipt is for other payload bytes"
    if pred.get("verdict") != "pass":
        code = pred.get("failure_code")
        return "INTEGRITY_MISMATCH", (
            f"the orchestrator's signed verdict is {pred.get('verdict')!r} ({code})"
        )
    return None
