"""Each rule of the grammar, written by hand over characters (ADR 0022), judges exactly
what its specification pattern judges with ``re.fullmatch`` and ``re.ASCII``: on valid
values, on every one-character mutation of them, and on random strings over the rule's
alphabet plus the characters that broke the old copies (newlines, Unicode digits...)."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any

import pytest

from eidolons.ecl import grammar

SLUG = "[a-z][a-z0-9-]*"
SPEC: list[tuple[Callable[[Any], bool], str, list[str]]] = [
    (grammar.is_slug, SLUG, ["atlas", "a", "x-1", "a--", "gilgamesh-2"]),
    (
        grammar.is_envelope_version,
        r"(1\.[012]|2\.[01])(\.\d+)?",
        ["1.0", "1.2", "2.0", "2.1", "2.1.7", "1.1.10"],
    ),
    (grammar.is_v1_version, r"1\.[012](\.\d+)?", ["1.0", "1.2.3"]),
    (grammar.is_v21_version, r"2\.1(\.\d+)?", ["2.1", "2.1.30"]),
    (grammar.is_agent_version, r"\d+\.\d+\.\d+|n/a", ["1.4.2", "n/a", "10.0.99"]),
    (grammar.is_schema_version, r"\d+\.\d+(\.\d+)?", ["1.0", "1.0.2", "22.33"]),
    (grammar.is_hex64, r"[0-9a-f]{64}", ["0" * 64, "0123456789abcdef" * 4]),
    (grammar.is_extension_field, r"x_[a-z][a-z0-9_]*", ["x_acme_flag", "x_a", "x_b_2_"]),
    (
        grammar.is_rfc3339,
        r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})",
        ["2026-11-30T07:23:17.931Z", "2026-11-30t07:23:17z", "2026-11-30T07:23:17+02:00"],
    ),
    (
        grammar.is_utc_timestamp,
        r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z",
        ["2026-11-30T07:23:17Z", "2026-11-30T07:23:17.123456Z", "2026-11-30T07:23:17.1Z"],
    ),
    (
        grammar.is_message_handle,
        r"ecl://thread/[0-9a-f-]{36}/message/[0-9a-f-]{36}",
        ["ecl://thread/" + "0a-" * 12 + "/message/" + "f" * 36],
    ),
    (grammar.is_trust_role, rf"orchestrator|sender:{SLUG}", ["orchestrator", "sender:atlas"]),
    (
        grammar.is_trust_edge,
        rf"({SLUG}|\*)->({SLUG}|\*)",
        ["atlas->vigil", "*->vigil", "a-->b", "*->*"],
    ),
    (
        grammar.is_safe_file_name,
        r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}",
        ["t1", "01a2-b.c_d", "A" * 200, "Z.."],
    ),
]
NOISE = "\n\r\t \x00.-_:/*>+Zz9aA\u0661\uff12\u00e9\u212a"


def alphabet(pattern: str, examples: list[str]) -> str:
    return "".join(sorted(set("".join(examples)) | set(NOISE)))


def candidates(rng: random.Random, pattern: str, examples: list[str]) -> list[str]:
    chars = alphabet(pattern, examples)
    out = list(examples)
    for example in examples:
        for i in range(len(example) + 1):
            out.append(example[:i] + example[i + 1 :])  # deletion
            for c in rng.sample(chars, 6):
                out.append(example[:i] + c + example[i:])  # insertion
                out.append(example[:i] + c + example[i + 1 :])  # substitution
        out += [example + "\n", "\n" + example, example * 2, example.upper()]
    for _ in range(3000):
        base = rng.choice(examples)
        n = rng.randint(0, len(base) + 3)
        out.append("".join(rng.choice(chars) for _ in range(n)))
    return [*out, "", "x" * 201, "A" * 201]


@pytest.mark.parametrize("rule, pattern, examples", SPEC, ids=lambda x: getattr(x, "__name__", ""))
def test_rule_equals_its_pattern(
    rule: Callable[[Any], bool], pattern: str, examples: list[str]
) -> None:
    compiled = re.compile(pattern, re.ASCII)
    rng = random.Random(pattern)
    judged = {True: 0, False: 0}
    for value in candidates(rng, pattern, examples):
        expected = compiled.fullmatch(value) is not None
        assert rule(value) is expected, (rule.__name__, value)
        judged[expected] += 1
    assert judged[True] >= len(examples) and judged[False] > 1000
    for other in (None, 3, 2.1, b"atlas", ["atlas"], {"a": 1}):
        assert rule(other) is False


def test_rules_do_not_need_re() -> None:
    import subprocess
    import sys

    code = "import sys, eidolons.ecl.grammar; print('re' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
