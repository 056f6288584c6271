"""One recall arm (ADR 0022): the staged look-up gives exactly what one query over every
match gives (the first ``fetch`` in-scope matches ordered by score, then id), on stores
built to break it: ties across every look-up boundary, rows out of scope among the best,
fewer matches than the ranked prefetch, more than it."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eidolons.memory import local
from eidolons.memory.local import LocalMemory
from eidolons.memory.rules import Scope

from .conftest import seed

WORDS = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta"]


def oracle(conn: sqlite3.Connection, table: str, match: str, where: Scope, fetch: int) -> list[str]:
    """The arm's rule as one plain query: every match, the scope in SQL, sorted, cut."""
    sql_where, params = where.where()
    sql = (
        f"SELECT c.id FROM {table} f JOIN crystals c ON c.rowid = f.rowid"
        f" WHERE {table} MATCH ? AND {sql_where} ORDER BY bm25({table}, 5.0, 1.0), c.id"
        " LIMIT ?"
    )
    return [row[0] for row in conn.execute(sql, [match, *params, fetch])]


@pytest.fixture(scope="module")
def tied_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalMemory]:
    """Crystals whose summaries repeat (equal BM25 scores in runs of up to 40), in three
    projects, four layers and three visibilities, a tenth of them retired or closed."""
    rng = random.Random(20261201)
    where = tmp_path_factory.mktemp("arm") / "store"
    stores = {name: LocalMemory(where, project=name) for name in ("p0", "p1", "p2")}
    for _ in range(150):
        summary = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))
        for _ in range(rng.choice([1, 1, 2, 5, 40])):
            scope: dict[str, Any] = {}
            visibility = rng.choice([None, None, "all", "vigil", "atlas"])
            if visibility is not None:
                scope["agent_class_visibility"] = visibility
            layer = rng.choice(["episodic", "semantic", "procedural", "execution"])
            store = stores[rng.choice(["p0", "p0", "p1", "p2"])]
            text = f"{summary} x_{rng.randint(0, 9)}"
            result = seed(store, layer, {"summary": text, "scope": scope})
            assert result["status"] == "committed", result
    for other in ("p1", "p2"):
        stores[other].close()
    memory = stores["p0"]
    conn = memory._connection(create=False)
    assert conn is not None
    conn.execute("UPDATE crystals SET status = 'archived' WHERE rowid % 10 = 3")
    conn.execute("UPDATE crystals SET t_valid_to = '2026-01-01T00:00:00Z' WHERE rowid % 10 = 7")
    yield memory
    memory.close()


SCOPES = [
    Scope("p0", None, ("episodic", "semantic", "procedural", "execution")),
    Scope("p0", "vigil", ("semantic", "episodic", "procedural")),
    Scope("p1", "atlas", ("episodic",)),
    Scope("p2", None, ("execution", "semantic")),
    Scope("nobody", None, ("episodic",)),
]


@pytest.mark.parametrize(
    "floor, lookup_max",
    [(300, 500), (7, 500), (300, 4)],  # 7: the prefetch runs out; 4: a tie run is split
)
def test_the_staged_arm_is_the_plain_query(
    tied_store: LocalMemory, monkeypatch: pytest.MonkeyPatch, floor: int, lookup_max: int
) -> None:
    monkeypatch.setattr(local, "PREFETCH_MIN", floor)
    monkeypatch.setattr(local, "LOOKUP_MAX", lookup_max)
    monkeypatch.setattr(local, "PREFETCH_FACTOR", 2 if floor < 300 else 10)
    conn = tied_store._connection(create=False)
    assert conn is not None
    queries = [f'"{w}"' for w in WORDS] + ['"alpha" OR "beta"', '"eta" OR "zeta" OR "x_3"']
    checked = 0
    for table in ("crystals_fts", "crystals_tri"):
        for match in [*queries, '"x_1"', '"pha"', '"nothing"']:
            for where in SCOPES:
                for fetch in (1, 3, 30, 90):
                    want = oracle(conn, table, match, where, fetch)
                    assert tied_store._arm(conn, table, match, where, fetch) == want, (
                        table, match, where.project, fetch)  # fmt: skip
                    checked += bool(want)
    assert checked > 100  # most cases have answers to compare


def test_ties_straddle_the_look_up_boundaries(tied_store: LocalMemory) -> None:
    # the store is what the test above needs: runs of equal scores longer than a chunk
    conn = tied_store._connection(create=False)
    assert conn is not None
    scores = [s for (s,) in conn.execute(
        "SELECT bm25(crystals_fts, 5.0, 1.0) FROM crystals_fts WHERE crystals_fts MATCH"
        " '\"alpha\"' ORDER BY 1")]  # fmt: skip
    runs: dict[float, int] = {}
    for score in scores:
        runs[score] = runs.get(score, 0) + 1
    assert max(runs.values()) > 30


def test_a_rare_match_is_ranked_without_a_second_query(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # fewer matches than the ranked prefetch: every match was seen, nothing to widen
    memory = LocalMemory(tmp_path / "store", project="p0")
    for i in range(5):
        seed(memory, "episodic", {"summary": f"note {i} about quux_{i}", "scope": {}})
    conn = memory._connection(create=False)
    assert conn is not None
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    where = Scope("p0", None, ("episodic",))
    assert memory._arm(conn, "crystals_tri", '"quux_3"', where, 30) == oracle(
        conn, "crystals_tri", '"quux_3"', where, 30
    )
    conn.set_trace_callback(None)
    assert sum("MATCH" in sql for sql in seen) == 2  # the arm's one, and the oracle's
    memory.close()
