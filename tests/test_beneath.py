"""Opening beneath the boundary, by descriptor (ADR 0002): regression tests.

Each attack swaps or plants a symbolic link so that a name checked inside the project
is opened outside it. Every one of them made a gate hash, record a pass for or append to
a file outside the project before the fix.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from eidolons.io.files import BeneathError, open_beneath, open_path_beneath
from eidolons.io.payload import locate_payload, open_payload
from tests.conftest import Run, emit_payload, read_trace

Cli = Callable[..., Run]
NAME, BODY = "handoff/scout-report.md", "# Report\n\n## Decision target\nx\n"


# ------------------------------------------------------------------ the resolver itself


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """``box/`` (the boundary) with ``a/f.md``, and ``outside/f.md`` beside it."""
    box = tmp_path / "box"
    (box / "a").mkdir(parents=True)
    (box / "a" / "f.md").write_bytes(b"inside\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "f.md").write_bytes(b"outside\n")
    return box


def read(box: Path, rel: str) -> bytes | None:
    opened = open_beneath(box, rel)
    if opened is None:
        return None
    with opened.file() as fh:
        return fh.read()


def test_a_plain_file_beneath_is_read(tree: Path) -> None:
    assert read(tree, "a/f.md") == b"inside\n"


def test_nothing_there_is_none_not_an_error(tree: Path) -> None:
    assert read(tree, "a/none.md") is None
    assert read(tree, "none/f.md") is None
    assert read(tree, "a/f.md/x") is None  # a file used as a directory


@pytest.mark.parametrize(
    "link, target",
    [
        ("a/rel.md", "f.md"),  # relative, same directory
        ("up.md", "a/../a/f.md"),  # '..' that stays inside
        ("abs.md", "{box}/a/f.md"),  # absolute, naming a path inside the boundary
        ("d", "a"),  # a directory link
    ],
)
def test_links_that_stay_inside_are_followed(tree: Path, link: str, target: str) -> None:
    (tree / link).symlink_to(target.format(box=tree))
    rel = "d/f.md" if link == "d" else link
    assert read(tree, rel) == b"inside\n"


@pytest.mark.parametrize(
    "link, target",
    [
        ("x.md", "../outside/f.md"),
        ("x.md", "{outside}/f.md"),
        ("a/x.md", "../../outside/f.md"),
        ("d", "{outside}"),  # a directory component leaving the boundary
        ("d", ".."),
    ],
)
def test_links_that_leave_are_refused(tree: Path, link: str, target: str) -> None:
    (tree / link).symlink_to(target.format(outside=tree.parent / "outside"))
    rel = "d/f.md" if link == "d" else link
    with pytest.raises(BeneathError, match="outside"):
        read(tree, rel)


def test_dangling_and_looping_links_are_refused(tree: Path) -> None:
    (tree / "dangling.md").symlink_to("gone.md")
    (tree / "loop.md").symlink_to("loop.md")
    with pytest.raises(BeneathError, match="dangling"):
        read(tree, "dangling.md")
    with pytest.raises(BeneathError, match="too many levels"):
        read(tree, "loop.md")


def test_fifo_device_and_directory_are_never_opened(tree: Path) -> None:
    os.mkfifo(tree / "fifo.md")  # a blocking open would hang this test
    for rel in ("fifo.md", "a"):
        with pytest.raises(BeneathError, match="not a regular file") as info:
            read(tree, rel)
        assert info.value.not_regular
    with pytest.raises(BeneathError):
        open_path_beneath(Path("/dev/null"), Path("/dev"))


def test_a_link_swapped_for_a_file_while_it_is_read_is_a_refusal_not_an_error(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The link seen by the walk's ``stat`` is a regular file (or gone) by the time its
    target is read: a swap in between, a refusal the gates can give, never an ``OSError``
    (the hook said "internal error" to a receiver racing a swapper)."""
    real_readlink = os.readlink

    def swapped(what: str, *, dir_fd: int) -> str:
        os.unlink(what, dir_fd=dir_fd)
        if what == "file.md":
            os.close(os.open(what, os.O_CREAT | os.O_WRONLY, dir_fd=dir_fd))
        return real_readlink(what, dir_fd=dir_fd)

    monkeypatch.setattr(os, "readlink", swapped)
    for name in ("file.md", "gone.md"):
        (tree / name).symlink_to("a/f.md")
        with pytest.raises(BeneathError, match="changed while being opened"):
            read(tree, name)


def test_a_link_swapped_while_its_path_is_resolved_is_resolved_as_it_is_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``os.path.realpath`` before Python 3.13 raises when a link it found by ``lstat`` is
    swapped (for a directory, a file, or nothing) before its ``readlink`` (CPython
    gh-97566): locating the payload of an envelope whose directory is such a link is a
    refusal or a location, never an ``OSError``."""
    root = tmp_path / "proj"
    (root / "real").mkdir(parents=True)
    (root / "real" / "r.md").write_bytes(b"# the bytes\n")
    (root / "real" / "r.envelope.json").write_text("{}")
    real_readlink = os.readlink

    def swapped(what: str, *args: object, **kwargs: object) -> str:
        if what == str(root / "handoff"):
            os.unlink(what)
            os.rename(root / "real", what)  # the link's target, moved into its place
        return real_readlink(what, *args, **kwargs)  # type: ignore[arg-type]

    (root / "handoff").symlink_to("real")
    monkeypatch.setattr(os, "readlink", swapped)
    location = locate_payload(root / "handoff" / "r.envelope.json", "r.md", root)
    with open_payload(location) as stream:
        assert stream.read() == b"# the bytes\n"


def test_a_directory_swapped_for_a_link_after_locating_is_not_followed(tmp_path: Path) -> None:
    """The reported race: the payload is located (inside), then a directory component is
    swapped for a link to a directory outside holding other bytes. The gate must read
    the file it located, never the one the swapped name now points at."""
    root = tmp_path / "proj"
    (root / "handoff").mkdir(parents=True)
    (root / "handoff" / "r.md").write_bytes(b"# the judged bytes\n")
    envelope = root / "handoff" / "r.envelope.json"
    envelope.write_text("{}")
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "r.md").write_bytes(b"# bytes from outside\n")
    location = locate_payload(envelope, "r.md", root)
    (root / "handoff").rename(root / "handoff.old")
    (root / "handoff").symlink_to(evil)
    with open_payload(location) as stream:
        assert stream.read() == b"# the judged bytes\n"


# ------------------------------------------------------------------ the gates' state


@pytest.mark.parametrize("linked", [".eidolons", ".eidolons/.trace"])
def test_a_symlinked_state_directory_leaving_the_project_is_refused(
    cli: Cli, project: Path, tmp_path: Path, linked: str
) -> None:
    """A trace directory linked out of the project: the gate must not append there."""
    _payload, envelope, _doc = emit_payload(cli, project, NAME, BODY, "--no-trace")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / ".trace").mkdir(parents=True)
    target = project / linked
    if target.exists():
        os.rename(target, tmp_path / "moved")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(elsewhere if linked == ".eidolons" else elsewhere / ".trace")
    r = cli("verify-envelope", envelope, "--block", "--root", project)
    assert r.code == 3, r.err
    assert "symbolic link" in r.err and "Traceback" not in r.err
    assert list(elsewhere.rglob("*.jsonl")) == []


def test_a_symlinked_trace_file_is_refused(cli: Cli, project: Path, tmp_path: Path) -> None:
    _payload, envelope, doc = emit_payload(cli, project, NAME, BODY, "--no-trace")
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(b"")
    trace_dir = project / ".eidolons" / ".trace"
    trace_dir.mkdir(parents=True, exist_ok=True)
    trace = trace_dir / f"{doc['thread_id']}.jsonl"
    trace.unlink(missing_ok=True)
    trace.symlink_to(outside)
    r = cli("verify-envelope", envelope, "--block", "--root", project)
    assert r.code == 3 and "symbolic link" in r.err
    assert outside.read_bytes() == b""


def test_the_receiver_never_reads_evidence_through_a_linked_trace_dir(
    cli: Cli, project: Path, tmp_path: Path
) -> None:
    """A pass recorded in a trace outside the project (reached through a linked
    ``.eidolons/.trace``) is not evidence: the receiver refuses, it does not follow."""
    payload, envelope, doc = emit_payload(cli, project)
    assert cli("verify-envelope", envelope, "--block").code == 0
    trace_dir = project / ".eidolons" / ".trace"
    elsewhere = tmp_path / "elsewhere-trace"
    trace_dir.rename(elsewhere)
    trace_dir.symlink_to(elsewhere)
    r = cli("verify-incoming", payload, "--as", "vigil", "--json")
    assert r.code == 3
    out = r.json()
    assert out["failure_code"] == "UNVERIFIED"
    assert "symbolic link" in json.dumps(out["failures"])
    assert [e["event"] for e in read_trace(elsewhere / f"{doc['thread_id']}.jsonl")] == [
        "emit",
        "verify_pass",
    ]
