"""Fixtures for the trace-store tests: one real PostgreSQL per session (skipped with a
reason when the Debian package is absent, except under ``CI=true``)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from tests.tracestore.pgserver import PgServer, find_bindir


@pytest.fixture(scope="session")
def pg() -> Iterator[PgServer]:
    bindir = find_bindir()
    missing = None
    if bindir is None:
        missing = "PostgreSQL server binaries not found (apt-get install postgresql)"
    else:
        try:
            import psycopg  # noqa: F401
        except ImportError:
            missing = "psycopg is not installed (pip install -e '.[dev]')"
    if missing is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(missing)
        pytest.skip(missing)
    assert bindir is not None
    try:
        server = PgServer(bindir)
        server.start()
    except (OSError, KeyError, subprocess.SubprocessError) as exc:  # no postgres user, ...
        detail = getattr(exc, "stderr", None) or exc
        reason = f"cannot start PostgreSQL from {bindir}: {detail!r}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        server.prepare_template()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def shared_db(pg: PgServer) -> str:
    """One initialised database for every test that isolates itself by thread id (a
    database costs about 0.3 s to create)."""
    return pg.new_database()
