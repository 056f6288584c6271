"""The memory's text rules without ``re`` (ADR 0022): every plain scan gives its
pattern's answer, or says it cannot and the pattern decides; a recall and a merge import
no ``re``."""

from __future__ import annotations

import random
import re
import subprocess
import sys

import pytest

from eidolons.memory import local, rules

ASCII = "".join(chr(c) for c in range(128))
AWKWARD = "aZ09_-.:/\\#@=!? \t\n\x1c\x1f\"'`()[]{}<>,;|"
UNICODE = "éßſKİı٣੩²ⅷ\u00a0\u2028\u3000ÄÖ_"


def texts(seed: int, n: int, alphabets: list[str], size: int = 24) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        alphabet = rng.choice(alphabets)
        out.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, size))))
    return out


def test_ascii_words_are_the_word_pattern() -> None:
    pattern = re.compile(r"\w+")
    assert rules._WORD_RE.pattern == pattern.pattern
    for text in texts(1, 3000, [ASCII, AWKWARD, "ab_ 9-"]):
        assert rules.ascii_words(text) == pattern.findall(text), repr(text)
    assert rules.ascii_words("café") is None


def test_candidate_runs_are_the_candidate_pattern() -> None:
    pattern = rules._CANDIDATE_RE.compiled()
    for text in texts(2, 3000, [ASCII, AWKWARD, "abc DEF x_y a.b (q) "], size=40):
        assert rules.candidate_runs(text) == pattern.findall(text), repr(text)
    assert rules.candidate_runs("x\u00a0y") is None


@pytest.mark.parametrize("scan_max", [0, 10_000])  # the pattern alone, the scan alone
def test_identifier_tokens_are_the_same_either_way(
    monkeypatch: pytest.MonkeyPatch, scan_max: int
) -> None:
    samples = texts(3, 1500, [ASCII, AWKWARD + UNICODE, "fooBar a_b us-east-1 x.md "], 60)
    want = [list(rules._identifier_tokens(text)) for text in samples]
    monkeypatch.setattr(rules, "_SCAN_MAX", scan_max)
    assert [list(rules._identifier_tokens(text)) for text in samples] == want


def test_camel_kebab_plain_and_tier_are_their_patterns() -> None:
    camel = re.compile("[a-z0-9][A-Z]")
    kebab = re.compile("[a-z]+(?:-[a-z]+)+", re.IGNORECASE)
    plain = re.compile("[a-z0-9]+")
    tier = re.compile("[Tt]([0-3])")
    for text in texts(4, 4000, [ASCII, AWKWARD + UNICODE, "aB-c9Tt0123-", "ab-"], size=8):
        assert rules.has_camel(text) == bool(camel.search(text)), repr(text)
        expected = kebab.fullmatch(text) is not None
        assert rules._kebab_words(text) == expected, repr(text)
        assert rules.kebab_words(text) in (expected, None)
        assert rules.plain_term(text) == bool(plain.fullmatch(text)), repr(text)
        found = tier.fullmatch(text)
        assert rules.tier_digit(text) == (found.group(1) if found else None), repr(text)
    # case folding reaches past ASCII: the Kelvin sign is a k, the long s an s
    assert rules.kebab_words("\u212aa-b") is None and rules._kebab_words("\u212aa-b")
    assert rules._kebab_words("ſcout-report")


def test_the_version_rule_is_its_pattern() -> None:
    pattern = re.compile(r"[12](\.\d+){1,2}")
    samples = texts(5, 4000, ["12.0a", "12.0345", "2.", ASCII], size=7)
    for text in [*samples, "2.٣", "1.0.²", "2.0.0", "1.10", "2..0", "3.0", "2.0.0.0"]:
        assert rules._supported_version(text) == bool(pattern.fullmatch(text)), repr(text)
    assert rules.envelope_version("2.٣") is None and rules._supported_version("2.٣")


SECRETS = [
    "123-45-6789",
    "١٢٣-٤٥-٦٧٨٩",  # \d is every decimal digit
    "AKIAABCDEFGHIJKLMNOP",
    "ASIA0123456789ABCDEF",
    "ghp_" + "a" * 36,
    "github_pat_" + "B" * 22,
    "eyJhbGciOi.eyJzdWIi.sig_-x",
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----BEGIN PRIVATE KEY-----",
    "password=hunter2",
    "PassWord : x",
    "paſsword=x",  # (?i) folds the long s to s
]


def test_redaction_skips_only_texts_no_pattern_can_match() -> None:
    rng = random.Random(6)
    samples = texts(7, 2000, [ASCII, AWKWARD + UNICODE, "0123456789-", "AKIGHPeyJ_-=: "], 30)
    for _ in range(1500):  # secrets and their near misses inside noise
        secret = rng.choice(SECRETS)
        cut = rng.randint(0, len(secret))
        noisy = secret[:cut] + rng.choice(["", "-", "x", " ", "9"]) + secret[cut:]
        samples.append(rng.choice(["", "a ", "x", "1"]) + noisy + rng.choice(["", " b", "Z"]))
    samples += SECRETS
    matched = 0
    for text in samples:
        for rule, pattern, _ in rules._REDACTIONS:
            if pattern.compiled().search(text):
                matched += 1
                assert rules.may_redact(rule, text), (rule, text)
        for sensitivity in ("internal", "none"):
            want = text
            for rule, pattern, always in rules._REDACTIONS:
                if always or sensitivity != "none":
                    want = pattern.compiled().sub(f"«REDACTED:{rule}»", want)
            assert rules.redact(text, sensitivity) == want, (sensitivity, text)
    assert matched > 300  # the secrets and many of their noisy copies
    assert rules.may_redact("SOME_NEW_RULE", "anything")  # unknown: the pattern decides


def test_a_plain_term_is_lower_case_ascii_letters_and_digits() -> None:
    assert rules.plain_term("abc9") and not rules.plain_term("Ab")


def test_a_recall_and_a_merge_import_no_re(tmp_path: object) -> None:
    # the store is built in this process; a fresh one recalls (ASCII query, five
    # summaries to redact) and merges a hand-off it holds, and never imports re
    from pathlib import Path

    from .conftest import make_handoff

    where = Path(str(tmp_path)) / "store"
    memory = local.LocalMemory(where, project="p")
    envelope, raw = make_handoff(objective="Rotate the key for 10.0.0.1 in deploy-2.")
    assert memory.ingest(envelope, raw, gated=True)["status"] == "ingested"
    for i in range(6):
        extra, body = make_handoff(objective=f"Deploy step {i} of the key rotation.")
        memory.ingest(extra, body, gated=True)
    memory.close()
    code = f"""
import sys
from eidolons.ecl import grammar
from eidolons.memory.local import LocalMemory
envelope = grammar.loads(sys.argv[1].encode()); raw = sys.argv[2].encode()
memory = LocalMemory({str(where)!r}, project="p")
got = memory.recall({{}}, "Rotate the key for 10.0.0.1 deploy-2 fooBar auth_handler", k=5)
assert len(got["records"]) == 5, got
assert memory.ingest(envelope, raw, gated=True)["commit_status"] == "merged"
memory.close()
print(sorted(m for m in ("re", "json") if m in sys.modules))
"""
    import json

    run = subprocess.run(
        [sys.executable, "-c", code, json.dumps(envelope), raw.decode()],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_the_token_estimate_is_the_servers_ceiling() -> None:
    import math

    for words in [*range(0, 2500), 9999, 10_000, 123_457]:  # summaries are <= 4,096 chars
        assert rules.estimate_tokens("w " * words) == math.ceil(words * 1.3), words
