"""The local store's schema 3 (ADR 0021): a store built by the schema-2 code is upgraded in
place, once, under the creation lock, losing nothing; a newer schema is refused, never
downgraded; the trigram index holds the excerpt's identifier tokens, and that still finds
every case-exact occurrence of every identifier a query can carry.

``data/store-v2.sqlite3`` was built by the schema-2 code (main at 7abcb84, the last commit
before schema 3) through ``LocalMemory`` itself, project ``legacy``: the three hand-offs
``LEGACY`` names, five ``Noise hand-off number i.`` ones (atlas, gated) and one committed
semantic crystal visible to ``forge`` only; then checkpointed and vacuumed into one file.
"""

from __future__ import annotations

import multiprocessing
import random
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from eidolons.memory.local import DB_NAME, SCHEMA_VERSION, LocalMemory
from eidolons.memory.rules import identifier_terms, identifier_text, looks_like_identifier

from .conftest import make_handoff, rank_ids, seed

FIXTURE = Path(__file__).resolve().parent / "data" / "store-v2.sqlite3"
LEGACY = {  # name: (crystal id, objective, payload, sender, kind, tier, state)
    "gated": (
        "2b2aa18c-711b-41e9-b9e4-5bfe92a5d862",
        "Scout the trace writer for lost events.",
        "calls flushTraceWriter() in src/eidolons/trace_writer.py twice",
        "atlas",
        "scout-report",
        "T1",
        "validated",
    ),
    "plain": (
        "41d7c34d-e8d9-47b2-9112-4b763d26a2c2",
        "Spec the contract loader.",
        "the loader reads contracts/index.json once",
        "atlas",
        "spec",
        "T1",
        "unverified",
    ),
    "untrusted": (
        "7580c511-6498-4304-a748-68a4d1f07e3b",
        "Report from an unknown sender.",
        "quarantineOrphanShards never yields",
        "mallory",
        "scout-report",
        "T3",
        "quarantined",
    ),
}
SEMANTIC = "cbfa93fb-2a4a-4720-af14-99f97c481fd6"


def legacy_store(tmp_path: Path) -> Path:
    store_dir = tmp_path / "store"
    store_dir.mkdir()
    shutil.copy(FIXTURE, store_dir / DB_NAME)
    return store_dir


def meta(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT key, value FROM meta").fetchall())


def test_the_fixture_is_a_schema_2_store() -> None:
    with sqlite3.connect(f"file:{FIXTURE}?immutable=1", uri=True) as conn:
        assert dict(conn.execute("SELECT key, value FROM meta")) == {
            "schema_version": "2",
            "trigram": "1",
        }
        columns = {row[1] for row in conn.execute("PRAGMA table_info(crystals)")}
        assert "handoff_key" in columns and "tri_body" not in columns
        assert conn.execute("SELECT count(*) FROM crystals").fetchone() == (9,)


def test_a_schema_2_store_is_upgraded_in_place_and_loses_nothing(tmp_path: Path) -> None:
    store_dir = legacy_store(tmp_path)
    memory = LocalMemory(store_dir, project="legacy")
    try:
        # the first call is a read: it upgrades the existing store all the same
        found = memory.recall({}, "trace writer lost events")["records"]
        assert found[0]["id"] == LEGACY["gated"][0]
        assert meta(memory.path) == {"schema_version": "3", "trigram": "1"}
        stats = memory.stats()
        assert (stats["crystals"], stats["schema_version"]) == (9, "3")
        for ident, objective, _, _, _, tier, state in LEGACY.values():
            record = memory.recall({}, objective)["records"][0]
            assert (record["id"], record["trust_tier"], record["validation_state"]) == (
                ident,
                tier,
                state,
            )
        # the trigram index was rebuilt from the old rows' excerpts
        assert rank_ids(memory, {}, "OrphanShards", arms=("trigram",)) == [LEGACY["untrusted"][0]]
        assert rank_ids(memory, {}, "trace_writer.py", arms=("trigram",)) == [LEGACY["gated"][0]]
        assert rank_ids(memory, {}, "us-west-2", arms=("trigram",)) == [SEMANTIC]
        # visibility survives
        assert SEMANTIC in rank_ids(memory, {"agent_class_visibility": "forge"}, "rollback")
        assert rank_ids(memory, {"agent_class_visibility": "vigil"}, "rollback") == []
        # a re-emitted hand-off of the old store is stored once (ADR 0021): same key
        _, objective, payload, sender, kind, _, _ = LEGACY["gated"]
        envelope, raw = make_handoff(objective=objective, payload=payload, sender=sender, kind=kind)
        again = memory.ingest(envelope, raw, gated=True)
        assert (again["commit_status"], again["id"]) == ("merged", LEGACY["gated"][0])
        # and new hand-offs go in beside the old ones, found by both arms
        envelope, raw = make_handoff(objective="A new one.", payload="see newHandoffZebra()")
        new = memory.ingest(envelope, raw)
        assert new["commit_status"] == "committed"
        assert rank_ids(memory, {}, "HandoffZebra", arms=("trigram",)) == [new["id"]]
        assert memory.stats()["crystals"] == 10
    finally:
        memory.close()
    with sqlite3.connect(store_dir / DB_NAME) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        assert "crystals_live" in indexes and "crystals_scope" not in indexes
        for table in ("crystals_fts", "crystals_tri"):  # both indexes agree with the rows
            conn.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('integrity-check', 1)")


def _open_and_use(store_dir: str) -> tuple[int, str]:
    memory = LocalMemory(Path(store_dir), project="legacy")
    try:
        hits = rank_ids(memory, {}, "OrphanShards", arms=("trigram",))
        return len(hits), str(memory.stats()["schema_version"])
    finally:
        memory.close()


def test_processes_opening_an_old_store_at_once_upgrade_it_once(tmp_path: Path) -> None:
    store_dir = legacy_store(tmp_path)
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(3) as pool:
        results = pool.map(_open_and_use, [str(store_dir)] * 3)
    assert results == [(1, "3")] * 3
    with sqlite3.connect(store_dir / DB_NAME) as conn:
        assert conn.execute("SELECT count(*) FROM crystals").fetchone() == (9,)
        conn.execute("INSERT INTO crystals_tri (crystals_tri, rank) VALUES ('integrity-check', 1)")


def test_a_newer_schema_is_refused_not_downgraded(tmp_path: Path) -> None:
    store_dir = legacy_store(tmp_path)
    with sqlite3.connect(store_dir / DB_NAME) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    memory = LocalMemory(store_dir, project="legacy")
    try:
        envelope, raw = make_handoff()
        ingest = memory.ingest(envelope, raw)
        assert ingest["status"] == "skipped" and "newer" in ingest["reason"]
        recall = memory.recall({}, "trace writer")
        assert recall["status"] == "skipped" and recall["records"] == []
    finally:
        memory.close()
    assert meta(store_dir / DB_NAME)["schema_version"] == "99"


def test_new_stores_are_schema_3_with_the_excerpts_identifiers_in_the_trigram_index(
    store: LocalMemory,
) -> None:
    envelope, raw = make_handoff(payload="Plain words, then fooBar() and src/a_b.py: done.")
    ident = store.ingest(envelope, raw)["id"]
    committed = seed(
        store, "semantic", {"summary": "A fact.", "body": "see x.y-z here", "scope": {}}
    )["id"]
    with sqlite3.connect(store.path) as conn:
        rows = dict(conn.execute("SELECT id, tri_body FROM crystals").fetchall())
    assert rows == {ident: "fooBar src/a_b.py", committed: "x.y-z"}
    assert meta(store.path)["schema_version"] == SCHEMA_VERSION == "3"


# -- identifier_text: what the trigram index keeps -------------------------------------

_RAW = re.compile(r"[^\s\"'`()\[\]{}<>,;|]+")


def reference_identifier_text(text: str) -> str:
    """The rule spelled out plainly: every raw token, stripped, kept if it is at least 3
    characters and looks like an identifier."""
    tokens = (raw.strip(".:!?=") for raw in _RAW.findall(text))
    return " ".join(t for t in tokens if len(t) >= 3 and looks_like_identifier(t))


SAMPLES = [
    "",
    "plain lower case words only",
    "Capitalised Words And camelCase and ALLCAPS and HTTP_PROXY.",
    "paths src/eidolons/memory/local.py, (tools/ci) [a.b] {x-y} <k=v> 'q:r' \"s#t\" |u@v|",
    "digits v2 x86_64 2026-12-01 a1 ab1 ² x²y ٣٤٥ abc٣",
    "strip ends: end. ..lead trail:: =eq= !bang! ?q? a.b. .:!?=",
    "unicode café naïveTé Ωmega ÉCOLE überFlow straße",
    "tabs\tand\nnewlines\r\nfooBar\u00a0bazQux\u2003end",
    "`code` and ``double`` and a\\b\\c and C:\\Users\\x",
]


def random_text(rng: random.Random) -> str:
    alphabet = "aZb9_./-:\\#@=!? \t\n\"'`()[]{}<>,;|éΩ²"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))


def test_identifier_text_is_the_plain_rule() -> None:
    rng = random.Random(93)
    for text in SAMPLES + [random_text(rng) for _ in range(2000)]:
        assert identifier_text(text) == reference_identifier_text(text), text


@pytest.mark.parametrize("text", SAMPLES[1:])
def test_every_case_exact_occurrence_of_a_query_identifier_is_kept(text: str) -> None:
    # any identifier a query can carry that occurs in the text occurs in what is indexed
    kept = identifier_text(text)
    for start in range(len(text)):
        for end in range(start + 3, len(text) + 1):
            for term in identifier_terms(text[start:end]):
                if term in text:
                    assert term in kept, (term, text)
