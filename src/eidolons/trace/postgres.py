"""The shared store: one append-only table on PostgreSQL (ADR 0014).

An append is one transaction under a per-thread advisory lock; the insert trigger checks
the chain link and lets only a login bound as orchestrator stamp a verdict. Reads run in
autocommit. Every wait is bounded by ``EIDOLONS_TRACE_TIMEOUT_S`` on the server and on the
client (:mod:`eidolons.trace.pg_watchdog`); any failure is a read or write error, never a
fall back to a file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping

from eidolons._text import plural
from eidolons.ecl.events import chained, next_link
from eidolons.errors import TraceWriteError, UsageError
from eidolons.io.config import TRACE_TIMEOUT_ENV as TIMEOUT_ENV
from eidolons.io.config import trace_timeout_s
from eidolons.trace.log import TraceLine, decode_line, encode_event, thread_file_name
from eidolons.trace.pg_schema import CURRENT_VERSION, SCHEMA
from eidolons.trace.pg_watchdog import Watchdog
from eidolons.trace.store import (
    Appended,
    TraceReadError,
    TraceStore,
    first_payload_event,
    is_payload_event,
    judged_line,
    looks_like_verdict,
    message_key,
    record_from_line,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    import psycopg

_PASSWORD = re.compile(r"(://[^:/@]*):[^@/]*@")

LAST_LINE = (
    f"SELECT seq, line FROM {SCHEMA}.trace_events WHERE thread = %s ORDER BY seq DESC LIMIT 1"
)
INSERT = (
    f"INSERT INTO {SCHEMA}.trace_events (thread, seq, prev, line, verdict_for, payload_key) "
    "VALUES (%s, %s, %s, %s, %s, %s)"
)
PAYLOADS = (
    f"SELECT line FROM {SCHEMA}.trace_events WHERE payload_key = ANY(%s) ORDER BY thread, seq"
)
LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
VERDICTS = (
    f"SELECT line, verdict_for FROM {SCHEMA}.trace_events WHERE thread = %s "
    "AND verdict_for = %s ORDER BY seq DESC"
)


def redact(dsn: str) -> str:
    """The DSN without its password, for messages."""
    text = _PASSWORD.sub(r"\1:***@", dsn)
    return re.sub(r"(password=)[^&\s]*", r"\1***", text)


def verdict_key(event: Mapping[str, Any]) -> bytes | None:
    """The index key of an event: its message id when it is an orchestrator verdict."""
    mid = event.get("message_id")
    if isinstance(mid, str) and looks_like_verdict(event):
        return message_key(mid)
    return None


def timeout_s() -> float:
    """:func:`eidolons.io.config.trace_timeout_s` (the one rule for every wait on the trace),
    a value it refuses being this store's read error."""
    try:
        return trace_timeout_s()
    except UsageError as exc:
        raise TraceReadError(str(exc)) from None


def payload_key(event: Mapping[str, Any]) -> bytes | None:
    """The index key of an event naming a payload (ADR 0007): its ``payload_path``."""
    key = event.get("payload_path")
    if isinstance(key, str) and is_payload_event(event, [key]):
        return key.encode("utf-8", "surrogatepass")
    return None


def connect(dsn: str, *, bounded: bool = True) -> psycopg.Connection[Any]:
    """An autocommit connection, or :class:`TraceReadError` with the reason. ``bounded``:
    statements and lock waits time out on the server too, and a TCP connection whose
    peer is gone is dropped by keepalives (the gates; not ``store init``). The client's
    own bound on each wait is :class:`Watchdog`'s."""
    import psycopg

    limit = timeout_s()
    kwargs: dict[str, Any] = {"autocommit": True}
    if "connect_timeout" not in dsn:
        kwargs["connect_timeout"] = max(2, math.ceil(limit))  # libpq's minimum is 2 s
    if bounded and "options" not in dsn:
        ms = max(1, round(limit * 1000))
        kwargs["options"] = f"-c statement_timeout={ms} -c lock_timeout={ms}"
    if bounded and "keepalives" not in dsn and "tcp_user_timeout" not in dsn:
        # TCP only (libpq ignores them on a Unix socket): a peer host that is gone
        kwargs.update(
            keepalives=1,
            keepalives_idle=max(1, math.ceil(limit)),
            keepalives_interval=1,
            keepalives_count=3,
            tcp_user_timeout=max(1, round(limit * 1000)),
        )
    try:
        return psycopg.connect(dsn, **kwargs)
    except psycopg.Error as exc:
        raise TraceReadError(f"cannot connect to {redact(dsn)}: {reason(exc)}") from None


def reason(exc: BaseException) -> str:
    """One line: the server's own message (never the PL/pgSQL context under it), or
    the client's."""
    diag = getattr(exc, "diag", None)
    primary = getattr(diag, "message_primary", None)
    text = " ".join((primary or str(exc)).split())
    return text or exc.__class__.__name__


class PostgresStore(TraceStore):
    kind = "postgresql"

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._conn: psycopg.Connection[Any] | None = None
        self._watch: Watchdog | None = None
        self._stuck: str | None = None  # the server did not answer: never asked again

    def describe(self) -> str:
        return redact(self.dsn)

    def location(self, thread_id: str | None) -> str:
        return f"{redact(self.dsn)} thread={thread_file_name(thread_id)}"

    def connection(self) -> psycopg.Connection[Any]:
        """The open connection, made and checked (schema version) when there is none. A
        store whose server once did not answer within the timeout fails at once: the
        gate holding it is bounded by one timeout, not by one per operation."""
        if self._stuck is not None:
            raise TraceReadError(self._stuck)
        if self._conn is None or self._conn.closed:
            conn = connect(self.dsn)
            watch = Watchdog(conn, timeout_s())
            try:
                version = self._schema_version(conn, watch)
            except BaseException:
                conn.close()
                raise
            if version != CURRENT_VERSION:
                conn.close()
                found = "not initialised" if version is None else f"at version {version}"
                raise TraceReadError(
                    f"trace schema on {redact(self.dsn)} is {found}; this eidolons needs "
                    f"version {CURRENT_VERSION} (run: eidolons trace store init)"
                )
            self._conn, self._watch = conn, watch
        return self._conn

    def _schema_version(self, conn: psycopg.Connection[Any], watch: Watchdog) -> int | None:
        import psycopg

        try:
            with watch.bound():
                table = conn.execute("SELECT to_regclass(%s)", (f"{SCHEMA}.trace_events",))
                if table.fetchone() == (None,):
                    return None
                row = conn.execute(f"SELECT max(version) FROM {SCHEMA}.schema_version").fetchone()
        except psycopg.Error as exc:
            timed_out = self._timed_out(watch)
            if timed_out is not None:
                self._stuck = timed_out
            raise TraceReadError(
                f"cannot read the trace schema: {timed_out or reason(exc)}"
            ) from None
        return None if row is None else row[0]

    def _timed_out(self, watch: Watchdog | None) -> str | None:
        if watch is None or not watch.fired:
            return None
        return (
            f"timeout: no answer from {self.describe()} within {watch.limit:g} s "
            f"({TIMEOUT_ENV}); the connection was closed"
        )

    def _failure(self, exc: BaseException) -> str:
        """Why the last operation failed, in one line; the connection is dropped."""
        timed_out = self._timed_out(self._watch)
        if timed_out is not None:
            self._stuck = timed_out
        self.close()
        return timed_out or f"{self.describe()}: {reason(exc)}"

    def _bound(self) -> Any:
        assert self._watch is not None  # set with the connection
        return self._watch.bound()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn, self._watch = None, None

    def _read(
        self, sql: str, params: tuple[Any, ...], stream: bool = False
    ) -> Iterator[tuple[Any, ...]]:
        """Rows of one query. ``stream``: row by row (a whole thread is never held in
        memory; single-row mode costs milliseconds, so the lookups fetch at once)."""
        import psycopg

        try:
            with self.connection().cursor() as cur:
                if not stream:
                    with self._bound():
                        cur.execute(sql, params)
                        rows = cur.fetchall()
                    yield from rows
                    return
                rows_of = cur.stream(sql, params)
                while True:
                    with self._bound():  # each row's wait, never the reader's own time
                        row = next(rows_of, None)
                    if row is None:
                        return
                    yield row
        except psycopg.Error as exc:
            raise TraceReadError(f"cannot read the trace store: {self._failure(exc)}") from None

    def _insert_after_tail(
        self,
        thread: str,
        build: Callable[[bytes | None, int], list[tuple[Any, ...]]],
        failure: str,
    ) -> None:
        """One append transaction: connect, take the thread's lock, read its last line
        and insert the rows ``build(last_line, last_seq)`` returns, under that lock."""
        import psycopg

        try:
            conn = self.connection()
        except TraceReadError as exc:
            raise TraceWriteError(str(exc)) from None
        try:
            with self._bound(), conn.transaction(), conn.cursor() as cur:
                cur.execute(LOCK, (thread,))
                row = cur.execute(LAST_LINE, (thread,)).fetchone()
                rows = build(bytes(row[1]), row[0]) if row else build(None, 0)
                cur.executemany(INSERT, rows)
        except psycopg.Error as exc:
            raise TraceWriteError(f"{failure}: {self._failure(exc)}") from None

    def append(self, thread_id: str | None, event: Mapping[str, Any]) -> Appended:
        thread = thread_file_name(thread_id)
        out: list[tuple[dict[str, Any], bytes]] = []

        def build(last: bytes | None, last_seq: int) -> list[tuple[Any, ...]]:
            seq, prev = next_link(last, last_seq)
            linked = chained(event, seq, prev)
            line = encode_event(linked)[:-1]
            out.append((linked, line))
            return [(thread, seq, prev, line, verdict_key(linked), payload_key(linked))]

        self._insert_after_tail(thread, build, "cannot append to the trace store")
        linked, line = out[0]
        return Appended(linked, line, self.location(thread_id))

    def append_lines(self, thread_id: str, lines: list[bytes], after: int | None = None) -> int:
        """Append exact line bytes (an import), continuing the thread's chain; each line
        is indexed as :meth:`append` would. With ``after``, refuse unless the thread still
        holds exactly that many lines (nobody appended since the caller looked). Returns
        the number appended."""
        thread = thread_file_name(thread_id)

        def build(last: bytes | None, last_seq: int) -> list[tuple[Any, ...]]:
            if after is not None and last_seq != after:
                raise TraceWriteError(
                    f"thread {thread} changed while it was copied ({plural(last_seq, 'line')}, "
                    f"expected {after}); run the copy again"
                )
            rows: list[tuple[Any, ...]] = []
            for raw in lines:
                seq, prev = next_link(last, last_seq)
                event = decode_line(raw, seq).event
                keys = (verdict_key(event), payload_key(event)) if event else (None, None)
                rows.append((thread, seq, prev, raw, *keys))
                last, last_seq = raw, seq
            return rows

        self._insert_after_tail(thread, build, "cannot import into the trace store")
        return len(lines)

    def latest_verdict(self, thread_id: str | None, message_id: str) -> dict[str, Any] | None:
        params = (thread_file_name(thread_id), message_key(message_id))
        for line, stamp in self._read(VERDICTS, params):
            record = record_from_line(bytes(line), message_id, bytes(stamp))
            if record is not None:
                return record
        return None

    def iter_raw(self, thread_id: str | None) -> Iterator[bytes]:
        return (raw for raw, _, _ in self.iter_stamped(thread_id))

    def iter_stamped(
        self, thread_id: str | None
    ) -> Iterator[tuple[bytes, bytes | None, str | None]]:
        """Each line with its row's ``verdict_for`` (the stamp the trigger allows only a
        login bound as orchestrator to set) and ``written_by`` (the trigger sets it)."""
        sql = (
            f"SELECT line, verdict_for, written_by FROM {SCHEMA}.trace_events "
            "WHERE thread = %s ORDER BY seq"
        )
        for line, stamp, writer in self._read(sql, (thread_file_name(thread_id),), stream=True):
            yield bytes(line), None if stamp is None else bytes(stamp), str(writer)

    def iter_thread(self, thread_id: str | None) -> Iterator[TraceLine]:
        """Decoded, and judged by the one record rule: a row that reads as an
        orchestrator verdict the gate would not count says so (``not_counted``); each
        with the login that wrote it (``written_by``)."""
        for n, (raw, stamp, writer) in enumerate(self.iter_stamped(thread_id), 1):
            yield judged_line(raw, n, stamp, writer)

    def find_payload(self, keys: list[str]) -> dict[str, Any] | None:
        """As the JSONL store (threads in order, first line first), by one index."""
        if not keys:
            return None
        params = ([k.encode("utf-8", "surrogatepass") for k in keys],)
        return first_payload_event((bytes(line) for (line,) in self._read(PAYLOADS, params)), keys)

    def read_new(self, thread_id: str | None, cursor: int) -> tuple[list[TraceLine], int]:
        sql = (
            f"SELECT seq, line, verdict_for, written_by FROM {SCHEMA}.trace_events "
            "WHERE thread = %s AND seq > %s ORDER BY seq"
        )
        out = []
        for seq, line, stamp, writer in self._read(sql, (thread_file_name(thread_id), cursor)):
            stamp = None if stamp is None else bytes(stamp)
            out.append(judged_line(bytes(line), seq, stamp, str(writer)))
            cursor = seq
        return out, cursor

    def has_thread(self, thread_id: str) -> bool:
        sql = f"SELECT 1 FROM {SCHEMA}.trace_events WHERE thread = %s LIMIT 1"
        return any(True for _ in self._read(sql, (thread_file_name(thread_id),)))

    def threads(self) -> list[str]:
        # a skip scan over the (thread, seq) index: one probe per thread, not per row
        sql = f"""
            WITH RECURSIVE t(thread) AS (
              SELECT min(thread) FROM {SCHEMA}.trace_events
              UNION ALL
              SELECT (SELECT min(e.thread) FROM {SCHEMA}.trace_events e WHERE e.thread > t.thread)
              FROM t WHERE t.thread IS NOT NULL
            )
            SELECT thread FROM t WHERE thread IS NOT NULL"""
        return [name for (name,) in self._read(sql, ())]
