"""Which identifier terms the trigram arm searches (ADR 0021): hyphenated words
(``scout-report``) are left to the word arm, every other identifier term is still searched
by substring."""

from __future__ import annotations

from eidolons.memory.local import LocalMemory
from eidolons.memory.rules import identifier_terms, trigram_terms, word_terms

from .conftest import make_handoff, rank_ids


def add(store: LocalMemory, objective: str, payload: str, kind: str) -> str:
    envelope, raw = make_handoff(objective=objective, payload=payload, kind=kind)
    result = store.ingest(envelope, raw)
    assert result["status"] == "ingested", result
    return str(result["id"])


def test_hyphenated_words_are_not_trigram_terms_other_identifiers_are() -> None:
    query = (
        "scout-report Fan-Out see src/a/b.py fooBar-baz auth_handler us-east-1 "
        "fanout.max_jitter_ms x-2 OrphanShards"
    )
    assert "scout-report" in identifier_terms(query)
    assert trigram_terms(query) == [
        "src/a/b.py",
        "fooBar-baz",  # an inner capital: a camelCase name, not plain words
        "auth_handler",
        "us-east-1",  # a digit
        "fanout.max_jitter_ms",
        "x-2",
        "OrphanShards",
    ]
    # the dropped term's words are all word-arm terms
    assert {"scout", "report", "fan", "out"} <= set(word_terms(query))


def test_a_kind_query_is_answered_by_the_word_arm(store: LocalMemory) -> None:
    scout = add(store, "Look at the gate.", "# notes\n\nplain words\n", "scout-report")
    add(store, "Look at the gate.", "# notes\n\nplain words\n", "spec")
    assert rank_ids(store, {}, "scout-report", arms=("trigram",)) == []
    assert rank_ids(store, {}, "scout-report", arms=("words",)) == [scout]
    assert rank_ids(store, {}, "scout-report")[0] == scout
    explain = store.recall({}, "scout-report", explain=True)["explain"]
    assert explain["fusion"]["terms"]["identifiers"] == []
    assert explain["fusion"]["n_trigram"] == 0


def test_other_identifiers_still_match_inside_longer_tokens(store: LocalMemory) -> None:
    target = add(store, "Look at the planner.", "calls quarantineOrphanShards() daily\n", "spec")
    add(store, "Look at the planner.", "calls nothing of note\n", "spec")
    assert rank_ids(store, {}, "OrphanShards", arms=("trigram",)) == [target]
    assert rank_ids(store, {}, "OrphanShards", arms=("words",)) == []
