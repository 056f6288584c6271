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
envelope's own directory. Every file (envelope and payload) is opened beneath its
boundary by descriptor, component by component (:mod:`eidolons.io.files`): a directory
swapped for a link between the check and the open is never followed out, and a FIFO,
device or directory is never read and never hangs the gate.
"""

from __future__ import annotations

import errno
import io
import os

from eidolons.ecl.integrity import Digest, PayloadTooLarge, digest_stream
from eidolons.errors import EidolonsError, InputError
from eidolons.io import paths as pathstr
from eidolons.io.files import BeneathError, Opened, open_path_beneath

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from pathlib import Path
    from typing import Any

    from eidolons.ecl.integrity import Writable
    from eidolons.io.paths import StrPath

    #: what :func:`find_envelopes` found in each directory it listed, by (dev, ino)
    Listings = dict[tuple[int, int], tuple[list[str], list[str]]]

ENVELOPE_SUFFIX = ".envelope.json"


def find_envelopes(top: str, listed: Listings | None = None) -> list[str]:
    """Regular files named ``*.envelope.json`` below the directory ``top``, in
    ``LC_ALL=C`` path order (as ``find -type f | sort``: links are neither followed nor
    listed). A directory that cannot be listed raises :class:`InputError`: a silently
    skipped envelope could hide a failure.

    ``listed``, shared by the calls of one command, lists each directory once whatever
    path names it (``d``, ``d/``, a link to it, a parent of it): a directory is known by
    its ``(st_dev, st_ino)``, and one listed before gives what its listing found then
    (spelled by the path that first listed it), without being listed again."""
    found: list[str] = []
    stack = [top]
    here: set[tuple[int, int]] = set()  # one call never goes round a directory twice
    while stack:
        directory = stack.pop()
        if listed is None:
            envelopes, subdirectories = _list(directory)
        else:
            try:
                st = os.stat(directory)
            except OSError as exc:
                raise InputError(f"cannot list {directory}: {exc.strerror or exc}") from None
            key = (st.st_dev, st.st_ino)
            if key in here:
                continue
            here.add(key)
            if key not in listed:
                listed[key] = _list(directory)
            envelopes, subdirectories = listed[key]
        found.extend(envelopes)
        stack.extend(subdirectories)
    return sorted(found, key=os.fsencode)


def listed_before(directory: str, listed: Listings) -> bool:
    """Whether ``directory`` (whatever path names it) was listed already with ``listed``
    (:func:`find_envelopes`): what it holds was found then. Raises :class:`OSError`."""
    st = os.stat(directory)
    return (st.st_dev, st.st_ino) in listed


def _list(directory: str) -> tuple[list[str], list[str]]:
    """The envelope files and the subdirectories (links neither) of one directory."""
    try:
        with os.scandir(directory) as it:
            entries = list(it)
    except OSError as exc:
        raise InputError(f"cannot list {directory}: {exc.strerror or exc}") from None
    envelopes: list[str] = []
    subdirectories: list[str] = []
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            subdirectories.append(entry.path)
        elif entry.name.endswith(ENVELOPE_SUFFIX) and entry.is_file(follow_symlinks=False):
            envelopes.append(entry.path)
    return envelopes, subdirectories


class PayloadError(EidolonsError):
    """The payload cannot be resolved to a regular file inside the boundary."""

    code = "MISSING_PAYLOAD"

    def __init__(self, message: str, *, unreadable: str | None = None) -> None:
        super().__init__(message)
        #: the candidate found that is not a regular file (a FIFO, device or directory)
        self.unreadable = unreadable


class PayloadLocation:
    """A resolved and opened payload: ``path`` as named (the candidate), ``real`` (the
    boundary joined with the components opened), the resolution ``rule`` that found it,
    and ``opened``, the descriptor checked to be a regular file beneath the boundary
    (:mod:`eidolons.io.files`). What is hashed is read from that descriptor."""

    __slots__ = ("opened", "path_str", "real_str", "rule")

    def __init__(
        self, path: StrPath, real: StrPath, rule: str, opened: Opened | None = None
    ) -> None:
        #: ``path`` and ``real`` as ``str`` (what the gates use: no pathlib on their path)
        self.path_str = os.fspath(path)
        self.real_str = os.fspath(real)
        self.rule = rule
        self.opened = opened

    @property
    def path(self) -> Path:
        from pathlib import Path

        return Path(self.path_str)

    @property
    def real(self) -> Path:
        from pathlib import Path

        return Path(self.real_str)

    @property
    def identity(self) -> tuple[int, int] | None:
        """``(st_dev, st_ino)`` of the file opened."""
        return self.opened.identity if self.opened is not None else None

    def __repr__(self) -> str:
        return f"PayloadLocation({self.path_str!r}, rule={self.rule!r})"


def read_envelope_bytes(path: StrPath, max_bytes: int, root: StrPath | None = None) -> bytes:
    """Read an envelope file once (a regular file, at most ``max_bytes``), opened beneath
    its boundary by descriptor: the project ``root`` when the envelope lies in it, else
    the envelope's own directory. Raises :class:`InputError`."""
    return read_envelope(path, max_bytes, root)[0]


def read_envelope(
    path: StrPath, max_bytes: int, root: StrPath | None = None, *, root_real: str | None = None
) -> tuple[bytes, str]:
    """:func:`read_envelope_bytes`, and the envelope's resolved path it was opened at.
    ``root_real``: the root already resolved (``os.path.realpath``) by the caller."""
    try:
        opened, real = _open_envelope(path, root, root_real)
        try:
            data = _read_capped(opened, max_bytes)
        finally:
            opened.close()
    except FileNotFoundError:
        raise InputError(f"envelope {path} does not exist") from None
    except BeneathError as exc:
        raise InputError(f"envelope {exc}") from None
    except OSError as exc:
        raise InputError(f"cannot read envelope {path}: {exc.strerror}") from None
    if len(data) > max_bytes:
        raise InputError(f"envelope {path} is larger than the {max_bytes}-byte cap")
    return data, real


def _read_capped(opened: Opened, max_bytes: int) -> bytes:
    """The file's bytes from its start, at most ``max_bytes + 1`` (one more tells the
    cap was passed): one ``pread`` of the size ``fstat`` gave plus one byte (a buffer of
    the cap itself would be allocated on every call), reading on if the file has grown
    since."""
    want = min(max_bytes + 1, opened.st.st_size + 1)
    data = os.pread(opened.fd, want, 0)
    if len(data) == want:  # grown since fstat (or at the cap): read on, to the cap
        while len(data) <= max_bytes:
            more = os.pread(opened.fd, max_bytes + 1 - len(data), len(data))
            if not more:
                break
            data += more
    return data


def _open_envelope(
    path: StrPath, root: StrPath | None, root_real: str | None
) -> tuple[Opened, str]:
    real = pathstr.realpath(path)
    if root_real is None and root is not None:
        root_real = pathstr.realpath(root)
    boundary = boundary_for(real, root_real) if root_real is not None else pathstr.parent(real)
    opened = open_path_beneath(real, boundary, resolved=True)
    if opened is None:
        raise FileNotFoundError(path)
    return opened, real


def boundary_for(envelope_real: str, root_real: str) -> str:
    if pathstr.is_relative_to(envelope_real, root_real):
        return root_real
    return pathstr.parent(envelope_real)


def candidates(
    envelope_real: StrPath, artifact_path: str, root_real: StrPath
) -> list[tuple[str, str]]:
    return list(iter_candidates(envelope_real, artifact_path, root_real))


def iter_candidates(
    envelope_real: StrPath, artifact_path: str, root_real: StrPath
) -> Iterator[tuple[str, str]]:
    """The payload's candidate paths in the order of the module's rules (each made only
    when the ones before it were not found)."""
    envdir = pathstr.parent(envelope_real)
    yield "envelope-dir", pathstr.join(envdir, artifact_path)
    yield "basename", pathstr.join(envdir, pathstr.name(artifact_path))
    yield "project-root", pathstr.join(root_real, artifact_path)
    name = pathstr.name(envelope_real)
    if name.endswith(ENVELOPE_SUFFIX) and len(name) > len(ENVELOPE_SUFFIX):
        yield "envelope-name", pathstr.join(envdir, name[: -len(ENVELOPE_SUFFIX)])


def locate_payload(
    envelope_path: StrPath,
    artifact_path: str,
    root: StrPath,
    *,
    envelope_real: str | None = None,
    root_real: str | None = None,
) -> PayloadLocation:
    """Resolve the payload per the module rules and open it beneath the boundary by
    descriptor. Raises :class:`PayloadError`. ``envelope_real``/``root_real``: the two
    already resolved (``os.path.realpath``) by the caller, for this same check."""
    envelope_real = envelope_real or pathstr.realpath(envelope_path)
    root_real = root_real or pathstr.realpath(root)
    boundary = boundary_for(envelope_real, root_real)
    seen: set[str] = set()
    for rule, candidate in iter_candidates(envelope_real, artifact_path, root_real):
        key = os.path.normpath(candidate)
        if key in seen:
            continue
        seen.add(key)
        try:
            opened = open_path_beneath(candidate, boundary, resolved=True)
        except BeneathError as exc:
            if exc.not_regular:
                raise PayloadError(
                    f"{candidate} is not a regular file", unreadable=candidate
                ) from None
            raise PayloadError(f"payload {exc}") from None
        except OSError as exc:
            raise PayloadError(
                f"cannot open payload {candidate}: {exc.strerror}", unreadable=candidate
            ) from None
        if opened is None:
            continue
        return PayloadLocation(candidate, opened.real, rule, opened)
    raise PayloadError(
        f"artifact.path={artifact_path} not found next to the envelope or under {root_real}"
    )


def open_payload(location: PayloadLocation) -> io.FileIO:
    """A reader over a located payload, from the descriptor that was checked (a location
    built by hand, without one, is opened as a regular file first). Raises
    :class:`PayloadError`."""
    if location.opened is None:
        try:
            real = location.real_str
            location.opened = open_path_beneath(real, pathstr.parent(real))
        except (BeneathError, OSError) as exc:
            raise PayloadError(f"cannot open payload {location.path_str}: {exc}") from None
        if location.opened is None:
            why = os.strerror(errno.ENOENT)
            raise PayloadError(f"cannot open payload {location.path_str}: {why}")
    try:
        return location.opened.file()
    except OSError as exc:
        raise PayloadError(f"cannot open payload {location.path_str}: {exc.strerror}") from None


def hash_payload(
    location: PayloadLocation | bytes,
    method: str,
    key: bytes | None,
    *,
    max_bytes: int,
    keep: bool = False,
    sink: Writable | None = None,
) -> Digest:
    """The one hashing of a payload: one streamed read of the descriptor that was located
    (:func:`eidolons.ecl.integrity.digest_stream`). ``keep`` returns the bytes hashed
    (one copy, read straight into it); ``sink`` receives them as they are hashed. Raises
    :class:`PayloadError` (unreadable, larger than ``max_bytes``). Bytes received in memory
    (``location`` bytes) are hashed the same way, under the same cap."""
    try:
        if isinstance(location, bytes):
            return digest_stream(
                io.BytesIO(location), method, key, max_bytes=max_bytes, keep=keep, sink=sink,
                size_hint=len(location),
            )  # fmt: skip
        with open_payload(location) as stream:
            size = location.opened.st.st_size if location.opened is not None else None
            return digest_stream(
                stream, method, key, max_bytes=max_bytes, keep=keep, sink=sink, size_hint=size
            )
    except PayloadTooLarge as exc:
        raise PayloadError(str(exc)) from None
    except OSError as exc:
        raise PayloadError(f"cannot read payload: {exc.strerror or exc}") from None


def default_envelope_path(payload: Path) -> Path:
    """``${PAYLOAD%.*}.envelope.json``, the seeds' sibling naming."""
    return payload.with_suffix("").with_name(payload.with_suffix("").name + ENVELOPE_SUFFIX)


def sidecar_path(envelope_path: StrPath, suffix: str) -> str:
    """``<stem><suffix>`` beside ``<stem>.envelope.json``: the files that travel with an
    envelope (its receipt, its sender signature)."""
    name = pathstr.name(envelope_path)
    stem = name[: -len(ENVELOPE_SUFFIX)] if name.endswith(ENVELOPE_SUFFIX) else name
    return pathstr.join(pathstr.parent(envelope_path), stem + suffix)


class Sidecars:
    """The evidence that travels with an envelope, its receipt (``.receipt.json``) and its
    sender signature (``.envelope.sig``): the files beside ``envelope_path``, or, when
    ``given`` (suffix -> bytes; a suffix left out is absent), bytes received with the
    envelope in memory, which are never looked for on disk (a hand-off over the network:
    :mod:`eidolons.hosts.a2a`). Either way each is judged by the same rules."""

    __slots__ = ("envelope_path", "given")

    def __init__(self, envelope_path: StrPath, given: Mapping[str, bytes] | None = None) -> None:
        self.envelope_path = envelope_path
        self.given = given

    @classmethod
    def of(cls, source: StrPath | Sidecars) -> Sidecars:
        return source if isinstance(source, Sidecars) else cls(source)

    def path(self, suffix: str) -> str:
        return sidecar_path(self.envelope_path, suffix)

    def exists(self, suffix: str) -> bool:
        if self.given is not None:
            return suffix in self.given
        return os.path.lexists(self.path(suffix))

    def read(self, suffix: str, limit: int, what: str) -> tuple[Any, str | None]:
        """(document, None) of the sidecar (a file read beneath its directory), or (None,
        why)."""
        from eidolons.ecl.grammar import loads_strict
        from eidolons.errors import EnvelopeError

        name = pathstr.name(self.path(suffix))
        try:
            return loads_strict(self.bytes(suffix, limit)), None
        except (InputError, EnvelopeError) as exc:
            return None, f"{what} {name} unreadable: {exc}"

    def bytes(self, suffix: str, limit: int) -> bytes:
        """The sidecar's exact bytes, at most ``limit``; raises :class:`InputError`."""
        if self.given is None:
            return read_envelope_bytes(self.path(suffix), limit)
        if len(self.given[suffix]) > limit:
            raise InputError(f"larger than the {limit}-byte cap")
        return self.given[suffix]


class AmbiguousEnvelope(InputError):
    code = "AMBIGUOUS"


def find_envelope(artifact: Path) -> Path | None:
    """The receiver gate's trigger (:func:`envelope_of`) for a :class:`~pathlib.Path`."""
    from pathlib import Path

    found = envelope_of(str(artifact))
    return None if found is None else artifact if found == str(artifact) else Path(found)


def envelope_of(artifact: str) -> str | None:
    """The receiver gate's trigger: ``${ARTIFACT%.*}.envelope.json``, else
    ``ARTIFACT.envelope.json`` (an artifact named ``*.envelope.json`` is the envelope),
    spelled as :mod:`pathlib` spells them (``artifact`` is, :func:`eidolons.io.paths.pure`).
    None when neither exists: not an ECL hand-off. Raises :class:`AmbiguousEnvelope` when
    both exist."""
    from eidolons.io.paths import envelope_candidates

    name = pathstr.name(artifact)
    if name.endswith(ENVELOPE_SUFFIX):
        return artifact
    sibling, appended = map(pathstr.pure, envelope_candidates(artifact))
    found = [p for p in (sibling, appended) if os.path.lexists(p)]
    if len(found) == 2 and sibling != appended:
        raise AmbiguousEnvelope(
            f"both {pathstr.name(sibling)} and {pathstr.name(appended)} exist beside {name}"
        )
    return found[0] if found else None
