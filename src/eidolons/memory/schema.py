"""The local store's SQLite schema, its creation and its upgrades (ADR 0021).

Tables: ``meta`` (``schema_version``; ``trigram``, 1 when SQLite has the trigram tokenizer),
``crystals`` (one row per crystal; the index ``crystals_live`` covers every scope column a
recall filters on), ``crystals_fts`` (``unicode61`` words of ``summary`` and
``body_excerpt``), ``crystals_tri`` (``trigram`` of ``summary`` and ``tri_body``, the
excerpt's identifier-like tokens) and ``crystals_vocab`` (the word index's vocabulary). Both
FTS indexes are external-content tables kept in step by triggers.

A store is created or upgraded (from schema 1 or 2) in one transaction under an exclusive
``flock`` on ``<store>/.create.lock``, where its journal mode is set once; the lock is
waited for until the trace timeout, then :class:`OSError`. A newer schema is refused, never
downgraded.
"""

from __future__ import annotations

import os

try:  # what sqlite3 re-exports, without sqlite3.dbapi2's datetime adapters (ADR 0021)
    import _sqlite3 as sqlite3
except ImportError:  # an interpreter without it: the public module
    import sqlite3  # type: ignore[no-redef]

from eidolons.io.files import deadline, flock_until
from eidolons.memory.rules import identifier_text

TYPE_CHECKING = False  # as typing.TYPE_CHECKING: typing is not imported at memory open
if TYPE_CHECKING:
    from typing import Final

DB_NAME: Final = "memory.sqlite3"
CREATION_LOCK: Final = ".create.lock"
SCHEMA_VERSION: Final = "3"
"""1: the first store; 2: ``crystals.handoff_key`` (ADR 0021); 3: the trigram index holds
identifier-like tokens only, and the scope index covers every scope column (ADR 0021)."""
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
_DROP_TRIGRAM: Final = (
    "DROP TRIGGER IF EXISTS crystals_tri_ai",
    "DROP TRIGGER IF EXISTS crystals_tri_ad",
    "DROP TRIGGER IF EXISTS crystals_tri_au",
    "DROP TABLE IF EXISTS crystals_tri",
)


class creation_lock:  # a class, not contextlib's: no contextlib at open
    """``with creation_lock(store_dir):`` an exclusive ``flock`` on the creation lock,
    waited for until the trace timeout (:class:`eidolons.io.files.LockTimeout`)."""

    __slots__ = ("_fd", "_path")

    def __init__(self, store_dir: str | os.PathLike[str]) -> None:
        self._path = os.path.join(os.fspath(store_dir), CREATION_LOCK)
        self._fd = -1

    def __enter__(self) -> None:
        # never through a planted link (the gate's state, ADR 0021)
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        try:
            flock_until(fd, deadline(), self._path)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def __exit__(self, *exc: object) -> None:
        fd, self._fd = self._fd, -1
        os.close(fd)  # releases the lock


def _ensure_wal(conn: sqlite3.Connection) -> None:
    """Set WAL (persistent in the file) when it is not set yet; under the creation lock."""
    mode = conn.execute("PRAGMA journal_mode").fetchone()
    if mode is None or str(mode[0]).lower() != "wal":
        conn.execute("PRAGMA journal_mode = WAL")


def stored_version(conn: sqlite3.Connection) -> str | None:
    """The store's ``schema_version``, or None when it has none (not created yet)."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.OperationalError:  # no meta table yet
        return None
    return None if row is None else str(row[0])


def has_trigram(conn: sqlite3.Connection) -> bool:
    row = conn.execute("SELECT value FROM meta WHERE key = 'trigram'").fetchone()
    return row is not None and str(row[0]) == "1"


def ready(conn: sqlite3.Connection, *, create: bool, store_dir: str | os.PathLike[str]) -> bool:
    """Bring the store to :data:`SCHEMA_VERSION`: create it (``create``), upgrade it or
    leave it. False when there is none and not ``create``; :class:`SchemaError` when newer."""
    version = stored_version(conn)
    if version == SCHEMA_VERSION:
        return True
    if version is None and not create:
        return False
    if version is not None and version not in UPGRADABLE:
        raise SchemaError(f"memory store schema {version!r} is newer than this eidolons knows")
    with creation_lock(store_dir):
        _ensure_wal(conn)
        version = stored_version(conn)  # another process may have done it meanwhile
        if version == SCHEMA_VERSION:
            return True
        if version is not None and version not in UPGRADABLE:
            raise SchemaError(f"memory store schema {version!r} is newer than this eidolons knows")
        _build(conn)
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
    """(Re)build the trigram index from every row's identifier tokens, dropping an older
    one first; ``"0"`` when SQLite has no trigram tokenizer (< 3.34), else ``"1"``."""
    for statement in _DROP_TRIGRAM:
        conn.execute(statement)
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
