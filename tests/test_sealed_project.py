"""A sealed project (``eidolons init`` for a host that hides the hand-off directories from
the agents' shells, marked by ``.eidolons/sealed``): ``emit`` places every hand-off in the
hand-off directory and says where; the receiver gate refuses, with its reason, a hand-off
that lies anywhere else; a plain file elsewhere stays a plain file."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Run, emit_cmd

BODY = "# Report\n\n## Decision target\nx\n"


@pytest.fixture
def sealed(project: Path) -> Path:
    (project / ".eidolons" / "sealed").write_text("# test\n")
    return project


def test_emit_places_the_handoff_in_the_handoff_directory(
    cli: Callable[..., Run], sealed: Path
) -> None:
    (sealed / "out").mkdir()
    (sealed / "out" / "r.md").write_text(BODY)
    r = cli(*emit_cmd("out/r.md"))
    assert r.code == 0, r.err
    placed = sealed / ".eidolons" / "handoffs" / "r.md"
    assert f"payload: {placed} (copied into the sealed hand-off directory)" in r.out
    assert placed.read_text() == BODY
    assert (sealed / ".eidolons" / "handoffs" / "r.envelope.json").is_file()
    assert not (sealed / "out" / "r.envelope.json").exists()
    # a second payload of the same name never replaces the first hand-off
    (sealed / "out" / "r.md").write_text(BODY.replace("x", "y"))
    assert cli(*emit_cmd("out/r.md")).code == 0
    assert placed.read_text() == BODY
    assert (sealed / ".eidolons" / "handoffs" / "r-2.md").read_text() == BODY.replace("x", "y")


def test_a_refused_emit_leaves_no_copy(cli: Callable[..., Run], sealed: Path) -> None:
    (sealed / "r.md").write_text(BODY)
    r = cli(*emit_cmd("r.md", kind="spec"))  # a kind vigil does not take from atlas
    assert r.code == 3, r.err
    assert not (sealed / ".eidolons" / "handoffs" / "r.md").exists()


def test_out_outside_the_handoff_directory_is_a_usage_error(
    cli: Callable[..., Run], sealed: Path
) -> None:
    (sealed / "r.md").write_text(BODY)
    r = cli(*emit_cmd("r.md", "--out", "elsewhere.envelope.json"))
    assert r.code == 2 and "beside its payload in the hand-off directory" in r.err
    assert not (sealed / ".eidolons" / "handoffs" / "r.md").exists()


def test_a_handoff_outside_the_sealed_directories_is_refused(
    cli: Callable[..., Run], project: Path
) -> None:
    (project / "r.md").write_text(BODY)
    assert cli(*emit_cmd("r.md")).code == 0  # emitted before the project was sealed
    assert cli("verify-envelope", "r.envelope.json", "--block").code == 0
    assert cli("verify-incoming", "r.md", "--as", "vigil").code == 0
    (project / ".eidolons" / "sealed").write_text("# test\n")
    r = cli("verify-incoming", "r.md", "--as", "vigil")
    assert r.code == 3
    assert r.err.splitlines()[0] == "[vigil-verify-incoming] REFUSE: UNVERIFIED from atlas"
    assert "outside the sealed hand-off directories" in r.err


def test_a_link_out_of_the_handoff_directory_is_refused(
    cli: Callable[..., Run], sealed: Path
) -> None:
    (sealed / "r.md").write_text(BODY)
    assert cli(*emit_cmd("r.md")).code == 0
    handoffs = sealed / ".eidolons" / "handoffs"
    assert cli("verify-envelope", handoffs / "r.envelope.json", "--block").code == 0
    assert cli("verify-incoming", handoffs / "r.md", "--as", "vigil").code == 0
    (sealed / "copy").mkdir()
    os.link(handoffs / "r.md", sealed / "copy" / "r.md")
    os.link(handoffs / "r.envelope.json", sealed / "copy" / "r.envelope.json")
    r = cli("verify-incoming", "copy/r.md", "--as", "vigil")
    assert r.code == 3 and "outside the sealed hand-off directories" in r.err


def test_a_plain_file_elsewhere_stays_a_plain_file(cli: Callable[..., Run], sealed: Path) -> None:
    (sealed / "notes.md").write_text("notes\n")
    r = cli("verify-incoming", "notes.md", "--as", "vigil")
    assert r.code == 0 and "SKIP" in r.err


def test_a_payload_swapped_for_a_link_out_of_the_seal_is_refused(
    cli: Callable[..., Run], sealed: Path, tmp_path: Path
) -> None:
    """The same bytes behind a link to a file outside: judged where they lie, refused with
    the reason (never an internal error)."""
    (sealed / "r.md").write_text(BODY)
    assert cli(*emit_cmd("r.md")).code == 0
    handoffs = sealed / ".eidolons" / "handoffs"
    assert cli("verify-envelope", handoffs / "r.envelope.json", "--block").code == 0
    outside = sealed / "elsewhere.md"  # in the project, outside the seal
    outside.write_text(BODY)
    (handoffs / "r.md").unlink()
    (handoffs / "r.md").symlink_to(outside)
    r = cli("verify-incoming", handoffs / "r.md", "--as", "vigil")
    assert r.code == 3, r.err
    assert r.err.splitlines()[0] == "[vigil-verify-incoming] REFUSE: UNVERIFIED from atlas"
    assert "outside the sealed hand-off directories" in r.err


def test_the_environment_cannot_widen_the_seal(
    cli: Callable[..., Run], sealed: Path, tmp_path: Path
) -> None:
    """EIDOLONS_HANDOFF_DIRS adds a hand-off directory no sandbox hides: a hand-off there
    is still outside the sealed directories."""
    from tests.conftest import clean_env

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = clean_env(EIDOLONS_HANDOFF_DIRS=str(elsewhere))
    (elsewhere / "r.md").write_text(BODY)
    r = cli(*emit_cmd(elsewhere / "r.md"), env=env)
    assert r.code == 0, r.err
    assert (sealed / ".eidolons" / "handoffs" / "r.md").read_text() == BODY  # placed in the seal


def test_an_hmac_key_file_that_cannot_be_read_is_an_error_not_no_key(
    cli: Callable[..., Run], sealed: Path, tmp_path: Path
) -> None:
    from tests.conftest import clean_env

    xdg = tmp_path / "xdg"
    (xdg / "eidolons" / "hmac.key").mkdir(parents=True)  # there, and not a readable file
    env = clean_env(XDG_CONFIG_HOME=str(xdg))
    env.pop("ECL_HMAC_KEY", None)
    (sealed / "r.md").write_text(BODY)
    r = cli(*emit_cmd("r.md", "--hmac"), env=env)
    assert r.code == 2 and "the HMAC key" in r.err and "cannot be read" in r.err


def test_an_envelope_in_the_seal_naming_a_payload_outside_it_is_refused_unread(
    cli: Callable[..., Run], project: Path
) -> None:
    """Without re-verification the gate reads no payload; where the envelope says it lies
    is still judged: outside the sealed directories, refused."""
    (project / "r.md").write_text(BODY)
    out = project / ".eidolons" / "handoffs" / "r.envelope.json"
    out.parent.mkdir(parents=True)
    assert cli(*emit_cmd("r.md", "--out", out)).code == 0
    assert cli("verify-envelope", out, "--block").code == 0
    assert cli("verify-incoming", out, "--as", "vigil", "--no-reverify").code == 0
    (project / ".eidolons" / "sealed").write_text("# test\n")
    r = cli("verify-incoming", out, "--as", "vigil", "--no-reverify")
    assert r.code == 3 and "outside the sealed hand-off directories" in r.err, r.err
