"""Host anchors of trace heads (ADR 0037): a cut or rewritten trace tail must show.

Each append records the thread's ``seq`` and line hash in the host's ``heads/``; ``trace
verify`` reports a trace shorter than its head, or other bytes at that ``seq``, as a break,
and a trace with no head as unanchored.

See ADR 0036.
"""

from __future__ import annotations

import os

from eidolons.ecl.integrity import sha256_hex
from eidolons.io import paths as pathstr

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path
    from typing import Any

    from eidolons.io.paths import StrPath

HEADS_DIR = "heads"


class HeadError(Exception):
    """A head file that exists but cannot be read or is malformed (fails closed)."""


def heads_dir() -> str:
    from eidolons.io.project import config_dir

    return pathstr.join(config_dir(), HEADS_DIR)


def _trace_key(trace: StrPath) -> str:
    return os.path.realpath(trace)


def _head_file(trace: StrPath, key: str | None = None) -> str:
    name = (key if key is not None else _trace_key(trace)).encode("utf-8", "surrogateescape")
    return pathstr.join(heads_dir(), f"{sha256_hex(name)}.head")


def head_path(trace: StrPath, key: str | None = None) -> Path:
    """Where this host keeps the head of ``trace``."""
    from pathlib import Path

    return Path(_head_file(trace, key))


SLOT = 128  # bytes per slot; two slots, the head at seq n is written in slot n % 2


def _slot(key: str, seq: int, sha256: str) -> bytes:
    check = sha256_hex(f"{key}\n{seq}\n{sha256}".encode("utf-8", "surrogateescape"))
    return f"{seq:020d} {sha256} {check[:32]}\n".encode().ljust(SLOT, b" ")


def record(trace: StrPath, seq: int, sha256: str, prev: str) -> bool:
    """Record ``(seq, sha256)`` as the head of ``trace`` on this host (under the trace's
    append lock): two checksummed slots, slot ``seq % 2`` overwritten by one ``pwrite``, so
    a torn write leaves the previous head valid (ADR 0037). The head moves only from the
    line this append follows, or when there is none: a tail cut or rewritten before keeps
    the old head (returns False). Raises ``OSError``."""
    key = _trace_key(trace)
    path = _head_file(trace, key)
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except FileNotFoundError:  # the first head on this host
        os.makedirs(pathstr.parent(path), mode=0o700, exist_ok=True)
        fd = os.open(path, flags, 0o600)
    try:
        old = _best(key, os.pread(fd, 2 * SLOT, 0))
        if old is not None and old != (seq - 1, prev):
            return False
        os.pwrite(fd, _slot(key, seq, sha256), (seq % 2) * SLOT)
        if os.environ.get("EIDOLONS_TRACE_FSYNC") == "1":
            os.fsync(fd)
    finally:
        os.close(fd)
    return True


def _best(key: str, raw: bytes) -> tuple[int, str] | None:
    """The valid slot with the higher ``seq``; None when neither slot is valid."""
    best: tuple[int, str] | None = None
    for at in (0, SLOT):
        fields = raw[at : at + SLOT].split()
        if len(fields) != 3 or not fields[0].isdigit():
            continue
        seq, sha = int(fields[0]), fields[1].decode("ascii", "replace")
        if seq >= 1 and _slot(key, seq, sha) == raw[at : at + SLOT]:
            best = (seq, sha) if best is None or seq > best[0] else best
    return best


def recorded(trace: StrPath) -> tuple[int, str] | None:
    """The head this host recorded for ``trace`` (the valid slot with the higher
    ``seq``), None when there is none; raises :class:`HeadError` for a head file that is
    unreadable or holds no valid slot."""
    key = _trace_key(trace)
    path = head_path(trace, key)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise HeadError(f"cannot read the trace head {path}: {exc.strerror}") from None
    best = _best(key, raw)
    if best is None:
        raise HeadError(f"the trace head {path} is malformed")
    return best


def check_head(lines: Sequence[bytes], head: tuple[int, str] | None) -> dict[str, Any]:
    """Pure: the trace's non-blank lines against the head recorded on this host.
    ``state``: ``anchored`` (the line at the head's ``seq`` is the recorded one; ``after``
    lines were appended after it without a head, e.g. by another tool), ``none`` (no
    head on this host), ``cut`` or ``rewritten`` (both a break, ``reason`` says which)."""
    from eidolons.ecl.tracechain import line_hash

    if head is None:
        return {"state": "none", "ok": True, "reason": "no head anchor on this host"}
    seq, sha = head
    out: dict[str, Any] = {"seq": seq, "sha256": sha}
    if len(lines) < seq:
        return {
            **out,
            "state": "cut",
            "ok": False,
            "reason": f"tail cut or rewritten after seq {len(lines)}: this host recorded "
            f"the head at seq {seq}",
        }
    if line_hash(lines[seq - 1]) != sha:
        return {
            **out,
            "state": "rewritten",
            "ok": False,
            "reason": f"tail cut or rewritten: the line at seq {seq} is not the head this "
            "host recorded",
        }
    after = len(lines) - seq
    return {**out, "state": "anchored", "ok": True, "after": after}
