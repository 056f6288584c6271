"""The envelope is read with one ``pread`` of its ``fstat`` size (plus one byte), and a
file that grew since is still read to its end, or to one byte past the cap."""

from __future__ import annotations

from pathlib import Path

import pytest

from eidolons.errors import InputError
from eidolons.io.files import open_path_beneath
from eidolons.io.payload import _read_capped, read_envelope_bytes


@pytest.mark.parametrize("size", [0, 1, 100, 4096, 10_000])
@pytest.mark.parametrize("grow", [0, 1, 5000])
def test_read_is_whole_and_capped(tmp_path: Path, size: int, grow: int) -> None:
    path = tmp_path / "e.envelope.json"
    path.write_bytes(b"a" * size)
    opened = open_path_beneath(path, tmp_path)
    assert opened is not None
    with open(path, "ab") as fh:  # after the fstat the open made
        fh.write(b"b" * grow)
    whole = b"a" * size + b"b" * grow
    for cap in (len(whole) - 1, len(whole), len(whole) + 1, 8000, 1 << 20):
        if cap < 0:
            continue
        assert _read_capped(opened, cap) == whole[: cap + 1]
    opened.close()


def test_over_the_cap_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "e.envelope.json"
    path.write_bytes(b"{}" + b" " * 100)
    assert read_envelope_bytes(path, 102, tmp_path) == b"{}" + b" " * 100
    with pytest.raises(InputError, match="larger than the 101-byte cap"):
        read_envelope_bytes(path, 101, tmp_path)
