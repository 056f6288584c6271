"""The JSON reader and writer of the hot paths (ADR 0022) agree with :mod:`json`: the
strict reader through ``_json``'s scanner gives the value or the error ``json.loads``
with the same hooks gives, on valid, broken and hostile texts; the writer writes what
``json.dumps(..., ensure_ascii=True)`` writes."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest

from eidolons.ecl import grammar
from eidolons.ecl.grammar import Limits
from eidolons.errors import EnvelopeError


def reference_loads(data: bytes) -> Any:
    """The strict reader as it was, on the public module alone."""
    text = data.decode("utf-8")
    try:
        value = json.loads(
            text,
            object_pairs_hook=grammar._no_duplicates,
            parse_constant=grammar._no_constants,
            parse_float=grammar.finite_float,  # the number rule (ADR 0009)
        )
    except grammar._DuplicateKey as exc:
        raise EnvelopeError(f"duplicate JSON key {str(exc)!r}") from None
    except grammar.OutOfRange as exc:
        raise EnvelopeError(f"not valid JSON: number {exc} is out of range") from None
    except RecursionError:
        raise EnvelopeError("JSON nesting too deep") from None
    except json.JSONDecodeError as exc:
        raise EnvelopeError(
            f"not valid JSON: {exc.msg} (line {exc.lineno} column {exc.colno})"
        ) from None
    except ValueError as exc:
        raise EnvelopeError(f"not valid JSON: {exc}") from None
    grammar._check_tree(value, Limits().max_json_depth)
    return value


def outcome(fn: Any, data: bytes) -> tuple[str, Any]:
    try:
        return "ok", fn(data)
    except EnvelopeError as exc:
        return "error", str(exc)


def random_value(rng: random.Random, depth: int = 0) -> Any:
    kinds = ["int", "float", "str", "bool", "null"] + (["list", "dict"] * 2 if depth < 4 else [])
    kind = rng.choice(kinds)
    if kind == "int":
        return rng.choice([0, -1, 7, 2**70, -(2**63), rng.randint(-1000, 1000)])
    if kind == "float":
        return rng.choice([0.5, -1e-300, 1e300, 3.141592653589793, 1.0, -0.0, 2.5e-5])
    if kind == "str":
        pool = 'abc "\\/\n\t\x00\x1f\x7f é€\U0001f600\ud800'
        return "".join(rng.choice(pool) for _ in range(rng.randint(0, 8)))
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "list":
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {
        rng.choice(["a", "b", "k", "ключ", "x_y", ""]) + str(i): random_value(rng, depth + 1)
        for i in range(rng.randint(0, 4))
    }


def mutations(rng: random.Random, text: str) -> list[str]:
    out = [text]
    for _ in range(6):
        if not text:
            break
        i = rng.randrange(len(text))
        op = rng.randrange(4)
        if op == 0:
            out.append(text[:i] + text[i + 1 :])
        elif op == 1:
            out.append(text[:i] + rng.choice(',:{}[]"\\ 0eE-+.nNI\t\n') + text[i:])
        elif op == 2:
            out.append(text[:i] + text[i] * 2 + text[i + 1 :])
        else:
            out.append(text + rng.choice(["", " ", "\n", "x", "{}", " 1", "\x0c"]))
    return out


HOSTILE = [
    '{"a": 1, "a": 2}',
    '{"a": {"b": 1, "b": 1}}',
    '[{"k": 1}, {"k": 2, "k": 3}]',
    "NaN",
    "[Infinity]",
    '{"x": -Infinity}',
    '"\\ud800"',
    '{"\\udc00": 1}',
    "[" * 100 + "]" * 100,
    "[" * 5000 + "]" * 5000,
    '{"a": 1} {"b": 2}',
    "\x0c{}",
    "{}\x0c",
    " \t\n\r{}\r\n\t ",
    "",
    "   ",
    "1e400",
    "-0",
    '"tab\tinside"',
    '{"a" 1}',
    "[1,]",
    "[01]",
    "tru",
    '"\\x41"',
]


def test_strict_reader_agrees_with_json_on_generated_texts() -> None:
    rng = random.Random(12)
    texts = list(HOSTILE)
    for _ in range(400):
        value = random_value(rng)
        dumped = json.dumps(value, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 1]))
        texts.extend(mutations(rng, dumped))
    seen = {"ok": 0, "error": 0}
    for text in texts:
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            continue
        fast = outcome(grammar.loads_strict, data)
        ref = outcome(reference_loads, data)
        assert fast == ref or (
            fast[0] == ref[0] == "ok" and json.dumps(fast[1]) == json.dumps(ref[1])
        ), text
        seen[fast[0]] += 1
    assert seen["ok"] > 300 and seen["error"] > 300


def test_fast_path_really_skips_json_on_valid_text() -> None:
    # valid text is parsed by the scanner itself (no retry), hostile text retried
    assert grammar._fast_loads(' {"a": [1, 2.5, "x", null, true]} ') == {
        "a": [1, 2.5, "x", None, True]
    }
    retry = grammar.NotWhole
    for bad in ("NaN", "[1,]", '{"a": 1} 2', ""):
        with pytest.raises(retry):
            grammar._fast_loads(bad)
    with pytest.raises(grammar._DuplicateKey):
        grammar._fast_loads('{"a": 1, "a": 1}')


def test_writer_agrees_with_json_dumps() -> None:
    rng = random.Random(7)
    values: list[Any] = [
        {},
        [],
        "",
        "é\ud800",
        0,
        True,
        None,
        math.nan,
        math.inf,
        -math.inf,
        {"k": {}, "l": []},
        {1: "int key", 2.5: "float key", False: "b", None: "n"},
        (1, (2, 3)),
        [{"a": [[], {}]}],
    ]
    values += [random_value(rng) for _ in range(500)]
    for value in values:
        for indent in (None, 2, 0, 4):
            assert grammar.dumps(value, indent=indent) == json.dumps(
                value, ensure_ascii=True, indent=indent
            ), (value, indent)
        assert grammar.dumps(value, compact=True) == json.dumps(
            value, ensure_ascii=True, separators=(",", ":")
        )
        try:
            expected = json.dumps(value, ensure_ascii=True, separators=(",", ":"), sort_keys=True)
        except TypeError:  # keys that do not sort (mixed types): both refuse
            with pytest.raises(TypeError):
                grammar.dumps(value, compact=True, sort_keys=True)
        else:
            assert grammar.dumps(value, compact=True, sort_keys=True) == expected


def test_writer_leaves_unknown_values_and_cycles_to_json() -> None:
    class Odd:
        pass

    for indent in (None, 2):
        with pytest.raises(TypeError, match="not JSON serializable"):
            grammar.dumps({"a": Odd()}, indent=indent)
        with pytest.raises(TypeError, match="keys must be"):
            grammar.dumps({(1, 2): 1}, indent=indent)
        loop: list[Any] = []
        loop.append(loop)
        with pytest.raises(ValueError, match="Circular reference"):
            grammar.dumps(loop, indent=indent)
