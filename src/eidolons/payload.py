"""Reading untrusted files: the envelope itself and the payload it points at.

Payload resolution order (first candidate that exists decides; see ADR 0002):

1. ``artifact.path`` relative to the envelope's directory;
2. the basename of ``artifact.path`` next to the envelope;
3. ``artifact.path`` relative to the project root;
4. the envelope's own name with ``.envelope.json`` removed.

The first candidate that exists (even as a dangling symlink) must resolve to a regular
file inside the boundary, or the payload is refused; later candidates are not tried, so
a planted file cannot be reached by making an earlier one fail. The boundary is the
project root when the envelope (after resolving symlinks) lies inside it, else the
envelope's own directory. Files are opened with ``O_NONBLOCK`` and checked with
``fstat`` on the open descriptor, so a FIFO, device or directory is never read and never
hangs the gate.
"""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

from eidolons.errors import EidolonsError, InputError

ENVELOPE_SUFFIX = ".envelope.json"


def find_envelopes(top: str) -> list[str]:
    """Regular files named ``*.envelope.json`` below the directory ``top``, in
    ``LC_ALL=C`` path order (as ``find -type f | sort``: links are neither followed nor
    listed). A directory that cannot be listed raises :class:`InputError`: a silently
    skipped envelope could hide a failure."""
    found: list[str] = []
    stack = [top]
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as it:
                entries = list(it)
        except OSError as exc:
            raise InputError(f"cannot list {directory}: {exc.strerror or exc}") from None
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            elif entry.name.endswith(ENVELOPE_SUFFIX) and entry.is_file(follow_symlinks=False):
                found.append(entry.path)
    return sorted(found, key=os.fsencode)


class PayloadError(EidolonsError):
    """The payload cannot be resolved to a regular file inside the boundary."""

    code = "MISSING_PAYLOAD"


class PayloadLocation:
    """A resolved payload: ``path`` as named, ``real`` after resolving symlinks, and the
    resolution ``rule`` that found it."""

    __slots__ = ("path", "real", "rule")

    def __init__(self, path: Path, real: Path, rule: str) -> None:
        self.path = path
        self.real = real
        self.rule = rule

    def __repr__(self) -> str:
        return f"PayloadLocation({str(self.path)!r}, rule={self.rule!r})"


def _open_regular(path: Path) -> io.FileIO:
    """Open ``path`` read-only without following a final symlink or blocking on a FIFO,
    and refuse anything but a regular file."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise PayloadError(f"{path} is not a regular file")
        os.set_blocking(fd, True)
        return io.FileIO(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise


def read_envelope_bytes(path: Path, max_bytes: int) -> bytes:
    """Read an envelope file (a regular file, at most ``max_bytes``). Raises InputError."""
    try:
        with _open_regular(Path(os.path.realpath(path))) as fh:
            data = fh.read(max_bytes + 1)
    except PayloadError:
        raise InputError(f"envelope {path} is not a regular file") from None
    except FileNotFoundError:
        raise InputError(f"envelope {path} does not exist") from None
    except OSError as exc:
        raise InputError(f"cannot read envelope {path}: {exc.strerror}") from None
    if len(data) > max_bytes:
        raise InputError(f"envelope {path} is larger than the {max_bytes}-byte cap")
    return data


def boundary_for(envelope_real: Path, root_real: Path) -> Path:
    if envelope_real.is_relative_to(root_real):
        return root_real
    return envelope_real.parent


def candidates(envelope_real: Path, artifact_path: str, root_real: Path) -> list[tuple[str, Path]]:
    envdir = envelope_real.parent
    out = [
        ("envelope-dir", envdir / artifact_path),
        ("basename", envdir / Path(artifact_path).name),
        ("project-root", root_real / artifact_path),
    ]
    if envelope_real.name.endswith(ENVELOPE_SUFFIX) and len(envelope_real.name) > len(
        ENVELOPE_SUFFIX
    ):
        out.append(("envelope-name", envdir / envelope_real.name[: -len(ENVELOPE_SUFFIX)]))
    return out


def locate_payload(envelope_path: Path, artifact_path: str, root: Path) -> PayloadLocation:
    """Resolve the payload per the module rules. Raises :class:`PayloadError`."""
    envelope_real = Path(os.path.realpath(envelope_path))
    root_real = Path(os.path.realpath(root))
    boundary = boundary_for(envelope_real, root_real)
    seen: set[Path] = set()
    for rule, candidate in candidates(envelope_real, artifact_path, root_real):
        if candidate in seen:
            continue
        seen.add(candidate)
        if not os.path.lexists(candidate):
            continue
        try:
            real = Path(os.path.realpath(candidate, strict=True))
        except OSError:
            raise PayloadError(f"payload {candidate} is a dangling or looping symlink") from None
        if not real.is_relative_to(boundary):
            raise PayloadError(f"payload {candidate} resolves outside {boundary}")
        return PayloadLocation(candidate, real, rule)
    raise PayloadError(
        f"artifact.path={artifact_path} not found next to the envelope or under {root_real}"
    )


def open_payload(location: PayloadLocation) -> io.FileIO:
    """Open a located payload (regular file only). Raises :class:`PayloadError`."""
    try:
        return _open_regular(location.real)
    except PayloadError:
        raise
    except OSError as exc:
        raise PayloadError(f"cannot open payload {location.path}: {exc.strerror}") from None


def default_envelope_path(payload: Path) -> Path:
    """``${PAYLOAD%.*}.envelope.json``, the seeds' sibling naming."""
    return payload.with_suffix("").with_name(payload.with_suffix("").name + ENVELOPE_SUFFIX)


class AmbiguousEnvelope(InputError):
    code = "AMBIGUOUS"


def find_envelope(artefact: Path) -> Path | None:
    """The receiver gate's trigger: ``${ARTEFACT%.*}.envelope.json``, else
    ``ARTEFACT.envelope.json`` (an artefact named ``*.envelope.json`` is the envelope).
    None when neither exists: not an ECL hand-off. Raises :class:`AmbiguousEnvelope` when
    both exist."""
    if artefact.name.endswith(ENVELOPE_SUFFIX):
        return artefact
    sibling = default_envelope_path(artefact)
    appended = artefact.with_name(artefact.name + ENVELOPE_SUFFIX)
    found = [p for p in (sibling, appended) if os.path.lexists(p)]
    if len(found) == 2 and sibling != appended:
        raise AmbiguousEnvelope(
            f"both {sibling.name} and {appended.name} exist beside {artefact.name}"
        )
    return found[0] if found else None
