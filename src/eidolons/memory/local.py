"""The embedded memory: a SQLite + FTS5 store that answers like a CRYSTALIUM server.

One file, ``<store_dir>/memory.sqlite3`` (:mod:`eidolons.memory.schema`), in WAL mode and
shared by every gate process of the project. ``ingest`` refuses what
:func:`~eidolons.memory.mapping.validate_envelope` refuses, then stores one ``episodic``
crystal, or merges a repeat of ``(project, message_id, artifact.sha256)`` or of the hand-off's
content key (ADR 0021). ``recall`` keeps in SQL the rows of the project, active, of the chosen
layers and visible to the caller's class; ranks them with two arms, BM25 over words and a
trigram match of the query's identifier-like tokens (ADRs 0021, 0022); fuses the arms
by weighted reciprocal rank; packs the first ``k`` into the server's token budget. Where the
store differs from the server: ADR 0021.
"""

from __future__ import annotations

import os
from _thread import RLock  # what threading.RLock returns; threading is not imported at open
from collections.abc import Mapping, Sequence

from eidolons.ecl.integrity import sha256_hex  # builtin SHA-256 first: no OpenSSL at open
from eidolons.memory import (
    BACKEND_LOCAL,
    SLOT_CAPS,
    TOTAL_TOKEN_CAP,
    check_recall_args,
    clamp_k,
    empty_recall,
    error_result,
    input_error,
    schema,
    skipped_ingest,
    skipped_recall,
)
from eidolons.memory.rules import (
    RRF_K,
    LocalLimits,
    _get,
    _now,
    _parse_ts,
    decode_payload,
    estimate_tokens,
    fts_or,
    handoff_key,
    identifier_text,
    plain_term,
    provenance_source,
    redact,
    rrf_fuse,
    selectivity,
    summary_of,
    trigram_terms,
    trust_tier,
    validate_envelope,
    validation_state,
    word_terms,
)
from eidolons.memory.schema import sqlite3  # type: ignore[attr-defined]  # schema.py: which module

TYPE_CHECKING = False  # as typing.TYPE_CHECKING: typing is not imported at memory open
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, Final

PREFETCH_FACTOR: Final = 10
PREFETCH_MIN: Final = 300
"""An arm ranks its best ``max(PREFETCH_FACTOR x fetch, PREFETCH_MIN)`` matches before
the scope is judged; past them it runs over every match (ADR 0022)."""
LOOKUP_MAX: Final = 500  # ranked rows looked up per statement (SQLite's oldest limit: 999)
WAL_CHECKPOINT_PAGES: Final = 4000  # fewer checkpoints, each two fsyncs (ADR 0021)
PRUNE_MIN_DOCS: Final = 1000


def _new_id() -> str:
    """A new record id (``uuid`` imports ``platform``: not for a recall or a merge, ADR 0022)."""
    import uuid

    return str(uuid.uuid4())


_RECORD_COLUMNS: Final = (
    "id, layer, summary, trust_tier, validation_state, importance, last_access, content_ref, "
    "sensitivity_tag"
)


class _Scope:
    """Which rows a recall may see (a plain class: no :mod:`dataclasses` at open)."""

    __slots__ = ("layers", "project", "visibility")

    def __init__(self, project: str, visibility: str | None, layers: tuple[str, ...]) -> None:
        self.project = project
        self.visibility = visibility
        self.layers = layers

    def where(self, alias: str = "c") -> tuple[str, list[Any]]:
        marks = ", ".join("?" for _ in self.layers)
        sql = (
            f"{alias}.project = ? AND {alias}.status = 'active' AND {alias}.t_valid_to IS NULL "
            f"AND {alias}.layer IN ({marks})"
        )
        params: list[Any] = [self.project, *self.layers]
        if self.visibility is not None:
            sql += (
                f" AND ({alias}.agent_class_visibility IS NULL"
                f" OR {alias}.agent_class_visibility IN ('all', ?))"
            )
            params.append(self.visibility)
        return sql, params


class LocalMemory:
    """The embedded backend. Thread-safe; one SQLite connection per object, opened lazily."""

    backend = BACKEND_LOCAL

    def __init__(
        self, store_dir: str | os.PathLike[str], *, project: str, limits: LocalLimits | None = None
    ) -> None:
        # strings inside: no pathlib at open (ADR 0021)
        self._dir = os.fspath(store_dir)
        self._db = os.path.join(self._dir, schema.DB_NAME)
        self._project = project
        self.limits = limits or LocalLimits()
        self._conn: sqlite3.Connection | None = None
        self._has_trigram = False
        self._lock = RLock()

    @property
    def store_dir(self) -> Path:
        from pathlib import Path

        return Path(self._dir)

    @property
    def path(self) -> Path:
        """The store's SQLite file."""
        from pathlib import Path

        return Path(self._db)

    @property
    def project(self) -> str:
        return self._project

    # -- connection ---------------------------------------------------------------------

    def _connection(self, *, create: bool) -> sqlite3.Connection | None:
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
        try:
            # the journal mode is set under the creation lock only (ADR 0021)
            conn.execute(f"PRAGMA busy_timeout = {int(self.limits.busy_timeout_ms)}")
            # durable against the process's death, not a power cut, as the trace (ADR 0021)
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}")
            if not schema.ready(conn, create=create, store_dir=self._dir):
                conn.close()
                return None
            self._has_trigram = schema.has_trigram(conn)
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

    # -- ingest -------------------------------------------------------------------------

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
        if payload is None:
            return input_error("'payload' is a required property", self.backend)
        if not isinstance(payload, bytes | bytearray | memoryview | str | Mapping | list):
            return input_error(f"{payload!r} is not of type 'object', 'string'", self.backend)
        if payload_encoding not in ("utf8", "base64", "json"):
            return input_error(
                f"{payload_encoding!r} is not one of ['utf8', 'base64', 'json']", self.backend
            )
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
        artifact, sender = envelope["artifact"], envelope["from"]
        tier = trust_tier(envelope)
        state = validation_state(tier, gated)
        key = handoff_key(envelope)
        kind, objective = str(artifact["kind"]), str(envelope["objective"])
        message_id, sha = str(envelope["message_id"]), str(artifact["sha256"])
        version = str(envelope["envelope_version"])
        thread_id = envelope.get("thread_id")
        project_raw = str(thread_id) if thread_id else f"eidolon:{sender['eidolon']}"
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
                native, excerpt, notes = decode_payload(payload, payload_encoding, self.limits)
                now = _now()
                created_at = _parse_ts(_get(envelope, "trace.ts")) or now
                crystal: dict[str, Any] = {
                    "summary": summary_of(kind, objective, self.limits.summary_chars),
                    "scope": {
                        "project": self.project,
                        "project_raw": project_raw,
                        "sensitivity_tag": "internal",
                    },
                    "provenance": {
                        "source": provenance_source(tier),
                        "author_agent": sender["eidolon"],
                        "task_id": thread_id,
                        "created_at": created_at,
                    },
                    "tags": [kind, f"from:{sender['eidolon']}", f"env:{version}"],
                    "encoding_context": {
                        "native_artifact": native,
                        "envelope_version": version,
                        "artifact_kind": kind,
                        "artifact_schema_version": artifact.get("schema_version"),
                        "source_thread_id": thread_id,
                        "source_message_id": message_id,
                        "source_performative": envelope.get("performative"),
                        **notes,
                    },
                }
                import json  # a new crystal only: a merge imports no json (ADR 0021)

                blob = json.dumps(crystal, ensure_ascii=False, sort_keys=True, default=str)
                ident = _new_id()
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
            conn.execute("ROLLBACK")
            raise
        result: dict[str, Any] = {
            "status": "ingested",
            "id": stored[0],
            "layer": "episodic",
            "trust_tier": stored[1],
            "validation_state": stored[2],
            "source_eidolon": sender["eidolon"],
            "artifact_kind": kind,
            "envelope_version": version,
            "commit_status": commit_status,
        }
        if project_raw != self.project:
            result["scope_normalized"] = True
        result["backend"] = self.backend
        return result

    # -- recall -------------------------------------------------------------------------

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
        where = _Scope(
            project=scope.get("project") or self.project,
            visibility=scope.get("agent_class_visibility"),
            layers=layers,
        )
        fused, info = self._rank(conn, where, query, k, arms=("words", "trigram"))
        chosen = fused[:k]
        rows = self._rows(conn, [ident for ident, _ in chosen])
        records: list[dict[str, Any]] = []
        slots = dict.fromkeys(SLOT_CAPS, 0)
        total = evicted = 0
        for ident, score in chosen:
            row = rows.get(ident)
            if row is None:
                continue
            summary = redact(row["summary"], row["sensitivity_tag"])
            cost = estimate_tokens(summary)
            slot = row["layer"]
            if slots[slot] + cost > SLOT_CAPS[slot] or total + cost > TOTAL_TOKEN_CAP:
                evicted += 1
                continue
            slots[slot] += cost
            total += cost
            records.append(
                {
                    "id": ident,
                    "layer": row["layer"],
                    "summary": summary,
                    "trust_tier": row["trust_tier"],
                    "validation_state": row["validation_state"],
                    "importance": row["importance"],
                    "last_access": row["last_access"],
                    "content_ref": row["content_ref"],
                    "score": score,
                }
            )
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
            result["explain"] = self._explain(conn, where, info, k, len(fused))
        result["backend"] = result.pop("backend")  # keep "backend" last
        return result

    def _rank(
        self,
        conn: sqlite3.Connection,
        where: _Scope,
        query: str,
        k: int,
        *,
        arms: tuple[str, ...],
    ) -> tuple[list[tuple[str, float]], dict[str, Any]]:
        fetch = max(3 * k, 30)
        sql_where, params = where.where("c")
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
        for name, ids in ranked:
            sel = selectivity(len(ids), fetch, n_scoped)
            weighted.append((1.0 + sel, ids))
            info["arms"][name] = {"n": len(ids), "selectivity": sel, "weight": 1.0 + sel}
        info["terms"] = {"words": words, "identifiers": idents}
        return rrf_fuse(weighted), info

    @staticmethod
    def _informative(conn: sqlite3.Connection, terms: list[str]) -> list[str]:
        """Drop query words in at least half of the crystals of a store of at least
        ``PRUNE_MIN_DOCS``, while a word in fewer remains: BM25 gives them no weight, yet
        each pulls nearly every row into the candidates."""
        if len(terms) <= 1:
            return terms
        # the word index's own document count, the N of its BM25: a quarter of the pages
        # a count of ``crystals`` reads (ADR 0022)
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
        self, conn: sqlite3.Connection, table: str, match: str, where: _Scope, fetch: int
    ) -> list[str]:
        """One arm's first ``fetch`` in-scope matches by (score, id), as one query over
        every match would rank them, in fewer reads (ADR 0022): the FTS table ranks alone,
        the best rows are looked up ``fetch`` at a time until the answer is certain, and
        past the prefetched rows the arm runs once over every match."""
        order = f"bm25({table}, 5.0, 1.0)"
        limit = max(PREFETCH_FACTOR * fetch, PREFETCH_MIN)
        ranked = self._search(
            conn,
            f"SELECT rowid, {order} AS s FROM {table} WHERE {table} MATCH ? ORDER BY s LIMIT ?",
            [match, limit],
        )
        complete = len(ranked) < limit  # every match is in ``ranked``
        sql_where, params = where.where("c")
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

    def _explain(
        self,
        conn: sqlite3.Connection,
        where: _Scope,
        info: dict[str, Any],
        k: int,
        n_fused: int,
    ) -> dict[str, Any]:
        total, active = _counts(conn)
        keys = [row[0] for row in conn.execute("SELECT DISTINCT project FROM crystals")]
        arms = info["arms"]
        return {
            "candidates_prefilter": n_fused,
            "filtered_by_status": 0,
            "filtered_by_scope": 0,
            "arms": {
                "bm25": "on",
                "trigram": "on" if self._has_trigram else "off(no_tokenizer)",
                "dense": "inactive(null_vector_store)",
                "graph": "off",
            },
            "store": {"total_crystals": total, "active": active, "embedded": 0},
            "project_keys_present": sorted(keys),
            "k_applied": k,
            "truncated_by_k": n_fused > k,
            "fusion": {
                "weighted": True,
                "k_rrf": RRF_K,
                "w_sparse": arms.get("bm25", {}).get("weight", 0.0),
                "w_trigram": arms.get("trigram", {}).get("weight", 0.0),
                "n_sparse": arms.get("bm25", {}).get("n", 0),
                "n_trigram": arms.get("trigram", {}).get("n", 0),
                "n_scoped": info["n_scoped"],
                "fetch_width": info["fetch_width"],
                "terms": info["terms"],
                "filters": "applied in SQL before ranking",
                "scope": {"project": where.project, "agent_class_visibility": where.visibility},
            },
        }

    # -- stats --------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        base: dict[str, Any] = {
            "backend": self.backend,
            "path": str(self.path),
            "project": self.project,
        }
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
        files = self.store_dir.glob(schema.DB_NAME + "*")
        size = sum(p.stat().st_size for p in files if p.is_file())
        return {
            **base,
            "status": "ok",
            "crystals": total,
            "active": active,
            **counts,
            "trigram": self._has_trigram,
            "bytes": size,
            "schema_version": schema.SCHEMA_VERSION,
        }


def _counts(conn: sqlite3.Connection) -> tuple[int, int]:
    """The store's crystals, all and active (not archived nor superseded)."""
    row = conn.execute(
        "SELECT count(*), coalesce(sum(status = 'active' AND t_valid_to IS NULL), 0) FROM crystals"
    ).fetchone()
    return int(row[0]), int(row[1])


def _document_frequencies(conn: sqlite3.Connection, terms: list[str], cap: int) -> dict[str, int]:
    """How many crystals hold each word, exact below ``cap``: a plain word is counted on
    the word index, stopping at the cap; any other (one the tokenizer splits or folds) is
    looked up in the vocabulary under its own spelling."""
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
    """Raise :class:`OSError` when the store's directory or a file of its database is a
    link or not of its kind: the gate's state is never reached through a link (ADR 0021).
    The store is then unavailable: memory is skipped, the verdict unchanged."""
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
