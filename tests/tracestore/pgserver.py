"""A real PostgreSQL for the tests: the Debian ``postgresql`` package's ``initdb`` into a
temporary directory, listening on a Unix socket and on a free TCP port of 127.0.0.1
(trust authentication for both), ``fsync=off``; started once per
session and stopped at the end. ``initdb``/``postgres`` refuse to run as root, so as root
they run as the ``postgres`` OS user (``runuser``)."""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

GATE_LOGIN = "gate_host_b"  # a receiver's or sender's host: bound as gate
ORCH_LOGIN = "orch_host_a"  # the orchestrator's host: bound as orchestrator
TEMPLATE_DB = "eidolons_tpl"


def find_bindir() -> Path | None:
    for initdb in sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True):
        return Path(initdb).parent
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    """``durable=False`` (the tests): ``fsync=off``, ``synchronous_commit=off``;
    ``durable=True`` (the benchmark): PostgreSQL's own defaults."""

    def __init__(self, bindir: Path, durable: bool = False) -> None:
        self.bindir = bindir
        self.durable = durable
        self.base = Path(tempfile.mkdtemp(prefix="eidolons-pg-", dir="/tmp"))
        self.data = self.base / "data"
        self.socket_dir = self.base
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(self.base, pw.pw_uid, pw.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self._dbs = itertools.count(1)
        self._logins = itertools.count(1)
        self.port = _free_port()

    def _run(self, *argv: str) -> None:
        subprocess.run(
            [*self.as_user, *argv], check=True, capture_output=True, timeout=60, cwd=self.base
        )

    def start(self) -> None:
        self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
            "--no-instructions",
        )
        fast = ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        options = " ".join(
            [
                "-c listen_addresses=127.0.0.1",
                f"-c port={self.port}",
                f"-c unix_socket_directories={self.socket_dir}",
                *([] if self.durable else fast),
                "-c max_connections=60",
                "-c shared_buffers=64MB",
            ]
        )
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.base / "log"),
            "-o",
            options,
            "-w",
            "-t",
            "30",
            "start",
        )

    def stop(self) -> None:
        try:
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.base, ignore_errors=True)

    def dsn(self, user: str = "postgres", db: str = "postgres", *, tcp: bool = False) -> str:
        """A URI over the Unix socket, or with ``tcp`` over 127.0.0.1."""
        if tcp:
            return f"postgresql://{user}@127.0.0.1:{self.port}/{db}"
        return f"postgresql://{user}@/{db}?host={self.socket_dir}&port={self.port}"

    def admin(self, sql: str, db: str = "postgres") -> None:
        import psycopg

        with psycopg.connect(self.dsn(db=db), autocommit=True) as conn:
            conn.execute(sql)

    def new_login(self, prefix: str) -> str:
        """A fresh login role, ``<prefix>_<n>``, with no grant of any kind."""
        name = f"{prefix}_{next(self._logins)}"
        self.admin(f"CREATE ROLE {name} LOGIN")
        return name

    def prepare_template(self) -> None:
        from eidolons.trace.pg_admin import init_schema

        self.admin(f"CREATE ROLE {GATE_LOGIN} LOGIN; CREATE ROLE {ORCH_LOGIN} LOGIN")
        self.admin(f"CREATE DATABASE {TEMPLATE_DB}")
        init_schema(
            self.dsn(db=TEMPLATE_DB), grant_gate=(GATE_LOGIN,), grant_orchestrator=(ORCH_LOGIN,)
        )

    def new_database(self, initialised: bool = True) -> str:
        """A fresh database (a copy of the initialised template, or empty)."""
        name = f"t{next(self._dbs)}"
        template = TEMPLATE_DB if initialised else "template0"
        self.admin(f"CREATE DATABASE {name} TEMPLATE {template}")
        return name
