"""``eidolons trace store init`` and ``doctor``'s report of what a login may do (ADR 0014).

Authority is bound to this database: each ``--grant-*`` login is a row of
``eidolons.writers`` with CONNECT, USAGE, SELECT and INSERT here, and CONNECT is revoked
from PUBLIC. An upgrade from the cluster-wide roles must be told which logins to keep.
One transaction, serialised by an advisory lock.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field

from eidolons.errors import TraceWriteError, UsageError
from eidolons.trace import pg_schema
from eidolons.trace.log import decode_line
from eidolons.trace.pg_schema import (
    BOUND_VERSION,
    GATE,
    LEGACY_ORCHESTRATOR_ROLE,
    LEGACY_ROLES,
    ORCHESTRATOR,
    SCHEMA,
)
from eidolons.trace.postgres import connect, payload_key, reason, redact, timeout_s
from eidolons.trace.store import TraceReadError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    import psycopg

INIT_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('eidolons-init', 0))"
LEGACY_MEMBERS = """
SELECT m.rolname, r.rolname FROM pg_auth_members a
  JOIN pg_roles r ON r.oid = a.roleid JOIN pg_roles m ON m.oid = a.member
 WHERE r.rolname = ANY(%s) AND NOT m.rolname = ANY(%s)
 ORDER BY m.rolname"""
BIND = (
    f"INSERT INTO {SCHEMA}.writers (login, authority) VALUES (%s, %s) "
    "ON CONFLICT (login) DO UPDATE SET authority = EXCLUDED.authority "
    f"WHERE EXCLUDED.authority = '{ORCHESTRATOR}'"
)
WRITERS = (
    f"SELECT w.login, w.authority, r.rolname IS NOT NULL FROM {SCHEMA}.writers w "
    "LEFT JOIN pg_roles r ON r.rolname = w.login ORDER BY w.login"
)


def _one(conn: psycopg.Connection[Any], query: str, params: tuple[Any, ...] = ()) -> Any:
    row = conn.execute(query, params).fetchone()
    return None if row is None else row[0]


@dataclass
class InitResult:
    """What ``trace store init`` did: the database, the schema version and the
    migrations applied, the logins bound here by authority, and the members of the old
    cluster-wide roles that an upgrade left out."""

    database: str
    version: int
    applied: list[int]
    bound: dict[str, list[str]] = field(default_factory=dict)
    left_out: list[tuple[str, str]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # bound here, no such role any more


def init_schema(
    dsn: str, grant_gate: Iterable[str] = (), grant_orchestrator: Iterable[str] = ()
) -> InitResult:
    """Create or migrate the schema and bind the logins given, as a role that owns the
    database (module docstring). Raises :class:`UsageError` when an upgrade must be told
    which logins to keep, :class:`TraceWriteError` when the store refuses."""
    import psycopg

    wanted = dict.fromkeys(grant_gate, GATE)  # login -> authority; named for both: orchestrator
    wanted.update(dict.fromkeys(grant_orchestrator, ORCHESTRATOR))
    conn = connect(dsn, bounded=False)
    try:
        with conn.transaction():
            conn.execute(INIT_LOCK)
            conn.execute(pg_schema.BOOTSTRAP)
            have = _one(conn, f"SELECT max(version) FROM {SCHEMA}.schema_version") or 0
            current = pg_schema.MIGRATIONS[-1][0]
            if have > current:
                raise TraceWriteError(
                    f"the trace schema is at version {have}, newer than this eidolons "
                    f"({current}): upgrade eidolons"
                )
            left_out: list[tuple[str, str]] = []
            if 0 < have < BOUND_VERSION:
                members = _legacy_members(conn)
                if members and not wanted:
                    raise UsageError(_keep_which(dsn, members))
                left_out = [(m, a) for m, a in members if m not in wanted]
            _check_roles(conn, wanted)
            applied = _migrate(conn, have)
            database = str(_one(conn, "SELECT current_database()"))
            result = InitResult(database, current, applied, left_out=left_out)
            if current >= BOUND_VERSION:
                _bind(conn, wanted, result)
    except psycopg.Error as exc:
        raise TraceWriteError(f"trace store init on {redact(dsn)} failed: {reason(exc)}") from None
    finally:
        conn.close()
    return result


def _legacy_members(conn: psycopg.Connection[Any]) -> list[tuple[str, str]]:
    """The members of the old cluster-wide roles, each with the authority it had."""
    roles = list(LEGACY_ROLES)
    found: dict[str, str] = {}
    for member, role in conn.execute(LEGACY_MEMBERS, (roles, roles)):
        if role == LEGACY_ORCHESTRATOR_ROLE or member not in found:
            found[member] = ORCHESTRATOR if role == LEGACY_ORCHESTRATOR_ROLE else GATE
    return sorted(found.items())


def _keep_which(dsn: str, members: list[tuple[str, str]]) -> str:
    flags = [arg for login, authority in members for arg in (f"--grant-{authority}", login)]
    command = shlex.join(["eidolons", "trace", "store", "init", "--dsn", redact(dsn), *flags])
    names = ", ".join(f"{login} ({authority})" for login, authority in members)
    roles = " and ".join(LEGACY_ROLES)
    return (
        f"the trace store on {redact(dsn)} was made when its roles ({roles}) were shared "
        f"by every database of the cluster; their members are {names}, and init cannot "
        "tell which of them are this database's hosts. Name this project's logins with "
        "--grant-orchestrator/--grant-gate and leave out other databases' (the others "
        f"lose their access here); to keep them all, run: {command}"
    )


def _check_roles(conn: psycopg.Connection[Any], wanted: dict[str, str]) -> None:
    if not wanted:
        return
    rows = conn.execute("SELECT rolname FROM pg_roles WHERE rolname = ANY(%s)", (list(wanted),))
    missing = sorted(set(wanted) - {name for (name,) in rows})
    if missing:
        raise TraceWriteError(
            f"no role named {', '.join(missing)} on this cluster: create the login first "
            "(CREATE ROLE ... LOGIN), then bind it"
        )


def _migrate(conn: psycopg.Connection[Any], have: int) -> list[int]:
    applied = []
    for version, script in pg_schema.MIGRATIONS:
        if version > have:
            conn.execute(script)
            if version in pg_schema.BACKFILL and have:
                _backfill(conn, pg_schema.BACKFILL[version])
            conn.execute(f"INSERT INTO {SCHEMA}.schema_version (version) VALUES (%s)", (version,))
            applied.append(version)
    return applied


def _bind(conn: psycopg.Connection[Any], wanted: dict[str, str], result: InitResult) -> None:
    """The logins given become this database's writers; every writer (a copy of a
    database made from another has the writers, not its CONNECT) gets its rights here;
    nobody else may connect."""
    from psycopg import sql

    db = sql.Identifier(result.database)
    conn.execute(sql.SQL("REVOKE CONNECT, TEMPORARY ON DATABASE {} FROM PUBLIC").format(db))
    for login, authority in wanted.items():
        conn.execute(BIND, (login, authority))
    for login, authority, exists in conn.execute(WRITERS).fetchall():
        if not exists:
            result.missing.append(login)
            continue
        result.bound.setdefault(authority, []).append(login)
        who = sql.Identifier(login)
        for grant in (
            "GRANT CONNECT ON DATABASE {db} TO {who}",
            "GRANT USAGE ON SCHEMA {schema} TO {who}",
            "GRANT SELECT, INSERT ON {schema}.trace_events TO {who}",
            "GRANT SELECT ON {schema}.schema_version, {schema}.writers TO {who}",
        ):
            conn.execute(sql.SQL(grant).format(db=db, who=who, schema=sql.Identifier(SCHEMA)))


def _backfill(conn: psycopg.Connection[Any], column: str) -> None:
    """Give the rows written before a migration its new index column, by the Python rule
    an append uses; the append-only trigger is lifted for this one UPDATE, in the
    migration's transaction."""
    derive = {"payload_key": payload_key}[column]
    table = f"{SCHEMA}.trace_events"
    conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER trace_events_no_change")
    rows = conn.execute(f"SELECT id, line FROM {table}").fetchall()
    updates = []
    for row_id, line in rows:
        event = decode_line(bytes(line), 0).event
        key = derive(event) if event else None
        if key is not None:
            updates.append((key, row_id))
    with conn.cursor() as cur:
        cur.executemany(f"UPDATE {table} SET {column} = %s WHERE id = %s", updates)
    conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER trace_events_no_change")


# -- doctor


@dataclass
class Authority:
    """A login's standing in one store: ``problems`` (each one line) and a summary."""

    summary: str
    problems: list[str] = field(default_factory=list)


UPGRADE = "run eidolons trace store init as the database's administrator (ADR 0014)"


def authority_report(dsn: str) -> Authority:
    """What the login of ``dsn`` may do in its database (module docstring). Raises
    :class:`TraceReadError` when the store cannot be asked."""
    import psycopg

    from eidolons.trace.pg_watchdog import Watchdog

    conn = connect(dsn)
    watch = Watchdog(conn, timeout_s())
    try:
        with watch.bound():
            return _authority(conn)
    except psycopg.Error as exc:
        why = f"timeout: no answer within {watch.limit:g} s" if watch.fired else reason(exc)
        raise TraceReadError(f"trace store {redact(dsn)}: {why}") from None
    finally:
        conn.close()


def _authority(conn: psycopg.Connection[Any]) -> Authority:
    login = str(_one(conn, "SELECT current_user"))
    db = str(_one(conn, "SELECT current_database()"))
    here = f"login {login} in database {db}"
    problems = []
    if _one(conn, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"):
        problems.append(
            f"{here} is a superuser: it can record orchestrator verdicts here (it can lift "
            "the triggers) without having been bound here; give each host a login of its "
            "own, bound by eidolons trace store init"
        )
    table = _one(conn, "SELECT to_regclass(%s)", (f"{SCHEMA}.trace_events",))
    if table is None:
        return Authority(f"{here}: no trace schema ({UPGRADE})", problems)
    owner = _one(
        conn,
        "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = to_regclass(%s)",
        (f"{SCHEMA}.trace_events",),
    )
    if owner == login and not problems:
        problems.append(
            f"{here} owns the trace table: it can record orchestrator verdicts here (it can "
            "lift the triggers); give each host a login of its own"
        )
    version = _one(conn, f"SELECT max(version) FROM {SCHEMA}.schema_version")
    if version is None or version < BOUND_VERSION:
        legacy = _one(conn, "SELECT to_regrole(%s)", (LEGACY_ORCHESTRATOR_ROLE,))
        if legacy is not None and _one(
            conn, "SELECT pg_has_role(current_user, %s, 'USAGE')", (LEGACY_ORCHESTRATOR_ROLE,)
        ):
            problems.append(
                f"{here} can record orchestrator verdicts through {LEGACY_ORCHESTRATOR_ROLE}, "
                "a role every database of the cluster shares, not by a grant for this "
                f"database: {UPGRADE}, naming this database's logins"
            )
        else:
            problems.append(f"{here}: the trace schema is at version {version}; {UPGRADE}")
        return Authority(f"{here}: not bound (schema version {version})", problems)
    if not _one(conn, "SELECT has_table_privilege(%s, 'SELECT')", (f"{SCHEMA}.writers",)):
        problems.append(f"{here} is not bound here (eidolons trace store init --grant-...)")
        return Authority(f"{here}: not bound", problems)
    bound = _one(conn, f"SELECT authority FROM {SCHEMA}.writers WHERE login = current_user")
    for (other,) in conn.execute(
        f"SELECT login FROM {SCHEMA}.writers WHERE authority = '{ORCHESTRATOR}' "
        "AND login <> current_user AND to_regrole(quote_ident(login)) IS NOT NULL "
        "AND pg_has_role(current_user, quote_ident(login)::regrole, 'MEMBER')"
    ).fetchall():
        if not problems:
            problems.append(
                f"{here} can act as {other}, bound here as orchestrator (it is a member of "
                f"it): it can record orchestrator verdicts without having been bound here"
            )
    if _one(conn, "SELECT has_database_privilege('public', current_database(), 'CONNECT')"):
        problems.append(
            f"database {db} is open to every login of the cluster (CONNECT granted to "
            f"PUBLIC): {UPGRADE}"
        )
    return Authority(f"{here}: bound as {bound or 'nothing'}", problems)
