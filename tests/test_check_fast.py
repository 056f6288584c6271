"""The faster pieces of ``eidolons check`` agree with the slow ones they replaced
(the byte-for-byte check of the whole command is ``tests/test_check_golden.py``).

- R-1 headings come from one cached block-only CommonMark parse; a fresh full parse
  (inline rule on, as before) finds the same headings on every corpus payload and on
  800 generated documents built from the constructs that hide or make headings.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from eidolons.ecl.grammar import markdown_headings
from tests.golden_check.corpus import MARKDOWN, SECTIONS_MD


def full_parse_headings(text: str) -> list[tuple[int, str]]:
    """:func:`markdown_headings` as it was: a new full ``MarkdownIt("commonmark")``
    parse per call."""
    from markdown_it import MarkdownIt

    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[0].rstrip(" \t") == "---":
        for i in range(1, len(lines)):
            if lines[i].rstrip(" \t") in ("---", "..."):
                lines = [""] * (i + 1) + lines[i + 1 :]
                break
    tokens: Any = MarkdownIt("commonmark").parse("\n".join(lines))
    out: list[tuple[int, str]] = []
    for i, token in enumerate(tokens):
        if token.type != "heading_open" or token.level != 0 or i + 1 >= len(tokens):
            continue
        out.append((int(token.tag[1:]), tokens[i + 1].content.strip()))
    return out


FRAGMENTS = [
    "# Gaps", "## Findings ##", "###### Scope", "####### no", "#no", "   # Decision target",
    "    # indented code", "\t# tab", "Gaps", "====", "----", "- - -", "***", "___", "---",
    "...", "```", "~~~", "```md", "    code", "> # quoted", "> lazy", ">", "- # in list",
    "1. # ordered", "- item", "  - nested", "* star", "+ plus", "<div>", "</div>", "<!--",
    "-->", "<custom-tag>", "<pre>", "</pre>", "[ref]: /url", "[ref]: /url 'title'",
    "**Gaps**", "`# code span`", "a *b* c", "\\# escaped", "text with \u2028 separator",
    "nul\x00byte", "x\x1c## glued", "", "", "", "   ", "\t", "Findings\r", "trailing #",
    "# heading with `code` and *em*", "<!-- comment --> # not", "| a | b |", "|---|---|",
]  # fmt: skip


def documents(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        lines = [rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 30))]
        if rng.random() < 0.2:
            lines = ["---", "title: x", rng.choice(["---", "...", "# no"]), *lines]
        out.append(rng.choice(["\n", "\r\n", "\r"]).join(lines) + rng.choice(["", "\n"]))
    return out


@pytest.mark.parametrize("name", sorted(MARKDOWN))
def test_block_parse_finds_the_full_parse_headings_on_the_corpus(name: str) -> None:
    raw = MARKDOWN[name]
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    assert markdown_headings(text) == full_parse_headings(text)


def test_block_parse_finds_the_full_parse_headings_on_generated_documents() -> None:
    docs = documents(800, 20261201)
    assert sum(bool(full_parse_headings(d)) for d in docs) > 300  # headings are found
    for doc in docs:
        assert markdown_headings(doc) == full_parse_headings(doc), repr(doc)


def test_the_parser_is_reused_and_keeps_no_state_between_documents() -> None:
    first = markdown_headings("[ref]: /url\n# A\n")
    assert markdown_headings(SECTIONS_MD) == full_parse_headings(SECTIONS_MD)
    assert markdown_headings("[ref]: /url\n# A\n") == first == [(1, "A")]
    assert markdown_headings("[ref]\n===\n") == [(1, "[ref]")]  # no definition left over


@pytest.mark.parametrize(
    "text",
    ["", "plain", 'q"uote', "back\\slash", "new\nline", "\x00\x1b\x7f", "é ✓ 日本", "\ud800x",
     "\u2028\u2029", "tab\there", "/tmp/a b/c.envelope.json"],
)  # fmt: skip
def test_json_strings_are_what_json_dumps_gives(text: str) -> None:
    import json

    from eidolons.cli.check import _quote

    assert _quote(text) == json.dumps(text, ensure_ascii=False)
    assert _quote(None) == "null"


def test_results_built_by_the_recorder_are_ordinary_gate_results() -> None:
    from eidolons.ecl.envelope import GateResult, envelope_results

    results = envelope_results({"envelope_version": "1.0"}, target="/t/x.envelope.json")
    assert results and all(type(r) is GateResult for r in results)
    for r in results:
        assert r == GateResult(r.id, r.level, r.status, r.name, r.reason, r.target)
        assert bool(r) is (r.status == "ok")
        assert r.target == "/t/x.envelope.json"
    assert results[0].id == "E-2" and not results[0] and results[0].reason  # fields missing


def test_section_names_normalise_the_same_cached_or_not() -> None:
    from eidolons.ecl.grammar import _normalise, normalise_section

    for text in ["Decision target", " decision--target ", "FINDINGS", "Gaps\t\u00a0x", "ß-Straße"]:
        assert normalise_section(text) == _normalise(text)
        assert normalise_section(text) == normalise_section(text)  # a cache hit, same answer
    long = "Decision target " * 20  # longer than the cached length: computed, not kept
    assert (
        normalise_section(long) == _normalise(long) == "decision_target_" * 19 + "decision_target"
    )


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5", ""])
def test_jobs_must_be_a_positive_integer_or_auto(value: str, tmp_path: Path) -> None:
    from tests.conftest import run_cli

    r = run_cli("check", tmp_path, "--jobs", value, cwd=tmp_path)
    assert r.code == 1
    assert r.err == f"eidolons: --jobs must be a positive integer or auto, got {value!r}\n"


@pytest.mark.parametrize(
    "value",
    [0, 7, -3, 10**30, True, False, None, 1.0, 1.5, -0.0, 1e300, "s", [1, "a"], {"k": None}],
)
def test_reason_text_of_a_value_is_unchanged(value: Any) -> None:
    """``_text`` writes an int itself instead of through ``json.dumps``: same text."""
    import json

    from eidolons.ecl.envelope import text as _text

    if value is None or value is False:
        assert _text(value) == ""
    elif isinstance(value, str):
        assert _text(value) == value
    elif value is True:
        assert _text(value) == "true"
    elif isinstance(value, float) and value.is_integer() and abs(value) < 1e17:
        assert _text(value) == str(int(value))
    else:
        assert _text(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def test_one_process_check_never_imports_multiprocessing(tmp_path: Path) -> None:
    """A run below ``checker.AUTO_MIN`` envelopes (the default's threshold, ADR 0022)
    stays in this process and does not even import the pool."""
    import json
    import subprocess
    import sys

    from tests.golden_check.corpus import base_envelope

    payload = SECTIONS_MD.encode()
    (tmp_path / "r.md").write_bytes(payload)
    envelope = tmp_path / "r.envelope.json"
    envelope.write_text(json.dumps(base_envelope(payload, "r.md", 1)))
    code = (
        "import sys; from eidolons.cli.main import main; "
        f"rc = main(['check', {str(envelope)!r}, '--json', '--root', {str(tmp_path)!r}]); "
        "print('multiprocessing' in sys.modules, rc, file=sys.stderr)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.stderr.strip() == "False 0", proc.stderr
    assert json.loads(proc.stdout)["envelopes"] == 1
