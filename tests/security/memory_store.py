"""The memory store damaged or planted by an agent: memory never changes a verdict, is never
written through a link out of the project, and its recall output is escaped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import emit_payload
from tests.security._probes import (
    EVIL,
    Cli,
    verified,
)
from tests.test_receiver import incoming


@pytest.mark.parametrize("damage", ["garbage", "directory", "fifo", "wrong-schema", "link"])
@pytest.mark.parametrize("flag", ["--show-recall", "--json"])
def test_a_broken_memory_store_neither_passes_nor_fails_the_gate(
    cli: Cli, project: Path, tmp_path: Path, damage: str, flag: str
) -> None:
    payload, envelope, _ = emit_payload(cli, project, "notes/mem.md")
    assert cli("verify-envelope", envelope, "--block").code == 0
    tampered, tampered_env, _ = emit_payload(cli, project, "notes/bad.md")
    assert cli("verify-envelope", tampered_env, "--block").code == 0
    tampered.write_text("# rewritten after the gate\n")
    store = project / ".eidolons" / "memory" / "memory.sqlite3"
    store.parent.mkdir(parents=True, exist_ok=True)
    store.unlink(missing_ok=True)
    if damage == "garbage":
        store.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    elif damage == "directory":
        store.mkdir()
    elif damage == "fifo":
        os.mkfifo(store)
    elif damage == "wrong-schema":
        import sqlite3

        with sqlite3.connect(store) as db:
            db.execute("create table crystals(x)")
            db.execute("pragma user_version = 3")
    else:
        (tmp_path / "nowhere").mkdir()
        store.symlink_to(tmp_path / "nowhere" / "gone" / "db")
    ok = cli("verify-incoming", payload, "--as", "vigil", flag)
    assert ok.code == 0, ok.err
    assert "REFUSE" not in ok.err
    bad = cli("verify-incoming", tampered, "--as", "vigil", flag)
    assert bad.code == 3 and "REFUSE: " in bad.err, bad.err
    if flag == "--json":
        assert ok.json()["status"] == "pass" and bad.json()["status"] != "pass"


@pytest.mark.parametrize("planted", ["db", "dir", "wal", "journal", "lock"])
def test_the_memory_store_is_never_written_through_a_planted_link(
    cli: Cli, project: Path, tmp_path: Path, planted: str
) -> None:
    # ADR 0021: the agent plants the store (or its directory, its WAL, its
    # journal, its creation lock) as a link to a file outside the project; the gate's
    # ingest after a pass (the MCP server's runs outside the agent's sandbox) created or
    # overwrote that file with an SQLite store holding hand-off text
    payload, envelope, _ = emit_payload(cli, project, "notes/mem.md")
    assert cli("verify-envelope", envelope, "--block").code == 0
    store = project / ".eidolons" / "memory"
    victim = tmp_path / "outside" / "victim"
    victim.parent.mkdir()
    if planted == "dir":
        victim.mkdir()
        store.symlink_to(victim, target_is_directory=True)
    else:
        store.mkdir(parents=True)
        name = {"db": "", "wal": "-wal", "journal": "-journal", "lock": ""}[planted]
        if planted == "lock":
            (store / ".create.lock").symlink_to(victim)
        else:
            (store / f"memory.sqlite3{name}").symlink_to(victim)
    r = cli("verify-incoming", payload, "--as", "vigil", "--show-recall")
    assert r.code == 0, r.err  # memory never changes the verdict
    assert not victim.exists() or (victim.is_dir() and not any(victim.iterdir()))
    r = cli("memory", "ingest", envelope, "--as", "vigil")
    assert not victim.exists() or (victim.is_dir() and not any(victim.iterdir()))


#: SQL that never ends: every row of an endless recursive series, counted
ENDLESS = (
    "SELECT count(*) FROM (WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) "
    "SELECT x FROM r)"
)


@pytest.mark.parametrize(
    "plant",
    [
        # the store's open reads meta: a view in its place loops there (recall and ingest)
        f"ALTER TABLE meta RENAME TO meta_kept; CREATE VIEW meta AS SELECT key, value "
        f"FROM meta_kept WHERE ({ENDLESS}) > 0",
        # the ingest after a pass inserts a crystal: a trigger loops there
        f"CREATE TRIGGER endless BEFORE INSERT ON crystals BEGIN {ENDLESS}; END",
    ],
    ids=["view-on-open", "trigger-on-ingest"],
)
def test_a_store_whose_sql_never_ends_is_cut_off_and_the_verdict_stands(
    cli: Cli, project: Path, plant: str
) -> None:
    """The store is a file in the project: an agent plants its own SQLite schema, whose
    statements never end. SQLite is interrupted at the memory call's deadline
    (``EIDOLONS_MEMORY_TIMEOUT``): the memory is unavailable, the pass a pass."""
    import sqlite3
    import time

    from tests.conftest import clean_env, run_cli
    from tests.test_receiver import handoff, markdown_for

    first = verified(cli, project)
    other = markdown_for("atlas", "vigil", "scout-report") + "\nAnother report.\n"
    payload = handoff(
        cli, project, "atlas", "vigil", "PROPOSE", "scout-report", name="in/b.md", body=other
    )
    assert incoming(cli, first, "vigil").code == 0  # the store, made by the gate
    db = sqlite3.connect(project / ".eidolons" / "memory" / "memory.sqlite3")
    db.executescript(plant)
    db.close()
    env = clean_env(EIDOLONS_MEMORY_TIMEOUT="0.2")
    # a process of its own: the gate that never returns fails this test, never hangs it
    began = time.monotonic()
    again = run_cli(
        "verify-incoming", payload, "--as", "vigil", "--json", cwd=project, env=env, process=True
    )
    took = time.monotonic() - began
    assert again.code == 0, again.err
    doc = again.json()
    assert doc["status"] == "pass"
    assert doc["ingest"]["status"] == "skipped", doc["ingest"]  # the store did not answer
    assert doc["ingest"]["reason"].startswith("local store unavailable: "), doc["ingest"]
    assert took < 30, took  # two calls of 0.2 s, and the start of a process


def test_junk_memory_store_does_not_change_the_verdict(cli: Cli, project: Path) -> None:
    payload = verified(cli, project)
    store = project / ".eidolons" / "memory"
    store.mkdir(exist_ok=True)
    (store / "memory.sqlite3").write_bytes(os.urandom(4096))
    r = incoming(cli, payload, "vigil", "--json")
    assert r.code == 0 and r.json()["status"] == "pass"
    payload.write_bytes(EVIL)
    r = incoming(cli, payload, "vigil", "--print-payload")
    assert r.code == 3 and r.out == ""


def test_recall_output_is_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    from eidolons.cli.verify_incoming import _print_recall

    _print_recall(
        {
            "backend": "local",
            "records": [{"layer": "x\x1b[2J", "id": "1\n2", "summary": "a\nREFUSE"}],
        }
    )
    err = capsys.readouterr().err
    assert "\x1b" not in err and err.count("\n") == 2 and "\\n" in err


@pytest.mark.parametrize("bad", ["Vigil", "vigil\nREFUSE", "../x", "vigil vigil", ""])
def test_memory_recall_validates_the_receiver_name(cli: Cli, bad: str) -> None:
    r = cli("memory", "recall", "x", "--as", bad)
    assert r.code == 2 and "is not an eidolon slug" in r.err and r.err.count("\n") == 1
    assert cli("memory", "recall", "x", "--as", "vigil@1.9.0").code == 0
