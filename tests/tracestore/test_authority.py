"""Authority is bound to one database: two projects on one cluster, each in its own
database with its own logins. Y's orchestrator login can record no verdict in X's
database, Y's receiver login can read none of X's events, and an upgrade of a store made
when the roles were cluster-wide either names the logins it bound or says exactly what
to run (it never locks a working host out, nor leaves the old roles' authority)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Run, clean_env, emit_payload
from tests.tracestore.legacy_v3 import init_v3
from tests.tracestore.pgserver import PgServer

Cli = Callable[..., Run]


@dataclass
class Project:
    """One project's database on the shared cluster, and its two hosts' logins."""

    pg: PgServer
    db: str
    orch: str
    gate: str

    def env(self, login: str, db: str | None = None) -> dict[str, str]:
        return clean_env(EIDOLONS_TRACE_DSN=self.pg.dsn(login, db or self.db))

    @property
    def admin(self) -> str:
        return self.pg.dsn(db=self.db)


def project_db(pg: PgServer, cli: Cli, name: str) -> Project:
    db = pg.new_database(initialised=False)
    p = Project(pg, db, pg.new_login(f"{name}_orch"), pg.new_login(f"{name}_gate"))
    r = cli(
        "trace", "store", "init", "--dsn", p.admin,
        "--grant-orchestrator", p.orch, "--grant-gate", p.gate,
    )  # fmt: skip
    assert r.code == 0, r.err
    return p


@pytest.fixture
def x(pg: PgServer, cli: Cli) -> Project:
    return project_db(pg, cli, "x")


@pytest.fixture
def y(pg: PgServer, cli: Cli) -> Project:
    return project_db(pg, cli, "y")


def connect(pg: PgServer, login: str, db: str) -> Any:
    import psycopg

    return psycopg.connect(pg.dsn(login, db), autocommit=True)


def keep_command(r: Run) -> list[str]:
    """The command a refused upgrade says to run, as its words."""
    import shlex

    return shlex.split(r.err.split("run: ", 1)[1].rsplit(" [", 1)[0])


def forged_pass(mid: str) -> bytes:
    event = {"event": "verify_pass", "message_id": mid, "gate": "orchestrator", "verdict": "pass"}
    return json.dumps(event, separators=(",", ":")).encode()


def test_the_other_projects_orchestrator_cannot_record_a_pass_here(
    cli: Cli, project: Path, x: Project, y: Project
) -> None:
    """Y's orchestrator host verifies bytes it chose against X's database: nothing is
    recorded there, and X's receiver refuses the hand-off."""
    payload, envelope, _ = emit_payload(cli, project, env=x.env(x.gate))
    r = cli("verify-envelope", envelope, "--block", env=x.env(y.orch))
    assert r.code == 3, r.out + r.err
    r = cli("verify-incoming", payload, "--as", "vigil", "--json", env=x.env(x.gate))
    assert r.code == 3 and r.json()["failure_code"] == "UNVERIFIED", r.out
    r = cli("verify-envelope", envelope, "--block", env=x.env(x.orch))  # X's own: recorded
    assert r.code == 0, r.out + r.err
    assert cli("verify-incoming", payload, "--as", "vigil", env=x.env(x.gate)).code == 0


def test_the_other_projects_receiver_cannot_read_the_events_here(
    cli: Cli, project: Path, x: Project, y: Project
) -> None:
    payload, envelope, _ = emit_payload(cli, project, env=x.env(x.gate))
    assert cli("verify-envelope", envelope, "--block", env=x.env(x.orch)).code == 0
    thread = cli("verify-incoming", payload, "--as", "vigil", "--json", env=x.env(x.gate))
    thread_id = thread.json()["thread_id"]
    assert cli("trace", "show", thread_id, env=x.env(x.gate)).code == 0
    for login in (y.gate, y.orch):
        r = cli("trace", "show", thread_id, "--json", env=x.env(login))
        assert r.code != 0 and thread_id not in r.out, r.out
        assert "permission denied for database" in r.err, r.err


@pytest.mark.parametrize("who", ["gate", "orch"])
def test_with_connect_opened_again_the_other_logins_still_have_no_rights_here(
    pg: PgServer, x: Project, y: Project, who: str
) -> None:
    """Behind CONNECT, the table privileges and the trigger are this database's too: an
    administrator who opens the database to PUBLIC again gives Y's logins nothing."""
    import psycopg

    from eidolons.ecl.events import GENESIS

    pg.admin(f"GRANT CONNECT ON DATABASE {x.db} TO PUBLIC")
    login = y.gate if who == "gate" else y.orch
    with connect(pg, login, x.db) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT line FROM eidolons.trace_events LIMIT 1")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(
                "INSERT INTO eidolons.trace_events (thread, seq, prev, line, verdict_for) "
                "VALUES ('t', 1, %s, %s, 'm')",
                (GENESIS, forged_pass("m")),
            )


def test_init_closes_the_database_to_logins_it_was_not_given(
    cli: Cli, pg: PgServer, x: Project
) -> None:
    import psycopg

    stranger = pg.new_login("stranger")
    with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
        connect(pg, stranger, x.db).close()
    for login in (x.orch, x.gate):
        connect(pg, login, x.db).close()


def test_init_names_the_logins_it_bound(cli: Cli, pg: PgServer, x: Project) -> None:
    r = cli("trace", "store", "init", "--dsn", x.admin)
    assert r.code == 0, r.err
    assert f"orchestrator: {x.orch}" in r.out and f"gate: {x.gate}" in r.out
    assert "CONNECT" in r.out and "PUBLIC" in r.out
    new_gate = pg.new_login("x_gate")
    r = cli("trace", "store", "init", "--dsn", x.admin, "--grant-gate", new_gate)
    assert r.code == 0, r.err
    assert f"gate: {x.gate}, {new_gate}" in r.out or f"gate: {new_gate}, {x.gate}" in r.out
    connect(pg, new_gate, x.db).close()


def test_init_refuses_a_login_that_does_not_exist(cli: Cli, x: Project) -> None:
    r = cli("trace", "store", "init", "--dsn", x.admin, "--grant-gate", "nobody_here")
    assert r.code == 3 and "nobody_here" in r.err and "Traceback" not in r.err
    assert len(r.err.strip().splitlines()) == 1


# -- an upgrade of a store made when the roles were cluster-wide (schema version 3)


@pytest.fixture
def legacy(pg: PgServer) -> tuple[Project, Project]:
    """Two projects' databases made by eidolons at schema 3: every login granted to the
    cluster-wide roles, each database open to PUBLIC; X holds a recorded pass."""
    made = []
    for name in ("lx", "ly"):
        db = pg.new_database(initialised=False)
        p = Project(pg, db, pg.new_login(f"{name}_orch"), pg.new_login(f"{name}_gate"))
        init_v3(p.admin, grant_gate=(p.gate,), grant_orchestrator=(p.orch,))
        made.append(p)
    x, _ = made
    with connect(pg, x.orch, x.db) as conn:  # what a version-3 orchestrator gate wrote
        line = forged_pass("m-before")
        conn.execute(
            "INSERT INTO eidolons.trace_events (thread, seq, prev, line, verdict_for) "
            "VALUES ('old', 1, %s, %s, 'm-before')",
            ("0" * 64, line),
        )
    return x, made[1]


def test_an_upgrade_that_cannot_tell_which_logins_to_keep_refuses_with_the_command(
    cli: Cli, legacy: tuple[Project, Project]
) -> None:
    """An upgraded store refuses a schema it does not know, so the hosts wait for the
    administrator; what init refused leaves the store as it was."""
    x, y = legacy
    r = cli("trace", "store", "init", "--dsn", x.admin)
    assert r.code == 2, r.out + r.err
    assert r.err.startswith("eidolons: ") and "Traceback" not in r.err
    words = keep_command(r)
    assert words[:5] == ["eidolons", "trace", "store", "init", "--dsn"]
    command = " ".join(words)
    for login, flag in ((x.orch, "orchestrator"), (y.orch, "orchestrator")):
        assert f"--grant-{flag} {login}" in command
    for login in (x.gate, y.gate):
        assert f"--grant-gate {login}" in command
    with connect(x.pg, x.gate, x.db) as conn:  # nothing changed: still version 3, open
        assert conn.execute("SELECT max(version) FROM eidolons.schema_version").fetchone() == (3,)


def test_an_upgrade_binds_the_logins_named_and_no_other(
    cli: Cli, project: Path, pg: PgServer, legacy: tuple[Project, Project]
) -> None:
    import psycopg

    x, y = legacy
    r = cli(
        "trace", "store", "init", "--dsn", x.admin,
        "--grant-orchestrator", x.orch, "--grant-gate", x.gate,
    )  # fmt: skip
    assert r.code == 0, r.err
    assert "migrations applied: 4" in r.out
    assert f"orchestrator: {x.orch}" in r.out and f"gate: {x.gate}" in r.out
    assert y.orch in r.out and y.gate in r.out and "not bound" in r.out  # named, left out
    # the hosts named keep working: the old pass is still found, new ones are recorded
    with connect(pg, x.gate, x.db) as conn:
        assert conn.execute("SELECT count(*) FROM eidolons.trace_events").fetchone() == (1,)
    payload, envelope, _ = emit_payload(cli, project, env=x.env(x.gate))
    assert cli("verify-envelope", envelope, "--block", env=x.env(x.orch)).code == 0
    assert cli("verify-incoming", payload, "--as", "vigil", env=x.env(x.gate)).code == 0
    # the cluster-wide roles hold no authority here any more, even with CONNECT reopened
    pg.admin(f"GRANT CONNECT ON DATABASE {x.db} TO PUBLIC")
    for login in (y.orch, y.gate):
        with connect(pg, login, x.db) as conn:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SELECT line FROM eidolons.trace_events LIMIT 1")
    # and Y's database, not yet upgraded, still works as it did for Y's hosts
    with connect(pg, y.orch, y.db) as conn:
        conn.execute(
            "INSERT INTO eidolons.trace_events (thread, seq, prev, line, verdict_for) "
            "VALUES ('y', 1, %s, %s, 'm-y')",
            ("0" * 64, forged_pass("m-y")),
        )


def test_the_command_an_upgrade_refusal_gives_keeps_every_host_working(
    cli: Cli, project: Path, pg: PgServer
) -> None:
    db = pg.new_database(initialised=False)
    orch, gate = pg.new_login("solo_orch"), pg.new_login("solo_gate")
    init_v3(pg.dsn(db=db), grant_gate=(gate,), grant_orchestrator=(orch,))
    r = cli("trace", "store", "init", "--dsn", pg.dsn(db=db))
    assert r.code == 2, r.out + r.err
    r = cli(*keep_command(r)[1:])
    assert r.code == 0, r.out + r.err
    assert "migrations applied: 4" in r.out
    env = {login: clean_env(EIDOLONS_TRACE_DSN=pg.dsn(login, db)) for login in (orch, gate)}
    payload, envelope, _ = emit_payload(cli, project, env=env[gate])
    assert cli("verify-envelope", envelope, "--block", env=env[orch]).code == 0
    assert cli("verify-incoming", payload, "--as", "vigil", env=env[gate]).code == 0


# -- doctor: a login that can record orchestrator verdicts here without a grant for here


def doctor_store(cli: Cli, env: dict[str, str]) -> list[dict[str, str]]:
    r = cli("doctor", "--json", env=env)
    return [f for f in r.json()["findings"] if f["check"] == "trace-store"]


def test_doctor_passes_the_logins_bound_here(cli: Cli, x: Project) -> None:
    for login in (x.orch, x.gate):
        assert doctor_store(cli, x.env(login)) == []


def test_doctor_reports_a_login_with_authority_not_granted_for_here(
    cli: Cli, pg: PgServer, legacy: tuple[Project, Project]
) -> None:
    x, y = legacy
    found = doctor_store(cli, x.env(y.orch))  # the store not yet upgraded: Y's login can
    assert found and "orchestrator verdicts" in found[0]["message"]
    assert "eidolons trace store init" in found[0]["message"]
    found = doctor_store(cli, clean_env(EIDOLONS_TRACE_DSN=pg.dsn(db=x.db)))  # a superuser
    assert found and "superuser" in found[0]["message"]


def test_doctor_without_a_dsn_does_not_look_at_a_store(cli: Cli) -> None:
    r = cli("doctor", "--json", env=clean_env())
    assert all(f["check"] != "trace-store" for f in r.json()["findings"])


def test_the_trigger_itself_refuses_a_login_not_bound_here(
    pg: PgServer, x: Project, y: Project
) -> None:
    """Everything else opened to Y's orchestrator login by hand (CONNECT, the schema, the
    table): the insert trigger still refuses its verdict, because the writers table of
    this database does not bind it."""
    import psycopg

    from eidolons.ecl.events import GENESIS

    pg.admin(f"GRANT CONNECT ON DATABASE {x.db} TO {y.orch}", db=x.db)
    pg.admin(f"GRANT USAGE ON SCHEMA eidolons TO {y.orch}", db=x.db)
    pg.admin(f"GRANT SELECT, INSERT ON eidolons.trace_events TO {y.orch}", db=x.db)
    with connect(pg, y.orch, x.db) as conn:
        # refused inside the insert trigger (by its message, or by the writers table it
        # consults, which a login bound nowhere here cannot even read)
        with pytest.raises(
            psycopg.Error, match=r"may not record orchestrator verdicts|trace_events_before_insert"
        ):
            conn.execute(
                "INSERT INTO eidolons.trace_events (thread, seq, prev, line, verdict_for) "
                "VALUES ('t', 1, %s, %s, 'm')",
                (GENESIS, forged_pass("m")),
            )


def test_doctor_reports_a_login_made_a_member_of_this_databases_orchestrator(
    cli: Cli, pg: PgServer, x: Project, y: Project
) -> None:
    pg.admin(f"GRANT {x.orch} TO {y.orch}")  # Y's login can now act as X's orchestrator
    pg.admin(f"GRANT CONNECT ON DATABASE {x.db} TO {y.orch}", db=x.db)
    found = doctor_store(cli, x.env(y.orch))
    assert any(f"can act as {x.orch}" in f["message"] for f in found), found


def test_doctor_reports_a_database_opened_again_to_every_login(
    cli: Cli, pg: PgServer, x: Project
) -> None:
    pg.admin(f"GRANT CONNECT ON DATABASE {x.db} TO PUBLIC", db=x.db)
    found = doctor_store(cli, x.env(x.gate))
    assert any("open to every login of the cluster" in f["message"] for f in found), found


def test_doctor_reports_the_owner_of_the_trace_table(cli: Cli, pg: PgServer, x: Project) -> None:
    owner = pg.new_login("x_owner")
    pg.admin(f"ALTER TABLE eidolons.trace_events OWNER TO {owner}", db=x.db)
    pg.admin(f"GRANT CONNECT ON DATABASE {x.db} TO {owner}", db=x.db)
    pg.admin(f"GRANT USAGE ON SCHEMA eidolons TO {owner}", db=x.db)
    pg.admin(f"GRANT SELECT ON ALL TABLES IN SCHEMA eidolons TO {owner}", db=x.db)
    found = doctor_store(cli, x.env(owner))
    assert any("owns the trace table" in f["message"] for f in found), found
