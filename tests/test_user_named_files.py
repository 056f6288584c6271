"""The plain reads and writes of user-named files (``eidolons.io.files``)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from eidolons.io.files import create, empty_dir, read_bytes, write_bytes


def test_write_then_read_gives_the_same_bytes(tmp_path: Path) -> None:
    path = tmp_path / "out.bin"
    write_bytes(path, b"\x00one\ntwo")
    assert read_bytes(path) == b"\x00one\ntwo"
    write_bytes(path, b"shorter")  # truncated, not overlaid
    assert read_bytes(path) == b"shorter"


def test_write_sets_the_mode_when_given(tmp_path: Path) -> None:
    path = tmp_path / "ro"
    write_bytes(path, b"x", mode=0o400)
    assert stat.S_IMODE(path.stat().st_mode) == 0o400


def test_write_makes_parent_directories_only_when_asked(tmp_path: Path) -> None:
    nested = tmp_path / "a" / "b" / "f"
    with pytest.raises(FileNotFoundError):
        write_bytes(nested, b"x")
    write_bytes(nested, b"x", parents=True)
    assert read_bytes(nested) == b"x"


def test_create_refuses_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "new"
    with create(path) as fh:
        fh.write(b"x")
    with pytest.raises(FileExistsError):
        create(path)
    assert read_bytes(path) == b"x"


def test_empty_dir_creates_and_tells_whether_it_is_empty(tmp_path: Path) -> None:
    target = tmp_path / "x" / "y"
    assert empty_dir(target) is True and target.is_dir()
    (target / "f").write_bytes(b"")
    assert empty_dir(target) is False
    with pytest.raises(FileExistsError):
        empty_dir(target / "f")  # a file, not a directory
