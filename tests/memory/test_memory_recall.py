"""Local recall: fusion of BM25 and trigram, the k cap, layers, project scope, visibility,
status filter, ordering, token budget, redaction and the answer's shape."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from eidolons.memory import INPUT_VALIDATION, SLOT_CAPS, TOTAL_TOKEN_CAP, local
from eidolons.memory.local import LocalMemory
from eidolons.memory.rules import identifier_terms, rrf_fuse, word_terms

from .conftest import PROJECT, make_handoff, rank_ids, seed

RECORD_KEYS = [
    "id",
    "layer",
    "summary",
    "trust_tier",
    "validation_state",
    "importance",
    "last_access",
    "content_ref",
    "score",
]


def add(store: LocalMemory, objective: str, payload: str = "body", **kw: Any) -> str:
    envelope, raw = make_handoff(objective=objective, payload=payload, **kw)
    result = store.ingest(envelope, raw)
    assert result["status"] == "ingested", result
    return str(result["id"])


def commit(store: LocalMemory, layer: str, summary: str, **scope: Any) -> str:
    result = seed(store, layer, {"summary": summary, "scope": scope})
    assert result["status"] == "committed", result
    return str(result["id"])


def ids(result: dict[str, Any]) -> list[str]:
    return [record["id"] for record in result["records"]]


# -- the two arms ----------------------------------------------------------------------


def test_identifier_fragment_found_by_trigram_not_by_bm25(store: LocalMemory) -> None:
    target = add(store, "Fix the envelope parser.", "calls verifyIncomingEnvelope on every read")
    add(store, "Incoming envelope checks for the gate.", "incoming envelope words, spelled apart")
    add(store, "Unrelated hand-off.", "nothing here")
    query = "IncomingEnvelope"
    assert rank_ids(store, {}, query, arms=("words",)) == []  # one unicode61 token: no match
    assert rank_ids(store, {}, query, arms=("trigram",)) == [target]
    assert ids(store.recall({}, query))[0] == target


def test_exact_path_beats_word_overlap(store: LocalMemory) -> None:
    for i in range(12):  # keep the path's words under half the store (else they are dropped)
        add(store, f"Unrelated hand-off {i}.", "nothing in common")
    for i in range(6):
        add(
            store,
            f"Receiver receiver notes {i}.",
            "the receiver receiver receiver py py module notes, and gates",
        )
    target = add(store, "Refactor a module.", "touches src/eidolons/gates/receiver.py only")
    query = "gates/receiver.py"
    bm25_only = rank_ids(store, {}, query, arms=("words",), k=10)
    assert bm25_only[0] != target
    assert ids(store.recall({}, query))[0] == target


def test_plain_words_use_bm25(store: LocalMemory) -> None:
    target = add(store, "Audit the trace writer for lost events.")
    add(store, "Spec the contract loader.")
    assert identifier_terms("trace writer lost events") == []
    assert ids(store.recall({}, "trace writer lost events")) == [target]


def test_words_are_ored_so_long_queries_still_match(store: LocalMemory) -> None:
    target = add(store, "Audit the trace writer.")
    result = store.recall({}, "please find anything about the trace writer from last week")
    assert ids(result) == [target]


@pytest.mark.parametrize(
    "query", ['"', "NEAR(a b", "a AND OR NOT", "*", "col:value", "''", "(((", "\x00", ""]
)
def test_odd_queries_never_raise(store: LocalMemory, query: str) -> None:
    add(store, "Something to find.")
    result = store.recall({}, query)
    assert "error" not in result
    assert isinstance(result["records"], list)


def test_query_term_extraction() -> None:
    assert word_terms("Trace, trace WRITER!") == ["trace", "writer"]
    assert identifier_terms("see src/a/b.py and fooBar, auth_handler, us-east-1 or plain") == [
        "src/a/b.py",
        "fooBar",
        "auth_handler",
        "us-east-1",
    ]


def test_selective_arm_weighs_more(store: LocalMemory) -> None:
    # w_arm = 1 + selectivity, selectivity = 1 - hits / scoped (the server's rule).
    for i in range(10):
        add(store, f"Deploy step {i}.")
    for i in range(9):
        add(store, f"Unrelated note {i}.")
    target = add(store, "Rename a helper.", "renames xfooBarBaz everywhere")
    result = store.recall({}, "deploy fooBarBaz", k=5, explain=True)
    fusion = result["explain"]["fusion"]
    assert fusion["n_scoped"] == 20
    assert fusion["w_sparse"] == pytest.approx(1 + (1 - 10 / 20))
    assert fusion["w_trigram"] == pytest.approx(1 + (1 - 1 / 20))
    top = result["records"][0]
    assert top["id"] == target  # the rare identifier outranks the common word
    assert top["score"] == pytest.approx(fusion["w_trigram"] / 61)


def test_censored_arm_gets_no_selectivity_bonus(store: LocalMemory) -> None:
    for i in range(35):  # more hits than the fetch width (30)
        add(store, f"Deploy step {i}.")
    fusion = store.recall({}, "deploy", k=5, explain=True)["explain"]["fusion"]
    assert fusion["n_sparse"] == fusion["fetch_width"] == 30
    assert fusion["w_sparse"] == 1.0


def test_words_in_half_the_store_are_dropped(
    store: LocalMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local, "PRUNE_MIN_DOCS", 4)
    for i in range(8):
        add(store, f"Common entry {i}.")
    target = add(store, "Common but rare entry.")

    def words(query: str) -> list[str]:
        return list(store.recall({}, query, explain=True)["explain"]["fusion"]["terms"]["words"])

    assert words("common rare") == ["rare"]
    assert ids(store.recall({}, "common rare"))[0] == target
    assert words("common unheard") == ["common", "unheard"]  # nothing informative: keep all
    monkeypatch.setattr(local, "PRUNE_MIN_DOCS", 1000)
    assert words("common rare") == ["common", "rare"]  # small stores are never pruned


def test_rrf_fusion_formula_and_tie_break() -> None:
    fused = rrf_fuse([(1.0, ["a", "b"]), (2.0, ["b", "c"])])
    scores = dict(fused)
    assert scores["b"] == pytest.approx(1 / 62 + 2 / 61)
    assert scores["a"] == pytest.approx(1 / 61)
    assert [ident for ident, _ in fused] == ["b", "c", "a"]
    assert rrf_fuse([(1.0, ["z"]), (1.0, ["y"])]) == [("y", 1 / 61), ("z", 1 / 61)]


# -- k, layers, scope, visibility, status ----------------------------------------------


def test_k_is_a_hard_cap(store: LocalMemory) -> None:
    for i in range(12):
        add(store, f"Deploy note number {i}.")
    result = store.recall({}, "deploy note", k=3)
    assert len(result["records"]) == 3
    assert result["budget"]["k_requested"] == 3
    assert result["budget"]["k_applied"] == 3
    assert result["budget"]["truncated_count"] == 9


@pytest.mark.parametrize(("k", "applied"), [(0, 1), (-5, 1), (1, 1), (100, 100), (500, 100)])
def test_k_is_clamped(store: LocalMemory, k: int, applied: int) -> None:
    add(store, "Deploy note.")
    result = store.recall({}, "deploy", k=k)
    assert result["budget"]["k_applied"] == applied
    assert len(result["records"]) <= applied


def test_layers_filter(store: LocalMemory) -> None:
    episodic = add(store, "Rollback procedure observed.")
    semantic = commit(store, "semantic", "Rollback procedure is documented.")
    procedural = commit(store, "procedural", "Rollback procedure: revert then redeploy.")
    everything = store.recall({}, "rollback procedure", k=10)
    assert set(ids(everything)) == {episodic, semantic, procedural}
    assert ids(store.recall({}, "rollback procedure", layers=["semantic"])) == [semantic]
    only = store.recall({}, "rollback procedure", layers=["episodic", "procedural"])
    assert set(ids(only)) == {episodic, procedural}
    assert store.recall({}, "rollback procedure", layers=["execution"])["records"] == []
    assert set(ids(store.recall({}, "rollback procedure", layers=[]))) == set(ids(everything))


def test_project_scope(tmp_path: Path) -> None:
    ours = LocalMemory(tmp_path / "s", project="ours")
    theirs = LocalMemory(tmp_path / "s", project="theirs")  # same file, other project
    try:
        mine = add(ours, "Shared store entry alpha.")
        other = add(theirs, "Shared store entry beta.")
        assert ids(ours.recall({}, "shared store entry")) == [mine]
        assert ids(ours.recall({"project": ""}, "shared store entry")) == [mine]
        assert ids(ours.recall({"project": "theirs"}, "shared store entry")) == [other]
        assert ours.recall({"project": "nobody"}, "shared store entry")["records"] == []
    finally:
        ours.close()
        theirs.close()


def test_committed_project_is_normalised_to_the_canonical_key(store: LocalMemory) -> None:
    result = seed(store, "semantic", {"summary": "Canon fact.", "scope": {"project": "x"}})
    assert result["scope_normalized"] is True
    assert ids(store.recall({}, "canon fact")) == [result["id"]]


def test_visibility_rule(store: LocalMemory) -> None:
    vigil = commit(store, "semantic", "Visibility probe one.", agent_class_visibility="vigil")
    forge = commit(store, "semantic", "Visibility probe two.", agent_class_visibility="forge")
    shared = commit(store, "semantic", "Visibility probe three.", agent_class_visibility="all")
    open_ = commit(store, "semantic", "Visibility probe four.")
    seen_by_vigil = set(ids(store.recall({"agent_class_visibility": "vigil"}, "visibility probe")))
    assert seen_by_vigil == {vigil, shared, open_}
    seen_by_anyone = set(ids(store.recall({}, "visibility probe")))
    assert seen_by_anyone == {vigil, forge, shared, open_}
    ingested = add(store, "Visibility probe five.")  # ingest sets no visibility
    assert ingested in ids(store.recall({"agent_class_visibility": "kupo"}, "visibility probe"))


def test_scope_filter_is_not_starved_by_the_prefetch(store: LocalMemory) -> None:
    # More out-of-scope rows outrank the in-scope one than the ranked prefetch holds (300):
    # the arm must widen rather than come back empty.
    for i in range(310):
        commit(store, "semantic", f"starve starve starve {i}", agent_class_visibility="forge")
    visible = commit(store, "semantic", "starve, once, among many other words here")
    assert ids(store.recall({"agent_class_visibility": "vigil"}, "starve")) == [visible]


def test_quarantined_crystals_are_still_recalled(store: LocalMemory) -> None:
    ident = add(store, "Untrusted sender report.", sender="mallory")
    record = store.recall({}, "untrusted sender report")["records"][0]
    assert record["id"] == ident
    assert (record["trust_tier"], record["validation_state"]) == ("T3", "quarantined")


def test_superseded_and_inactive_crystals_are_excluded(store: LocalMemory) -> None:
    live = add(store, "Release checklist v3.")
    superseded = add(store, "Release checklist v2.")
    deprecated = add(store, "Release checklist v1.")
    with sqlite3.connect(store.path) as conn:
        conn.execute("UPDATE crystals SET t_valid_to = 'x' WHERE id = ?", (superseded,))
        conn.execute("UPDATE crystals SET status = 'deprecated' WHERE id = ?", (deprecated,))
    assert ids(store.recall({}, "release checklist")) == [live]


# -- order, budget, redaction, side effects, shape -------------------------------------


def test_scores_non_increasing_and_ties_by_id(store: LocalMemory) -> None:
    # three hand-offs (payloads differ: the same one re-emitted would be one crystal)
    twins = sorted(add(store, "Identical twin hand-off.", f"same {i}") for i in range(3))
    add(store, "Identical hand-off of a different kind.", "other")
    result = store.recall({}, "identical twin hand-off", k=10)
    scores = [record["score"] for record in result["records"]]
    assert scores == sorted(scores, reverse=True)
    assert ids(result)[:3] == twins


def test_token_budget_evicts_least_relevant(store: LocalMemory) -> None:
    words = " ".join(f"w{i}" for i in range(150))  # ~200 tokens per summary
    for i in range(8):
        add(store, f"budget probe {i} {words}")
    result = store.recall({}, "budget probe", k=8)
    assert result["evicted_count"] > 0
    assert len(result["records"]) + result["evicted_count"] == 8
    assert result["slot_breakdown"]["episodic"] <= SLOT_CAPS["episodic"]
    assert result["total_tokens"] <= TOTAL_TOKEN_CAP
    assert result["total_tokens"] == sum(result["slot_breakdown"].values())


def test_summaries_are_redacted(store: LocalMemory) -> None:
    add(store, "Rotate password=hunter2 and key AKIAABCDEFGHIJKLMNOP for 123-45-6789.")
    summary = store.recall({}, "rotate")["records"][0]["summary"]
    assert "hunter2" not in summary and "AKIA" not in summary and "6789" not in summary
    assert "«REDACTED:PASSWORD»" in summary
    assert "«REDACTED:AWS_KEY»" in summary
    assert "«REDACTED:SSN»" in summary


def test_recall_bumps_access(store: LocalMemory) -> None:
    ident = add(store, "Access counter probe.")
    store.recall({}, "access counter probe")
    store.recall({}, "access counter probe")
    with sqlite3.connect(store.path) as conn:
        (n,) = conn.execute("SELECT access_count FROM crystals WHERE id = ?", (ident,)).fetchone()
    assert n == 2


def test_answer_shape(store: LocalMemory) -> None:
    add(store, "Shape probe.")
    result = store.recall({"project": PROJECT}, "shape probe")
    assert list(result) == [
        "records",
        "slot_breakdown",
        "total_tokens",
        "evicted_count",
        "budget",
        "backend",
    ]
    assert list(result["records"][0]) == RECORD_KEYS
    assert set(result["slot_breakdown"]) == set(SLOT_CAPS)
    assert result["budget"]["total_cap"] == TOTAL_TOKEN_CAP
    assert result["budget"]["slots"] == SLOT_CAPS
    assert "explain" not in result
    explained = store.recall({}, "shape probe", explain=True)
    assert explained["explain"]["arms"]["dense"] == "inactive(null_vector_store)"
    assert explained["explain"]["project_keys_present"] == [PROJECT]


@pytest.mark.parametrize(
    ("scope", "query", "k", "layers"),
    [
        ("project", "q", 5, None),
        ({"project": 7}, "q", 5, None),
        ({}, None, 5, None),
        ({}, "q", "5", None),
        ({}, "q", True, None),
        ({}, "q", 5.0, None),
        ({}, "q", 5, "episodic"),
        ({}, "q", 5, ["episodic", "dreams"]),
    ],
)
def test_bad_arguments_are_input_validation_errors(
    store: LocalMemory, scope: Any, query: Any, k: Any, layers: Any
) -> None:
    result = store.recall(scope, query, k, layers)
    assert result["error"] == INPUT_VALIDATION
    assert result["message"].startswith("Input validation error: ")
