"""Faster ways to the same answers (ADR 0021): each is checked against the
plain way it replaces."""

from __future__ import annotations

import re
import sqlite3

import pytest

from eidolons.memory import local
from eidolons.memory.local import LocalMemory

from .conftest import make_handoff

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon"]


def test_capped_document_frequencies_agree_with_the_vocabulary(store: LocalMemory) -> None:
    for i in range(40):  # word k in every (k+1)-th hand-off; "auth_handler" and "café" too
        words = [w for k, w in enumerate(WORDS) if i % (k + 1) == 0]
        extra = " auth_handler café" if i % 3 == 0 else ""
        envelope, raw = make_handoff(
            objective=f"Entry {i}.", payload=" ".join(words) + extra + f" n{i}"
        )
        assert store.ingest(envelope, raw)["status"] == "ingested"
    terms = [*WORDS, "auth_handler", "auth", "café", "cafe", "missing", "n7", "entry"]
    with sqlite3.connect(store.path) as conn:
        vocab = dict(conn.execute("SELECT term, doc FROM crystals_vocab"))
        for cap in (1, 5, 13, 20, 40, 41, 1000):
            got = local._document_frequencies(conn, terms, cap)
            for term in terms:
                expected = vocab.get(term, 0)
                if re.fullmatch("[a-z0-9]+", term):
                    assert got[term] == min(expected, cap), (term, cap)
                else:  # looked up under its own spelling, uncapped, as before
                    assert got.get(term, 0) == expected, (term, cap)
    assert vocab["alpha"] == 40 and vocab["beta"] == 20 and vocab["entry"] == 40


@pytest.mark.parametrize("total", [7, 8])
def test_the_half_rule_is_the_same_at_odd_and_even_sizes(
    monkeypatch: pytest.MonkeyPatch, store: LocalMemory, total: int
) -> None:
    # "in at least half" means df * 2 >= total: at 8 crystals 4 is half, at 7 it is 4 too
    monkeypatch.setattr(local, "PRUNE_MIN_DOCS", 4)
    for i in range(total):
        word = "halfword" if i < total - total // 2 else "other"
        envelope, raw = make_handoff(objective=f"Entry {i} {word}.", payload=f"rareword{i}")
        store.ingest(envelope, raw)
    with sqlite3.connect(store.path) as conn:
        (df,) = conn.execute("SELECT doc FROM crystals_vocab WHERE term = 'halfword'").fetchone()
        assert df * 2 >= total
        assert LocalMemory._informative(conn, ["halfword", "rareword0"]) == ["rareword0"]
        (df_other,) = conn.execute("SELECT doc FROM crystals_vocab WHERE term = 'other'").fetchone()
        assert df_other == total // 2  # 3 of 7 is under half, 4 of 8 is half
        kept = LocalMemory._informative(conn, ["other", "rareword0"])
        assert kept == (["rareword0"] if total == 8 else ["other", "rareword0"])
