"""The embedded memory: a SQLite + FTS5 store that answers like a CRYSTALIUM server.

One file, ``<store_dir>/memory.sqlite3``, in WAL mode, shared by every gate process of the
project. ``ingest`` stores one ``episodic`` crystal, or merges a repeat of ``(project,
message_id, artifact.sha256)`` or of the hand-off's content key. ``recall`` keeps in SQL the
rows in scope, ranks them with two arms (BM25 over words, a trigram match of the query's
identifier-like tokens), fuses them by weighted reciprocal rank and packs the first ``k``
into the server's token budget (ADRs 0021, 0022).

A store is created or upgraded (from schema 1 or 2) in one transaction under an exclusive
``flock`` on ``<store>/.create.lock`` (waited for until the trace timeout); a newer schema
is refused.
"""

from __future__ import annotations

import os
import time
from _thread import RLock  # what threading.RLock returns; threading is not imported at open
from collections.abc import Mapping, Sequence

try:  # what sqlite3 re-exports, without sqlite3.dbapi2's datetime adapters (ADR 0021)
    import _sqlite3 as sqlite3
except ImportError:  # an interpreter without it: the public module
    import sqlite3  # type: ignore[no-redef]

from eidolons.ecl.integrity import sha256_hex  # builtin SHA-256 first: no OpenSSL at open
from eidolons.io.files import deadline, flock_until
from eidolons.memory import (
    BACKEND_LOCAL,
    check_ingest_args,
    check_recall_args,
    clamp_k,
    empty_recall,
    error_result,
    ingested,
    input_error,
    skipped_ingest,
    skipped_recall,
)
from eidolons.memory.rules import (
    LocalLimits,
    Scope,
    _now,
    explanation,
    fts_or,
    handoff_key,
    identifier_text,
    new_crystal,
    pack,
    plain_term,
    raw_project,
    rrf_fuse,
    selectivity,
    trigram_terms,
    trust_tier,
    validate_envelope,
    validation_state,
    word_terms,
)

TYPE_CHECKING = False  # as typing.TYPE_CHECKING: typing is not imported at memory open
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, Final

DB_NAME: Final = "memory.sqlite3"
CREATION_LOCK: Final = ".create.lock"
SCHEMA_VERSION: Final = "3"  # 2: crystals.handoff_key; 3: identifier trigrams (ADR 0021)
UPGRADABLE: Final = frozenset({"1", "2"})


class SchemaError(sqlite3.DatabaseError):
    """The store's schema is one this code cannot use (newer than it knows)."""


def _fts_index(name: str, tokenize: str, columns: tuple[str, str]) -> str:
    """An external-content FTS5 index over two columns of ``crystals``, with its triggers."""
    cols = ", ".join(columns)
    new = ", ".join(f"new.{c}" for c in columns)
    old = ", ".join(f"old.{c}" for c in columns)
    return f"""
CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING fts5 (
    {cols}, content='crystals', content_rowid='rowid', tokenize='{tokenize}'
);
CREATE TRIGGER IF NOT EXISTS {name}_ai AFTER INSERT ON crystals BEGIN
    INSERT INTO {name} (rowid, {cols}) VALUES (new.rowid, {new});
END;
CREATE TRIGGER IF NOT EXISTS {name}_ad AFTER DELETE ON crystals BEGIN
    INSERT INTO {name} ({name}, rowid, {cols}) VALUES ('delete', old.rowid, {old});
END;
CREATE TRIGGER IF NOT EXISTS {name}_au AFTER UPDATE OF {cols} ON crystals
BEGIN
    INSERT INTO {name} ({name}, rowid, {cols}) VALUES ('delete', old.rowid, {old});
    INSERT INTO {name} (rowid, {cols}) VALUES (new.rowid, {new});
END;
"""


_TABLES: Final = (
    """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS crystals (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    layer TEXT NOT NULL,
    summary TEXT NOT NULL,
    body_excerpt TEXT NOT NULL DEFAULT '',
    project TEXT NOT NULL,
    project_raw TEXT,
    agent_class_visibility TEXT,
    sensitivity_tag TEXT NOT NULL DEFAULT 'internal',
    trust_tier TEXT NOT NULL,
    validation_state TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'active',
    importance REAL NOT NULL,
    message_id TEXT,
    artifact_sha256 TEXT,
    content_ref TEXT NOT NULL,
    payload_json TEXT NOT NULL,
    created_at TEXT NOT NULL,
    t_valid_from TEXT NOT NULL,
    t_valid_to TEXT,
    superseded_by TEXT,
    last_access TEXT NOT NULL,
    access_count INTEGER NOT NULL DEFAULT 0,
    handoff_key TEXT,
    tri_body TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX IF NOT EXISTS crystals_idem
    ON crystals (project, message_id, artifact_sha256) WHERE message_id IS NOT NULL;
"""
    + _fts_index("crystals_fts", "unicode61", ("summary", "body_excerpt"))
    + "CREATE VIRTUAL TABLE IF NOT EXISTS crystals_vocab USING fts5vocab (crystals_fts, 'row');\n"
)

#: Columns added after schema 1, in order (a fresh table has them already).
_ADDED_COLUMNS: Final = (
    ("handoff_key", "TEXT"),
    ("tri_body", "TEXT NOT NULL DEFAULT ''"),
)
_INDEXES: Final = (
    "CREATE UNIQUE INDEX IF NOT EXISTS crystals_handoff"
    " ON crystals (project, handoff_key) WHERE handoff_key IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS crystals_live"
    " ON crystals (project, status, layer, t_valid_to, agent_class_visibility)",
    "DROP INDEX IF EXISTS crystals_scope",  # schema <= 2: (project, status, layer)
)
_TRIGRAM: Final = _fts_index("crystals_tri", "trigram", ("summary", "tri_body"))


def stored_version(conn: sqlite3.Connection) -> str | None:
    """The store's ``schema_version``, or None when it has none (not created yet)."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.OperationalError:  # no meta table yet
        return None
    return None if row is None else str(row[0])


def ready(conn: sqlite3.Connection, *, create: bool, store_dir: str | os.PathLike[str]) -> bool:
    """Bring the store to :data:`SCHEMA_VERSION` (created only with ``create``): False when
    there is none; :class:`SchemaError` when newer."""
    version = stored_version(conn)
    if version == SCHEMA_VERSION:
        return True
    if version is None and not create:
        return False
    if version is not None and version not in UPGRADABLE:
        raise SchemaError(f"memory store schema {version!r} is newer than this eidolons knows")
    lock = os.path.join(os.fspath(store_dir), CREATION_LOCK)
    # never through a planted link (the gate's state, ADR 0021)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    try:
        flock_until(fd, deadline(), lock)
        mode = conn.execute("PRAGMA journal_mode").fetchone()  # WAL persists in the file
        if mode is None or str(mode[0]).lower() != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        version = stored_version(conn)  # another process may have done it meanwhile
        if version == SCHEMA_VERSION:
            return True
        if version is not None and version not in UPGRADABLE:
            raise SchemaError(f"memory store schema {version!r} is newer than this eidolons knows")
        _build(conn)
    finally:
        os.close(fd)  # releases the lock
    return True


def _build(conn: sqlite3.Connection) -> None:
    """Create or upgrade the schema, in one transaction."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in split_sql(_TABLES):
            conn.execute(statement)
        columns = {row[1] for row in conn.execute("PRAGMA table_info(crystals)")}
        for name, decl in _ADDED_COLUMNS:
            if name not in columns:  # an older store
                conn.execute(f"ALTER TABLE crystals ADD COLUMN {name} {decl}")
        for statement in _INDEXES:
            conn.execute(statement)
        trigram = _build_trigram(conn)
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('trigram', ?)", (trigram,))
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
            (SCHEMA_VERSION,),
        )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _build_trigram(conn: sqlite3.Connection) -> str:
    """(Re)build the trigram index from every row's identifier tokens: ``"1"``, or ``"0"``
    when SQLite has no trigram tokenizer (< 3.34)."""
    for trigger in ("ai", "ad", "au"):
        conn.execute(f"DROP TRIGGER IF EXISTS crystals_tri_{trigger}")
    conn.execute("DROP TABLE IF EXISTS crystals_tri")
    rows = conn.execute("SELECT rowid, body_excerpt FROM crystals").fetchall()
    conn.executemany(
        "UPDATE crystals SET tri_body = ? WHERE rowid = ?",
        [(identifier_text(body), rowid) for rowid, body in rows],
    )
    try:
        conn.execute("SAVEPOINT tri")
        for statement in split_sql(_TRIGRAM):
            conn.execute(statement)
        conn.execute("INSERT INTO crystals_tri (crystals_tri) VALUES ('rebuild')")
        conn.execute("RELEASE tri")
    except sqlite3.OperationalError:  # SQLite < 3.34 has no trigram tokenizer
        conn.execute("ROLLBACK TO tri")
        conn.execute("RELEASE tri")
        return "0"
    return "1"


def split_sql(script: str) -> list[str]:
    """Statements of a schema script (triggers keep their inner semicolons)."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                statements.append(buffer.strip())
            buffer = ""
    return statements


PREFETCH_FACTOR: Final = 10
PREFETCH_MIN: Final = 300  # an arm ranks this many matches before the scope (ADR 0022)
LOOKUP_MAX: Final = 500  # ranked rows looked up per statement (SQLite's oldest limit: 999)
WAL_CHECKPOINT_PAGES: Final = 4000  # fewer checkpoints, each two fsyncs (ADR 0021)
PRUNE_MIN_DOCS: Final = 1000


_RECORD_COLUMNS: Final = (
    "id, layer, summary, trust_tier, validation_state, importance, last_access, content_ref, "
    "sensitivity_tag"
)


class LocalMemory:
    """The embedded backend. Thread-safe; one SQLite connection per object, opened lazily."""

    backend = BACKEND_LOCAL

    def __init__(
        self, store_dir: str | os.PathLike[str], *, project: str, limits: LocalLimits | None = None
    ) -> None:
        self._dir = os.fspath(store_dir)  # strings inside: no pathlib at open (ADR 0021)
        self._db = os.path.join(self._dir, DB_NAME)
        self.project = project
        self.limits = limits or LocalLimits()
        self._conn: sqlite3.Connection | None = None
        self._has_trigram = False
        self._lock = RLock()

    @property
    def path(self) -> Path:
        """The store's SQLite file."""
        from pathlib import Path

        return Path(self._db)

    def _connection(self, *, create: bool) -> sqlite3.Connection | None:
        self._until = time.monotonic() + self.limits.call_timeout_s  # each call takes it first
        if self._conn is not None:
            return self._conn
        if not create and not os.path.exists(self._db):
            return None
        if create:
            os.makedirs(self._dir, exist_ok=True)
        _refuse_links(self._dir, self._db)
        conn = sqlite3.connect(
            self._db,
            timeout=self.limits.busy_timeout_ms / 1000,
            isolation_level=None,
            check_same_thread=False,
        )
        conn.set_progress_handler(lambda: time.monotonic() > self._until, 10_000)  # late: stops
        try:
            # the journal mode is set under the creation lock only (ADR 0021)
            conn.execute(f"PRAGMA busy_timeout = {int(self.limits.busy_timeout_ms)}")
            # durable against the process's death, not a power cut, as the trace (ADR 0021)
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}")
            if not ready(conn, create=create, store_dir=self._dir):
                conn.close()
                return None
            row = conn.execute("SELECT value FROM meta WHERE key = 'trigram'").fetchone()
            self._has_trigram = row is not None and str(row[0]) == "1"
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> LocalMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ingest(
        self,
        envelope: Mapping[str, Any],
        payload: Any,
        *,
        payload_encoding: str = "utf8",
        gated: bool = False,
    ) -> dict[str, Any]:
        """The CRYSTALIUM ``ingest`` tool: the stored or merged crystal, or a refusal.
        ``gated``: the hand-off passed both gates (stored ``validated``, ADR 0021)."""
        problem = check_ingest_args(payload, payload_encoding)
        if problem is not None:
            return input_error(problem, self.backend)
        refusal = validate_envelope(envelope, payload)
        if refusal is not None:
            return error_result(refusal[0], refusal[1], self.backend)
        try:
            with self._lock:
                return self._ingest(envelope, payload, payload_encoding, gated)
        except (sqlite3.Error, OSError) as exc:
            return skipped_ingest(f"local store unavailable: {exc}")

    def _ingest(
        self, envelope: Mapping[str, Any], payload: Any, payload_encoding: str, gated: bool
    ) -> dict[str, Any]:
        artifact = envelope["artifact"]
        tier = trust_tier(envelope)
        state = validation_state(tier, gated)
        key = handoff_key(envelope)
        message_id, sha = str(envelope["message_id"]), str(artifact["sha256"])
        project_raw = raw_project(envelope)
        conn = self._connection(create=True)
        assert conn is not None
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute(
                "SELECT id, trust_tier, validation_state FROM crystals WHERE project = ?"
                " AND ((message_id = ? AND artifact_sha256 = ?) OR handoff_key = ?)"
                " ORDER BY rowid LIMIT 1",
                (self.project, message_id, sha, key),
            ).fetchone()
            if row is None:  # the crystal is built only to be stored (a merge needs none)
                now = _now()
                crystal, excerpt, created_at = new_crystal(
                    envelope, self.project, payload, payload_encoding, self.limits, now
                )
                import json  # a new crystal only: a merge imports no json (ADR 0021)
                import uuid  # (platform) neither does a recall (ADR 0022)

                blob = json.dumps(crystal, ensure_ascii=False, sort_keys=True, default=str)
                ident = str(uuid.uuid4())
                conn.execute(
                    "INSERT INTO crystals (id, layer, summary, body_excerpt, project, project_raw,"
                    " agent_class_visibility, sensitivity_tag, trust_tier, validation_state,"
                    " status, importance, message_id, artifact_sha256, content_ref,"
                    " payload_json, created_at, t_valid_from, last_access, access_count,"
                    " handoff_key, tri_body)"
                    " VALUES (?, 'episodic', ?, ?, ?, ?, NULL, 'internal', ?, ?, 'active', ?,"
                    " ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)",
                    (
                        ident,
                        crystal["summary"],
                        excerpt,
                        self.project,
                        project_raw,
                        tier,
                        state,
                        self.limits.importance_cold_start,
                        message_id,
                        sha,
                        sha256_hex(blob.encode("utf-8")),
                        blob,
                        created_at,
                        now,
                        now,
                        key,
                        identifier_text(excerpt),
                    ),
                )
                stored, commit_status = (ident, tier, state), "committed"
            else:
                stored, commit_status = (str(row[0]), str(row[1]), str(row[2])), "merged"
                if state == "validated" and stored[2] == "unverified":  # now both gates passed
                    conn.execute(
                        "UPDATE crystals SET validation_state = ? WHERE id = ?", (state, stored[0])
                    )
                    stored = (stored[0], stored[1], state)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # an interrupted statement has rolled it back already
                conn.execute("ROLLBACK")
            raise
        normalized = project_raw != self.project
        return ingested(envelope, *stored, commit_status, normalized, self.backend)

    def recall(
        self,
        scope: Mapping[str, Any],
        query: str,
        k: int = 5,
        layers: Sequence[str] | None = None,
        *,
        explain: bool = False,
    ) -> dict[str, Any]:
        """The CRYSTALIUM ``recall`` tool: the ranked, packed records, or a refusal."""
        problem, chosen = check_recall_args(scope, query, k, layers)
        if problem is not None:
            return input_error(problem, self.backend)
        try:
            with self._lock:
                return self._recall(scope, query, k, chosen, explain)
        except (sqlite3.Error, OSError) as exc:
            return skipped_recall(f"local store unavailable: {exc}", k)

    def _recall(
        self,
        scope: Mapping[str, Any],
        query: str,
        k_requested: int,
        layers: tuple[str, ...],
        explain: bool,
    ) -> dict[str, Any]:
        k = clamp_k(k_requested)
        conn = self._connection(create=False)
        if conn is None:  # nothing ingested yet: no store, and none created by a read
            return empty_recall(k_requested, k, self.backend)
        where = Scope(
            project=scope.get("project") or self.project,
            visibility=scope.get("agent_class_visibility"),
            layers=layers,
        )
        fused, info = self._rank(conn, where, query, k, arms=("words", "trigram"))
        chosen = fused[:k]
        rows = self._rows(conn, [ident for ident, _ in chosen])
        records, slots, total, evicted = pack(chosen, rows)
        self._touch(conn, [record["id"] for record in records])
        result = empty_recall(k_requested, k, self.backend)
        result.update(
            records=records,
            slot_breakdown=slots,
            total_tokens=total,
            evicted_count=evicted,
        )
        result["budget"]["truncated_count"] = max(0, len(fused) - k)
        if explain:
            total, active = _counts(conn)
            keys = [row[0] for row in conn.execute("SELECT DISTINCT project FROM crystals")]
            store = {"total_crystals": total, "active": active, "embedded": 0}
            result["explain"] = explanation(info, k, len(fused), store, sorted(keys))
            result["explain"]["fusion"]["scope"] = {
                "project": where.project,
                "agent_class_visibility": where.visibility,
            }
        result["backend"] = result.pop("backend")  # keep "backend" last
        return result

    def _rank(
        self,
        conn: sqlite3.Connection,
        where: Scope,
        query: str,
        k: int,
        *,
        arms: tuple[str, ...],
    ) -> tuple[list[tuple[str, float]], dict[str, Any]]:
        fetch = max(3 * k, 30)
        sql_where, params = where.where()
        ranked: list[tuple[str, list[str]]] = []
        words = self._informative(conn, word_terms(query)) if "words" in arms else []
        if words:
            ranked.append(("bm25", self._arm(conn, "crystals_fts", fts_or(words), where, fetch)))
        idents = trigram_terms(query) if "trigram" in arms and self._has_trigram else []
        if idents:
            ranked.append(
                ("trigram", self._arm(conn, "crystals_tri", fts_or(idents), where, fetch))
            )
        n_scoped = 0
        if any(0 < len(ids) < fetch for _, ids in ranked):
            n_scoped = int(
                conn.execute(
                    f"SELECT count(*) FROM crystals c WHERE {sql_where}", params
                ).fetchone()[0]
            )
        weighted: list[tuple[float, list[str]]] = []
        info: dict[str, Any] = {"fetch_width": fetch, "n_scoped": n_scoped, "arms": {}}
        info["trigram"] = self._has_trigram
        for name, ids in ranked:
            sel = selectivity(len(ids), fetch, n_scoped)
            weighted.append((1.0 + sel, ids))
            info["arms"][name] = {"n": len(ids), "selectivity": sel, "weight": 1.0 + sel}
        info["terms"] = {"words": words, "identifiers": idents}
        return rrf_fuse(weighted), info

    @staticmethod
    def _informative(conn: sqlite3.Connection, terms: list[str]) -> list[str]:
        """Drop the words in half the crystals of a store of ``PRUNE_MIN_DOCS`` or more
        while a rarer word remains: BM25 weighs them nothing, yet each pulls in every row."""
        if len(terms) <= 1:
            return terms
        # the word index's own document count: a quarter of the pages of crystals' (ADR 0022)
        (total,) = conn.execute("SELECT count(*) FROM crystals_fts_docsize").fetchone()
        if total < PRUNE_MIN_DOCS:
            return terms
        half = (total + 1) // 2  # df >= half  <=>  df * 2 >= total
        df = _document_frequencies(conn, terms, half)
        kept = [term for term in terms if df.get(term, 0) < half]
        if not any(df.get(term, 0) for term in kept):
            return terms  # nothing informative left: rank on everything
        return kept

    def _arm(
        self, conn: sqlite3.Connection, table: str, match: str, where: Scope, fetch: int
    ) -> list[str]:
        """One arm's first ``fetch`` in-scope matches by (score, id), in fewer reads than one
        query over every match (ADR 0022): the best rows are looked up ``fetch`` at a time
        until the answer is certain; past the prefetched rows, the one query."""
        order = f"bm25({table}, 5.0, 1.0)"
        limit = max(PREFETCH_FACTOR * fetch, PREFETCH_MIN)
        ranked = self._search(
            conn,
            f"SELECT rowid, {order} AS s FROM {table} WHERE {table} MATCH ? ORDER BY s LIMIT ?",
            [match, limit],
        )
        complete = len(ranked) < limit  # every match is in ``ranked``
        sql_where, params = where.where()
        found: list[tuple[float, str]] = []
        rest = 0
        while rest < len(ranked):
            start, rest = rest, min(rest + fetch, len(ranked))
            while (
                rest < len(ranked)
                and rest - start < LOOKUP_MAX
                and ranked[rest][1] == ranked[rest - 1][1]
            ):
                rest += 1  # a run of equal scores is looked up whole: ids order it
            chunk = ranked[start:rest]
            marks = ", ".join("?" for _ in chunk)
            scores = dict(chunk)
            found += [
                (scores[rowid], ident)
                for rowid, ident in conn.execute(
                    # by rowid: left to itself the planner scans the scope index instead
                    f"SELECT c.rowid, c.id FROM crystals c NOT INDEXED WHERE c.rowid IN ({marks})"
                    f" AND {sql_where}",
                    [*scores, *params],
                )
            ]
            found.sort()
            if rest >= len(ranked):  # looked up all: unranked matches score >= the last
                if complete or (len(found) >= fetch and found[fetch - 1][0] < ranked[-1][1]):
                    return [str(ident) for _, ident in found[:fetch]]
                break
            if len(found) >= fetch and found[fetch - 1][0] < ranked[rest][1]:
                return [str(ident) for _, ident in found[:fetch]]
        return [
            str(ident)
            for (ident,) in self._search(
                conn,
                f"SELECT c.id FROM {table} f JOIN crystals c ON c.rowid = f.rowid"
                f" WHERE {table} MATCH ? AND {sql_where} ORDER BY {order}, c.id LIMIT ?",
                [match, *params, fetch],
            )
        ]

    @staticmethod
    def _search(conn: sqlite3.Connection, sql: str, params: list[Any]) -> list[Any]:
        try:
            return conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            if "fts5" in str(exc) or "syntax" in str(exc):  # an odd query: no matches
                return []
            raise

    @staticmethod
    def _rows(conn: sqlite3.Connection, ids: list[str]) -> dict[str, dict[str, Any]]:
        if not ids:
            return {}
        marks = ", ".join("?" for _ in ids)
        cursor = conn.execute(f"SELECT {_RECORD_COLUMNS} FROM crystals WHERE id IN ({marks})", ids)
        names = [column[0] for column in cursor.description]
        return {row[0]: dict(zip(names, row, strict=True)) for row in cursor}

    def _touch(self, conn: sqlite3.Connection, ids: list[str]) -> None:
        """Recall writes, as on the server; a store we cannot write to is still readable."""
        if not ids:
            return
        marks = ", ".join("?" for _ in ids)
        try:
            conn.execute(
                "UPDATE crystals SET access_count = access_count + 1, last_access = ?"
                f" WHERE id IN ({marks})",
                [_now(), *ids],
            )
        except sqlite3.OperationalError:  # read-only or busy past the timeout
            pass

    def stats(self) -> dict[str, Any]:
        base = {"backend": self.backend, "path": str(self.path), "project": self.project}
        try:
            with self._lock:
                conn = self._connection(create=False)
                if conn is None:
                    return {**base, "status": "empty", "crystals": 0}
                total, active = _counts(conn)
                counts = {
                    f"by_{column}": dict(
                        conn.execute(f"SELECT {column}, count(*) FROM crystals GROUP BY {column}")
                    )
                    for column in ("layer", "trust_tier", "validation_state")
                }
        except (sqlite3.Error, OSError) as exc:
            return {**base, "status": "unavailable", "reason": str(exc)}
        files = [os.path.join(self._dir, n) for n in os.listdir(self._dir) if n.startswith(DB_NAME)]
        size = sum(os.path.getsize(f) for f in files if os.path.isfile(f))
        return {
            **base,
            "status": "ok",
            "crystals": total,
            "active": active,
            **counts,
            "trigram": self._has_trigram,
            "bytes": size,
            "schema_version": SCHEMA_VERSION,
        }


def _counts(conn: sqlite3.Connection) -> tuple[int, int]:
    """The store's crystals, all and active (not archived nor superseded)."""
    row = conn.execute(
        "SELECT count(*), coalesce(sum(status = 'active' AND t_valid_to IS NULL), 0) FROM crystals"
    ).fetchone()
    return int(row[0]), int(row[1])


def _document_frequencies(conn: sqlite3.Connection, terms: list[str], cap: int) -> dict[str, int]:
    """How many crystals hold each word, exact below ``cap``: a plain word counted on the
    word index, any other looked up in the vocabulary."""
    df: dict[str, int] = {}
    others = []
    for term in terms:
        if plain_term(term):  # a word unicode61 keeps as it is (ASCII [a-z0-9]+)
            (df[term],) = conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM crystals_fts WHERE crystals_fts MATCH ?"
                " LIMIT ?)",
                (fts_or([term]), cap),
            ).fetchone()
        else:
            others.append(term)
    if others:
        marks = ", ".join("?" for _ in others)
        df.update(
            conn.execute(f"SELECT term, doc FROM crystals_vocab WHERE term IN ({marks})", others)
        )
    return df


def _refuse_links(store_dir: str, db: str) -> None:
    """:class:`OSError` when the store's directory or a database file is a link or not of
    its kind: the gate's state is never reached through a link (ADR 0021)."""
    st = os.lstat(store_dir)
    if st.st_mode & 0o170000 != 0o040000:
        raise OSError(f"{store_dir} is a link or not a directory")
    for name in (db, db + "-wal", db + "-shm", db + "-journal"):
        try:
            st = os.lstat(name)
        except FileNotFoundError:
            continue
        if st.st_mode & 0o170000 != 0o100000:
            raise OSError(f"{name} is a link or not a regular file")
