"""The strict readers' one number rule (ADR 0009): a JSON number a double cannot hold
(``1e999`` reads as an infinity under ``float``) is malformed input with the stable code,
on the C scanner's path, on the public ``json.loads`` fallback and in the hook's event
reader alike; finite extremes still read as ``float`` reads them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from eidolons.ecl import grammar
from eidolons.errors import EnvelopeError
from eidolons.hosts.hook.events import HookInputError, loads_event
from tests.conftest import Run, emit_cmd, emit_payload

Cli = Callable[..., Run]

OVERFLOWING = [
    "1e999",
    "-1e999",
    "1E+400",
    "2e308",
    "-1.8e308",
    "1" + "0" * 400 + ".0",
    '{"context_delta": {"tokens_used": 1e999}}',
    "[1, 2.5, [-1e999]]",
]
FINITE = {
    "1.7976931348623157e308": 1.7976931348623157e308,
    "-1.7976931348623157e308": -1.7976931348623157e308,
    "5e-324": 5e-324,
    "1e-999": 0.0,
    "-0.0": -0.0,
    "1e300": 1e300,
}


def _both_paths(monkeypatch: pytest.MonkeyPatch, data: bytes) -> list[tuple[str, str]]:
    """What the fast path and the public fallback (no ``_json`` scanner) say."""
    out = []
    for scan in (grammar._scan, None):
        with monkeypatch.context() as m:
            m.setattr(grammar, "_scan", scan)
            try:
                out.append(("ok", repr(grammar.loads_strict(data))))
            except EnvelopeError as exc:
                out.append((exc.code, str(exc)))
    return out


@pytest.mark.parametrize("text", OVERFLOWING)
def test_an_overflowing_number_is_malformed_on_both_paths(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, public = _both_paths(monkeypatch, text.encode())
    assert fast == public
    code, message = fast
    assert code == "MALFORMED" and "is out of range" in message, message
    assert len(message) < 100  # a 400-digit number is not echoed whole


@pytest.mark.parametrize("text", sorted(FINITE))
def test_finite_extremes_read_as_float_reads_them(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _both_paths(monkeypatch, text.encode()) == [("ok", repr(FINITE[text]))] * 2
    assert grammar.finite_float(text) == float(text)


def test_the_one_rule_is_what_both_readers_are_given() -> None:
    assert grammar._Options.parse_float is grammar.finite_float
    with pytest.raises(grammar.OutOfRange):
        json.loads("[1e999]", parse_float=grammar.finite_float)
    assert grammar.loads(b"1e999") == float("inf")  # the tool's own lines: json.loads


@pytest.mark.parametrize("text", ['{"n": 1e999}', '{"tool_input": {"offset": -1e400}}'])
def test_the_hook_reader_refuses_it_too(text: str) -> None:
    with pytest.raises(HookInputError, match="not strict JSON"):
        loads_event(text.encode())
    assert loads_event(b'{"n": 1.5, "m": 1e-999}') == {"n": 1.5, "m": 0.0}


def test_an_envelope_with_an_overflowing_number_is_refused_malformed(
    cli: Cli, project: Path
) -> None:
    _, envelope, doc = emit_payload(cli, project)
    text = envelope.read_text()
    tokens = json.dumps(doc["context_delta"]["tokens_used"])
    field = f'"tokens_used": {tokens}'
    assert field in text
    envelope.write_text(text.replace(field, '"tokens_used": 1e999', 1))
    r = cli("verify-envelope", envelope, "--json")
    assert r.code == 2, r.err
    answer = r.json()
    assert answer["verdict"] == "malformed", answer
    assert "out of range" in json.dumps(answer)


def test_emit_refuses_an_ise_with_an_overflowing_number(cli: Cli, project: Path) -> None:
    (project / "p.md").write_text("# p\n")
    r = cli(*emit_cmd("p.md", "--ise", '{"assertion_grade": "self-attested", "x": 1e999}'))
    assert r.code == 2 and "out of range" in r.err, r.err
    assert not (project / "p.envelope.json").exists()
