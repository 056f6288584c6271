"""The envelope model and strict parsing of untrusted bytes (spec-checklist style)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from eidolons.ecl.envelope import Envelope, parse_envelope
from eidolons.ecl.grammar import Limits, is_placeholder, is_safe_relative_path, loads_strict
from eidolons.errors import EnvelopeError

# written by hand, not by tests/_builders.py: this tests the envelope model that the
# builder itself validates with (a builder-made document would check it against itself),
# with placeholder digests and an x- extension field the builder does not make
GOOD: dict[str, Any] = {
    "envelope_version": "2.1",
    "message_id": "01942d10-0002-7e04-9c5d-2df1b8c3e702",
    "thread_id": "01942d10-0002-7e04-9c5d-2df1b8c3e702",
    "parent_id": None,
    "from": {"eidolon": "atlas", "version": "1.5.1"},
    "to": {"eidolon": "vigil", "version": "1.9.0"},
    "performative": "PROPOSE",
    "edge_origin": "implicit",
    "objective": "Hand over the report.",
    "artifact": {
        "kind": "scout-report",
        "schema_version": "1.0",
        "path": "scout-report.md",
        "sha256": "a" * 64,
        "size_bytes": 10,
    },
    "context_delta": {"token_budget": 4000, "tokens_used": 10, "input_handles": [], "summary": "s"},
    "integrity": {"method": "sha256", "value": "a" * 64},
    "trace": {"ts": "2026-07-02T10:05:00Z", "host": "raw", "model": "m", "tier": "standard"},
    "x_acme_note": {"kept": True},
}


def encode(d: Any) -> bytes:
    return json.dumps(d).encode()


def with_(path: str, value: Any) -> dict[str, Any]:
    d = copy.deepcopy(GOOD)
    *parents, last = path.split(".")
    node = d
    for p in parents:
        node = node[p]
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value
    return d


_DELETE = object()


def test_good_envelope_parses_with_no_schema_problems() -> None:
    env = parse_envelope(encode(GOOD))
    assert env.sender.eidolon == "atlas" and env.recipient.version == "1.9.0"
    assert env.integrity_method == "sha256" and env.artifact_path == "scout-report.md"
    assert env.schema_problems() == []


def test_extension_fields_are_kept_and_round_trip() -> None:
    env = parse_envelope(encode(GOOD))
    assert env.data == GOOD
    assert env.data["x_acme_note"] == {"kept": True}


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "not valid JSON"),
        (b"{", "not valid JSON"),
        (b"[]", "top level must be a JSON object"),
        (b'"string"', "top level must be a JSON object"),
        (b"null", "top level must be a JSON object"),
        (b"\xff\xfe{}", "not valid UTF-8"),
        (b"\xef\xbb\xbf{}", "byte-order mark"),
        (b'{"a": NaN}', "NaN"),
        (b'{"a": Infinity}', "Infinity"),
        (b'{"a": -Infinity}', "Infinity"),
        (b'{"a": 1, "a": 2}', "duplicate JSON key 'a'"),
        (b'{"integrity": {"value": "x", "value": "y"}}', "duplicate JSON key 'value'"),
        (b'{"a": "\\ud800"}', "lone surrogate"),
        (b"[" * 100 + b"]" * 100, "nesting"),
        (b'{"a":' * 5000 + b"1" + b"}" * 5000, "nesting"),
        (b"{} {}", "not valid JSON"),
    ],
)
def test_strict_parse_refuses(raw: bytes, reason: str) -> None:
    with pytest.raises(EnvelopeError, match=reason):
        parse_envelope(raw)


def test_duplicate_integrity_value_is_refused_even_if_both_are_valid_hex() -> None:
    text = (
        encode(GOOD)
        .decode()
        .replace(
            '"value": "' + "a" * 64 + '"',
            '"value": "' + "a" * 64 + '", "value": "' + "b" * 64 + '"',
        )
    )
    with pytest.raises(EnvelopeError, match="duplicate"):
        parse_envelope(text.encode())


def test_size_cap() -> None:
    big = copy.deepcopy(GOOD)
    big["x_pad_data"] = "p" * 2000
    with pytest.raises(EnvelopeError, match="cap"):
        parse_envelope(encode(big), Limits(max_envelope_bytes=1000))
    assert parse_envelope(encode(big), Limits(max_envelope_bytes=10_000))


@pytest.mark.parametrize(
    ("path", "value", "reason"),
    [
        ("envelope_version", _DELETE, "missing required field envelope_version"),
        ("envelope_version", 2.1, "envelope_version must be a string"),
        ("from", _DELETE, "missing required field from"),
        ("from", "atlas", "from must be an object"),
        ("from.eidolon", _DELETE, "missing required field from.eidolon"),
        ("to.eidolon", 7, "to.eidolon must be a string"),
        ("performative", None, "missing required field performative"),
        ("performative", ["PROPOSE"], "performative must be a string"),
        ("artifact", _DELETE, "missing required field artifact"),
        ("artifact.path", _DELETE, "missing required field artifact.path"),
        ("artifact.path", "/etc/passwd", "not a safe relative path"),
        ("artifact.path", "../secret.md", "not a safe relative path"),
        ("artifact.path", "a/../../b.md", "not a safe relative path"),
        ("artifact.path", "a\\b.md", "not a safe relative path"),
        ("artifact.path", "a\x00b.md", "not a safe relative path"),
        ("artifact.path", "", "not a safe relative path"),
        ("integrity", _DELETE, "missing required field integrity"),
        ("integrity.method", _DELETE, "missing required field integrity.method"),
        ("integrity.value", _DELETE, "missing required field integrity.value"),
        ("integrity.value", 12, "integrity.value must be a string"),
    ],
)
def test_integrity_fields_missing_or_wrong_type_are_malformed(
    path: str, value: Any, reason: str
) -> None:
    with pytest.raises(EnvelopeError, match=reason.replace("(", r"\(")):
        parse_envelope(encode(with_(path, value)))


@pytest.mark.parametrize(
    ("path", "value", "problem"),
    [
        ("message_id", _DELETE, "missing required field message_id"),
        ("objective", _DELETE, "missing required field objective"),
        ("trace", _DELETE, "missing required field trace"),
        ("message_id", "", "message_id must be a non-empty string"),
        ("envelope_version", "2.2", "envelope_version '2.2'"),
        ("envelope_version", "3.0", "envelope_version '3.0'"),
        ("performative", "SHOUT", "performative 'SHOUT'"),
        ("objective", "x" * 241, "objective must be"),
        ("from.version", "1.2", "from.version"),
        ("to.eidolon", "Vigil", "to.eidolon 'Vigil' is not a slug"),
        ("artifact.kind", "Scout Report", "artifact.kind"),
        ("artifact.size_bytes", -1, "artifact.size_bytes"),
        ("integrity.value", "DEADBEEF", "integrity.value must be 64 lowercase hex"),
        ("trace.tier", "turbo", "trace.tier"),
        ("trace.ts", "yesterday", "trace.ts"),
        ("edge_origin", "somewhere", "edge_origin"),
        ("context_delta.summary", "", "context_delta.summary"),
        ("context_delta.tokens_used", "10", "context_delta.tokens_used"),
        ("confidence", 2, "confidence"),
        ("unknown_field", 1, "unknown top-level field 'unknown_field'"),
        ("ise", {"provenance": {"methodology_version": "atlas-1.0.0"}}, "ise.assertion_grade"),
    ],
)
def test_other_schema_violations_are_listed_not_fatal(path: str, value: Any, problem: str) -> None:
    env = parse_envelope(encode(with_(path, value)))
    assert any(problem in p for p in env.schema_problems()), env.schema_problems()


def test_non_uuid_ids_are_accepted_without_a_problem() -> None:
    d = with_("message_id", "01942c7f-3c4d-7e04-9c5d-4fg3daE5g9c4")
    assert parse_envelope(encode(d)).schema_problems() == []


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2", "2.0", "2.1", "1.0.3", "2.1.0", "2.0.17"])
def test_accepted_versions(version: str) -> None:
    d = with_("envelope_version", version)
    if not version.startswith("2."):
        del d["context_delta"]  # fine in any version; keep the envelope minimal
    assert parse_envelope(encode(d)).schema_problems() == []


def test_ise_in_a_v1_envelope_is_a_problem() -> None:
    d = with_("envelope_version", "1.2")
    d["ise"] = {"assertion_grade": "validated"}
    assert any(
        "requires envelope_version 2.0" in p for p in parse_envelope(encode(d)).schema_problems()
    )


def test_ise_verification_only_in_v21() -> None:
    d = with_(
        "ise",
        {
            "assertion_grade": "validated",
            "verification": {
                "fresh_context": True,
                "checker": "vigil",
                "transcript_access": "none",
            },
        },
    )
    assert parse_envelope(encode(d)).schema_problems() == []
    d["envelope_version"] = "2.0"
    assert any("ise has unknown fields" in p for p in parse_envelope(encode(d)).schema_problems())


@pytest.mark.parametrize(
    "value", ["", "  ", "PARENT_FILLS_SHA256", "<sha256>", "TODO", "todo: fill"]
)
def test_placeholders(value: str) -> None:
    assert is_placeholder(value)
    d = with_("integrity.value", value)
    assert parse_envelope(encode(d))  # not malformed


def test_not_placeholders() -> None:
    assert not is_placeholder("a" * 64)
    assert not is_placeholder("deadbeef")


@pytest.mark.parametrize(
    ("path", "ok"),
    [
        ("a.md", True),
        ("dir/a.md", True),
        ("a..b.md", False),
        ("..", False),
        ("a/..", False),
        ("/a", False),
        ("", False),
        ("a\\b", False),
        ("a\x00", False),
    ],
)
def test_safe_relative_path(path: str, ok: bool) -> None:
    assert is_safe_relative_path(path) is ok


def test_missing_agent_version_is_na() -> None:
    d = with_("from.version", _DELETE)
    env = Envelope.from_dict(d)
    assert str(env.sender) == "atlas@n/a"


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a": "\\uD800"}',  # the escape's hex digits in upper case
        b'{"\\uDC00": 1}',
        b'{"a": ["x", "\\uDbFf"]}',
        b'{"a": "\\ud83d"}',  # half a pair
    ],
)
def test_a_lone_surrogate_is_refused_whatever_the_case_of_its_escape(raw: bytes) -> None:
    """The tree rules are skipped for text that cannot break them (ecl.grammar): an
    escape spelled in upper case must not read as such a text."""
    with pytest.raises(EnvelopeError, match="lone surrogate"):
        loads_strict(raw)
    assert loads_strict(b'{"a": "\\uD83D\\uDE00"}') == {"a": "\U0001f600"}


def test_nesting_one_past_the_limit_is_refused_with_few_brackets() -> None:
    """Depth ``max_json_depth`` is read; one more is refused, though the text holds only
    that many brackets (the shortcut's bound is exact, never one short)."""
    limits = Limits(max_json_depth=4)
    assert loads_strict(b'{"a": {"b": [[1]]}}', limits) == {"a": {"b": [[1]]}}
    with pytest.raises(EnvelopeError, match="nesting"):
        loads_strict(b'{"a": {"b": [[[1]]]}}', limits)


def test_records_compare_by_value_and_type_never_by_their_text() -> None:
    from eidolons.ecl.envelope import AgentRef

    assert Limits() == Limits() and Limits(max_json_depth=8) != Limits()
    assert Limits(max_json_depth="32") != Limits()  # type: ignore[arg-type]  # same text
    assert AgentRef("vigil", "1.0") == AgentRef("vigil", "1.0")
    assert AgentRef("vigil", "1.0") != AgentRef("vigil", "1.1")
    assert Limits() != object() and AgentRef("vigil", "1.0") != ("vigil", "1.0")
