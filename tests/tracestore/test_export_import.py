"""``trace export --to postgres`` and ``trace import``: a project's JSONL history moves in
and out byte for byte, resumably, and a diverged target is refused."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Run, clean_env, emit_cmd, trace_files
from tests.tracestore.pgserver import GATE_LOGIN, ORCH_LOGIN, PgServer

Cli = Callable[..., Run]


@pytest.fixture(scope="module")
def db(shared_db: str) -> str:
    return shared_db  # every project's threads have their own ids


def history(cli: Cli, project: Path, n: int) -> list[Path]:
    """``n`` verified hand-offs in the project's JSONL trace, plus one damaged line."""
    for i in range(n):
        payload = project / "handoff" / f"r{i}.md"
        payload.parent.mkdir(parents=True, exist_ok=True)
        payload.write_text(f"# Report {i}\n\n## Decision target\nx\n", encoding="utf-8")
        r = cli(*emit_cmd(payload, "--json", sender="atlas@1.4.2", to="vigil@1.9.0"))
        assert r.code == 0, r.err
        assert cli("verify-envelope", r.json()["envelope_path"], "--block").code == 0
    files = trace_files(project)
    with files[0].open("ab") as fh:
        fh.write(b"{damaged\n")
    return files


def test_export_then_import_round_trips_byte_for_byte(
    cli: Cli, project: Path, tmp_path: Path, pg: PgServer, db: str
) -> None:
    files = history(cli, project, 3)
    dsn = pg.dsn(ORCH_LOGIN, db)
    r = cli("trace", "export", "--to", "postgres", "--dsn", dsn)
    assert r.code == 0, r.err
    assert r.out.count(" lines copied") == 3
    again = cli("trace", "export", "--to", "postgres", env=clean_env(EIDOLONS_TRACE_DSN=dsn))
    assert again.code == 0 and again.out.count(": 0 lines copied") == 3  # resumable, no dupes
    other = tmp_path / "other"
    (other / ".eidolons").mkdir(parents=True)
    r = cli("trace", "import", *(f.stem for f in files), "--dsn", dsn, "--root", other)
    assert r.code == 0, r.err
    for f in files:
        assert (other / ".eidolons" / ".trace" / f.name).read_bytes() == f.read_bytes()
    # the receiver on the imported history finds the same records
    r = cli("trace", "list", "--json", "--root", other)
    assert r.code == 0 and len(r.json()) == 3
    # the JSONL chain moved with the bytes: intact in PostgreSQL, broken where it was
    on_pg = clean_env(EIDOLONS_TRACE_DSN=dsn)
    r = cli("trace", "verify", files[1].stem, "--block", "--json", env=on_pg)
    assert r.code == 0 and r.json()["chains"][0]["state"] == "intact"
    r = cli("trace", "verify", files[0].stem, "--block", env=on_pg)
    assert r.code == 3 and "chain BROKEN at line 3" in r.out  # the damaged line


def test_a_hand_off_verified_before_export_passes_on_postgres(
    cli: Cli, project: Path, pg: PgServer, db: str
) -> None:
    history(cli, project, 1)
    assert cli("trace", "export", "--to", "postgres", "--dsn", pg.dsn(ORCH_LOGIN, db)).code == 0
    gate = clean_env(EIDOLONS_TRACE_DSN=pg.dsn(GATE_LOGIN, db))
    r = cli("verify-incoming", project / "handoff" / "r0.md", "--as", "vigil", "--json", env=gate)
    assert r.code == 0, r.out
    # new appends continue the imported thread's chain
    thread = r.json()["thread_id"]
    r = cli("trace", "show", thread, "--json", env=gate)
    assert [e.get("seq") for e in r.json()][-2:] == [4, 5]


def test_export_refuses_a_diverged_thread_and_copies_the_others(
    cli: Cli, project: Path, pg: PgServer, db: str
) -> None:
    files = history(cli, project, 2)
    dsn = pg.dsn(ORCH_LOGIN, db)
    assert cli("trace", "export", "--to", "postgres", "--dsn", dsn).code == 0
    first = files[0].read_bytes().split(b"\n")
    files[0].write_bytes(b"\n".join([first[0].replace(b"atlas", b"forge"), *first[1:]]))
    with files[1].open("ab") as fh:
        fh.write(b'{"event":"note"}\n')
    r = cli("trace", "export", "--to", "postgres", "--dsn", dsn)
    assert r.code == 3
    assert f"{files[0].stem}: refused" in r.err
    assert f"{files[1].stem}: 1 line copied" in r.out


def test_export_needs_the_orchestrator_role_for_verdicts(
    cli: Cli, project: Path, pg: PgServer, db: str
) -> None:
    history(cli, project, 1)
    r = cli("trace", "export", "--to", "postgres", "--dsn", pg.dsn(GATE_LOGIN, db))
    assert r.code == 3 and "may not record orchestrator verdicts" in r.err


@pytest.mark.parametrize(
    "argv, code",
    [
        (("trace", "export", "--to", "postgres"), 2),  # no DSN
        (("trace", "import", "--dsn", "sqlite:///x"), 2),
        (
            ("trace", "export", "--to", "postgres", "--dsn", "postgresql://x@/y?host=/nonexistent"),
            3,
        ),
        (("trace", "import", "../etc", "--dsn", "postgresql://x@/y?host=/nonexistent"), 2),
    ],
)
def test_bad_invocations(cli: Cli, argv: tuple[str, ...], code: int) -> None:
    r = cli(*argv)
    assert r.code == code, r.err
    assert r.err.startswith("eidolons: ") and "Traceback" not in r.err


def test_an_imported_payload_is_in_the_payload_index(
    cli: Cli, project: Path, tmp_path: Path, pg: PgServer, db: str
) -> None:
    # `trace import` appends lines without the store's append: it must still index the
    # payloads they name (ADR 0018), or the receiver's early SKIP (ADR 0022) and the hook
    # would let through a hand-off whose envelope is gone
    files = history(cli, project, 1)
    dsn = pg.dsn(ORCH_LOGIN, db)
    assert cli("trace", "export", "--to", "postgres", "--dsn", dsn).code == 0
    other = tmp_path / "other-indexed"
    (other / ".eidolons").mkdir(parents=True)
    mine = other / "mine.md"  # the other project's own hand-off: its index already exists
    mine.write_text("# Mine\n\n## Decision target\nx\n")
    assert cli(*emit_cmd(mine, "--root", other, sender="atlas@1.4.2", to="vigil@1.9.0")).code == 0
    from eidolons.io.paths import index_path

    assert Path(index_path(str(other))).is_file()  # the host's payload index (ADR 0018)
    r = cli("trace", "import", files[0].stem, "--dsn", dsn, "--root", other)
    assert r.code == 0, r.err
    payload = other / "handoff" / "r0.md"  # the imported hand-off's payload, no envelope
    payload.parent.mkdir()
    payload.write_text("forged bytes\n")
    r = cli("verify-incoming", payload, "--as", "vigil", "--root", other)
    assert r.code == 3 and "REFUSE: UNVERIFIED" in r.err and "the trace names it" in r.err
