"""Reading the PATH arguments of ``eidolons trace show|graph|verify|cost|otel``: a
directory (its ``*.envelope.json``), a ``.jsonl`` trace file, an envelope file, or a
thread id of the project's trace store. Anything else, or a damaged envelope or line, is
a problem reported beside the result.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from eidolons.ecl.envelope import Envelope
from eidolons.ecl.grammar import loads_strict
from eidolons.errors import InputError
from eidolons.io.payload import find_envelopes, read_envelope_bytes
from eidolons.trace.chain import Hop, hops_from_events, merge, order_hops
from eidolons.trace.log import JsonlStore, read_events, thread_file_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from eidolons.io.config import Limits
    from eidolons.trace.log import TraceLine
    from eidolons.trace.store import TraceStore

    #: traces already read, by ``("file", path)`` or ``("thread", id)``: their lines
    PreRead = Mapping[tuple[str, str], Sequence[TraceLine]]


#: what a view reads an envelope without an ``integrity`` block as (upstream's trace
#: fixtures have none): a digest still to fill, so unverifiable, never a pass
UNFILLED = {"method": "sha256", "value": ""}
NO_INTEGRITY = "no integrity block"


class EnvelopeFile:
    """One envelope file read once: its bytes' SHA-256 and parsed object, or why not;
    ``unverifiable``: why no gate could check it though a view can read it."""

    __slots__ = ("envelope", "error", "path", "sha256", "unverifiable")

    def __init__(
        self,
        path: str,
        envelope: Envelope | None,
        sha256: str | None = None,
        error: str | None = None,
        unverifiable: str | None = None,
    ) -> None:
        self.path = path
        self.envelope = envelope
        self.sha256 = sha256
        self.error = error
        self.unverifiable = unverifiable

    @property
    def data(self) -> Mapping[str, Any] | None:
        return self.envelope.data if self.envelope is not None else None


class Collected:
    """What the PATHs named: envelope files, trace files and thread ids, and the problems
    met while resolving them (each one line for stderr)."""

    __slots__ = ("envelopes", "problems", "threads", "trace_files")

    def __init__(self) -> None:
        self.envelopes: list[EnvelopeFile] = []
        self.trace_files: list[Path] = []
        self.threads: list[str] = []
        self.problems: list[str] = []

    @property
    def empty(self) -> bool:
        return not (self.envelopes or self.trace_files or self.threads)

    @property
    def trace_only(self) -> bool:
        return not self.envelopes and bool(self.trace_files or self.threads)


def read_envelope(path: str, limits: Limits) -> EnvelopeFile:
    """The envelope at ``path``, strictly parsed; one with no ``integrity`` block at all
    is read with :data:`UNFILLED` and marked unverifiable (a view is not a gate)."""

    try:
        raw = read_envelope_bytes(Path(path), limits.max_envelope_bytes)
        doc = loads_strict(raw, limits)
        bare = isinstance(doc, dict) and "integrity" not in doc
        env = Envelope.from_dict({**doc, "integrity": dict(UNFILLED)} if bare else doc)
    except InputError as exc:  # EnvelopeError included
        return EnvelopeFile(path, None, error=str(exc))
    sha = hashlib.sha256(raw).hexdigest()
    return EnvelopeFile(path, env, sha, unverifiable=NO_INTEGRITY if bare else None)


def collect(paths: Sequence[str], store: TraceStore, limits: Limits) -> Collected:

    out = Collected()
    seen: set[str] = set()
    for arg in paths:
        names: list[str]
        if os.path.isdir(arg):
            try:
                names = find_envelopes(arg)
            except InputError as exc:
                out.problems.append(f"{exc}; skipped")
                continue
            if not names:
                out.problems.append(f"no *.envelope.json under {arg}; skipped")
        elif os.path.isfile(arg) and arg.endswith(".jsonl"):
            out.trace_files.append(Path(arg))
            continue
        elif os.path.isfile(arg):
            names = [arg]
        elif thread_file_name(arg) == arg and store.has_thread(arg):
            if arg not in out.threads:
                out.threads.append(arg)
            continue
        else:
            out.problems.append(
                f"{arg}: no such file, and not a valid thread id; skipped"
                if thread_file_name(arg) != arg
                else f"{arg}: no such file, and no trace for a thread of that id; skipped"
            )
            continue
        for name in names:
            if name in seen:
                continue
            seen.add(name)
            found = read_envelope(name, limits)
            if found.error is not None:
                out.problems.append(f"{name}: {found.error}; skipped")
            out.envelopes.append(found)
    return out


def not_a_trace(path: Path) -> str | None:
    """Why the file at *path* is not a trace, or None when it may be one. The rule: its first
    non-blank line is a JSON object with a string ``event`` field (an empty file is an
    empty trace). Only the first line is read."""

    try:
        for line in read_events(path):
            if line.event is None:
                return f"line {line.lineno} is not a trace event: {line.error}"
            if not isinstance(line.event.get("event"), str):
                return f"line {line.lineno} is not a trace event: a JSON object with no event"
            return None
    except InputError:
        return None  # unreadable: reported by the reader as before
    return None


def _read(name: str, lines: Any, problems: list[str]) -> list[dict[str, Any]]:

    events: list[dict[str, Any]] = []
    try:
        for line in lines:
            if line.event is None:
                problems.append(f"{name}:{line.lineno}: damaged line skipped: {line.error}")
            else:
                events.append(line.event)
    except InputError as exc:
        problems.append(f"{exc}; skipped")
    return events


def trace_events(
    collected: Collected, store: TraceStore, read: PreRead | None = None
) -> list[dict[str, Any]]:
    """The events of every trace named (files, then threads), then, for envelope PATHs,
    the events their own threads recorded for them (so their verdicts can be shown).
    A trace in ``read`` is taken from there, not read again (``trace verify`` judges the
    events and the hash chain of one read). Damaged lines are reported in
    ``collected.problems``."""

    read = read or {}
    problems = collected.problems
    events: list[dict[str, Any]] = []
    for path in collected.trace_files:
        pre = read.get(("file", str(path)))
        found = JsonlStore(path.parent, file=path).iter_thread(None) if pre is None else pre
        events += _read(str(path), found, problems)
    for thread in collected.threads:
        lines = read.get(("thread", thread))
        events += _read(thread, store.iter_thread(thread) if lines is None else lines, problems)
    wanted: dict[str, set[str]] = {}
    for env in collected.envelopes:
        tid, mid = (env.data.get("thread_id"), env.data.get("message_id")) if env.data else (0, 0)
        if isinstance(tid, str) and isinstance(mid, str) and tid not in collected.threads:
            wanted.setdefault(tid, set()).add(mid)
    for thread, ids in wanted.items():
        if store.has_thread(thread):
            own = _read(thread, store.iter_thread(thread), problems)
            events += [e for e in own if e.get("message_id") in ids]
    return events


def hops(collected: Collected, store: TraceStore, read: PreRead | None = None) -> list[Hop]:
    """Every hop the PATHs describe, ordered by parent and time (traces in ``read``: as
    :func:`trace_events`)."""
    described = []
    for env in collected.envelopes:
        if env.data is not None:
            described.append(Hop.from_envelope(env.data, env.path))
            described[-1].unverifiable = env.unverifiable
    recorded = hops_from_events(trace_events(collected, store, read))
    return order_hops(merge(described, recorded))
