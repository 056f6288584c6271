"""``eidolons trace store init``, ``trace export --to postgres``, ``trace import``: the
shared PostgreSQL trace store (ADR 0014). Exit codes: 0 done; 2 usage; 3 the store
refused or failed (nothing, or only whole threads, copied)."""

from __future__ import annotations

import argparse
import sys

from eidolons._text import plural
from eidolons.cli.common import error, fail, project_root
from eidolons.errors import EidolonsError, UsageError


def run_store(args: argparse.Namespace) -> int:
    try:
        if args.trace_command == "store":
            return _store_init(args)
        return _copy(args)
    except UsageError as exc:
        return fail(exc)
    except EidolonsError as exc:  # the store refused or failed
        return fail(exc, 3)


def _dsn(args: argparse.Namespace) -> str:
    import os

    from eidolons.trace.store import DSN_ENV, check_dsn

    dsn = args.dsn or os.environ.get(DSN_ENV)
    if not dsn:
        raise UsageError(f"no PostgreSQL store: pass --dsn or set {DSN_ENV}")
    return check_dsn(dsn)


def _store_init(args: argparse.Namespace) -> int:
    """Migrate, bind the logins given, and say who may use this database now."""
    from eidolons.trace.pg_admin import init_schema
    from eidolons.trace.pg_schema import AUTHORITIES
    from eidolons.trace.postgres import redact

    dsn = _dsn(args)
    done = init_schema(dsn, args.grant_gate, args.grant_orchestrator)
    applied = ", ".join(str(v) for v in done.applied) or "none, already current"
    print(
        f"trace store {redact(dsn)}: schema version {done.version} (migrations applied: {applied})"
    )
    for authority in reversed(AUTHORITIES):
        logins = ", ".join(done.bound.get(authority, [])) or "none"
        print(f"  bound to database {done.database} as {authority}: {logins}")
    print(f"  CONNECT on database {done.database}: revoked from PUBLIC, granted to these")
    if done.left_out:
        names = ", ".join(f"{login} (was {authority})" for login, authority in done.left_out)
        print(f"  not bound here (members of the cluster-wide roles left out): {names}")
    if done.missing:
        print(f"  bound here but no such role on the cluster: {', '.join(done.missing)}")
    return 0


def _copy(args: argparse.Namespace) -> int:
    """export: project JSONL -> PostgreSQL; import: PostgreSQL -> project JSONL. A thread
    is copied only when the target holds a prefix of the source (resumable, never a
    merge); a target that diverged is refused. An import refuses a thread holding a row
    that reads as an orchestrator verdict the store does not count (the one record rule):
    in a JSONL trace its bytes alone would make it evidence."""
    from eidolons.trace.log import JsonlStore, append_lines, thread_file_name
    from eidolons.trace.postgres import PostgresStore
    from eidolons.trace.store import NOT_COUNTED, TraceStore, judged_line

    root = project_root(args.root)
    if isinstance(root, int):
        return root
    for name in args.threads:
        if thread_file_name(name) != name:
            return error(f"{name!r} is not a valid thread id")
    files = JsonlStore(root)
    pg = PostgresStore(_dsn(args))
    try:
        pg.connection()  # reachable and initialised, or nothing is attempted
        source: TraceStore = files if args.trace_command == "export" else pg
        target: TraceStore = pg if args.trace_command == "export" else files
        threads = args.threads or source.threads()
        diverged = []
        for name in threads:
            have = list(target.iter_raw(name))
            rows = list(source.iter_stamped(name))
            lines = [raw for raw, _, _ in rows]
            forged = next(
                (
                    (n, why)
                    for n, (raw, stamp, _) in enumerate(rows, 1)
                    if (why := (judged_line(raw, n, stamp).event or {}).get(NOT_COUNTED))
                ),
                None,
            )
            if forged is not None:
                diverged.append(name)
                print(
                    f"{name}: refused, line {forged[0]} reads as an orchestrator "
                    f"verdict that {source.describe()} does not count ({forged[1]}); in a "
                    "JSONL trace it would be evidence, so nothing of the thread is copied",
                    file=sys.stderr,
                )
                continue
            if lines[: len(have)] != have:
                diverged.append(name)
                print(f"{name}: refused, {target.describe()} holds other lines", file=sys.stderr)
                continue
            new = lines[len(have) :]
            if new and args.trace_command == "export":
                pg.append_lines(name, new, after=len(have))
            elif new:
                append_lines(files.path(name), new)
                files.index_payloads()  # the host's payload index covers them (ADR 0018)
            print(f"{name}: {plural(len(new), 'line')} copied, {len(have)} already there")
    finally:
        pg.close()
    return 3 if diverged else 0
