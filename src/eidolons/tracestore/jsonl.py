"""The default store: one ECL JSONL file per thread (rules in :mod:`eidolons.trace`)."""

from __future__ import annotations

import itertools
import os

from eidolons import pathstr
from eidolons.errors import InputError, TraceWriteError
from eidolons.state import TRACE_DIR, trace_scan_bound
from eidolons.trace import (
    PAYLOAD_FIELD,
    TraceLine,
    append_event,
    decode_line,
    find_payload_event,
    open_trace,
    payload_search_lines,
    read_events,
    read_new_events,
    read_raw_lines,
    reverse_lines,
    thread_file_name,
    thread_trace_path,
)
from eidolons.tracestore import (
    Appended,
    TraceReadError,
    TraceStore,
    is_orchestrator_verdict,
    is_payload_event,
    payload_needle,
    verdict_needle,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from pathlib import Path
    from typing import Any

    from eidolons.pathstr import StrPath


class JsonlStore(TraceStore):
    """``<root>/.eidolons/.trace/<thread>.jsonl``; with ``file``, every thread is that one
    file (``--trace FILE``)."""

    kind = "jsonl"

    def __init__(self, root: StrPath, file: StrPath | None = None) -> None:
        self.root = root
        self.file = file

    def path(self, thread_id: str | None) -> Path:
        """The thread's file (:meth:`_file` as a :class:`~pathlib.Path`)."""
        from pathlib import Path

        return Path(self._file(thread_id))

    def _file(self, thread_id: str | None) -> StrPath:
        return self.file if self.file is not None else thread_trace_path(self.root, thread_id)

    def describe(self) -> str:
        return str(self.file if self.file is not None else pathstr.join(self.root, TRACE_DIR))

    def location(self, thread_id: str | None) -> str:
        return str(self._file(thread_id))

    def append(self, thread_id: str | None, event: Mapping[str, Any]) -> Appended:
        path = self._file(thread_id)
        from eidolons.tracestore.verdictindex import update

        line = append_event(path, event, before=self._index_hook(event), after=update)
        from eidolons.ecl.jsontext import loads

        return Appended(loads(line), line, str(path))

    def _index_hook(self, event: Mapping[str, Any]) -> Callable[[], None] | None:
        """Adds a payload event's ``payload_path`` to the payload index, under the lock."""
        key = event.get("payload_path")
        if not isinstance(key, str) or not is_payload_event(event, [key]):
            return None

        def add() -> None:
            from eidolons.beneath import BeneathError
            from eidolons.payloadindex import entry, read_index, record

            # a path the index names already is not written again: every reception of a
            # hand-off (the receiver's verify_pass) would grow the index the hook reads
            # whole on every event. Entries are never removed, and the hook only asks
            # whether the index names the path (ADR 0088)
            named = read_index(str(self.root))
            if named is not None and b"\n" + entry(key) in named:
                return
            try:
                record(str(self.root), key, self.payload_paths)
            except (BeneathError, OSError) as exc:
                raise TraceWriteError(f"cannot add to the payload index: {exc}") from None

        return add

    def payload_paths(self) -> list[str] | None:
        """Every payload path the project's traces name (``emit``/verification events),
        or None when they cannot be read within the scan bound: every line the payload
        search reads (:func:`eidolons.trace.payload_search_lines`, every ``*.jsonl`` of
        the trace directory whatever its name, not only this store's file or the thread
        files), so that the index built from it never lacks a payload the search finds;
        with ``file`` (``--trace FILE``), that file's lines too."""
        found: dict[str, None] = {}
        try:
            pieces: Iterator[bytes] = payload_search_lines(self.root)
            if self.file is not None:
                if os.stat(self.file).st_size > trace_scan_bound():
                    return None
                pieces = itertools.chain(pieces, self.iter_raw(None))
            for raw in pieces:
                if PAYLOAD_FIELD not in raw:
                    continue
                event = decode_line(raw.rstrip(b"\n"), 0).event
                key = event.get("payload_path") if event else None
                if isinstance(key, str) and is_payload_event(event, [key]):
                    found[key] = None
        except (InputError, OSError):  # a missing FILE too: it is being appended to
            return None
        return list(found)

    def latest_verdict(self, thread_id: str | None, message_id: str) -> dict[str, Any] | None:
        # the verdict index answers in O(1) when it checks out, scanning only the tail it
        # does not cover (ADR 0087); else the full backward scan. Both pre-filter lines
        # on the id as this tool writes it and judge the decoded event by the one rule
        from eidolons.tracestore.verdictindex import lookup

        path = self._file(thread_id)
        try:
            bound = trace_scan_bound()  # a trace made huge must not stall a gate (ADR 0021)
            try:
                fd = open_trace(path)
            except FileNotFoundError:
                return None
            try:
                st = os.fstat(fd)
                found = lookup(fd, st, message_id, bound, path)
                if found is not None:
                    return found.event
                needle = verdict_needle(message_id)
                for line in reverse_lines(
                    fd, st.st_size, contains=needle, max_bytes=bound, name=path
                ):
                    if is_orchestrator_verdict(line.event, message_id):
                        return line.event
            finally:
                os.close(fd)
        except InputError as exc:
            raise TraceReadError(str(exc)) from None
        return None

    def iter_thread(self, thread_id: str | None) -> Iterator[TraceLine]:
        try:
            yield from read_events(self._file(thread_id))
        except InputError as exc:
            raise TraceReadError(str(exc)) from None

    def iter_raw(self, thread_id: str | None) -> Iterator[bytes]:
        try:
            yield from read_raw_lines(self._file(thread_id))
        except InputError as exc:
            raise TraceReadError(str(exc)) from None

    def read_new(self, thread_id: str | None, cursor: int) -> tuple[list[TraceLine], int]:
        try:
            return read_new_events(self._file(thread_id), cursor)
        except InputError as exc:
            raise TraceReadError(str(exc)) from None

    def has_thread(self, thread_id: str) -> bool:
        return os.path.isfile(self._file(thread_id))

    def find_payload(self, keys: list[str]) -> dict[str, Any] | None:
        try:  # checks each file's size before reading it: a sparse hole is never read
            return find_payload_event(self.root, keys, payload_needle, is_payload_event)
        except InputError as exc:
            raise TraceReadError(str(exc)) from None

    def threads(self) -> list[str]:
        if self.file is not None:
            return [pathstr.stem(self.file)]
        try:
            names = os.listdir(pathstr.join(self.root, TRACE_DIR))
        except FileNotFoundError:
            return []
        except OSError as exc:
            where = pathstr.join(self.root, TRACE_DIR)
            raise TraceReadError(f"cannot list {where}: {exc.strerror}") from None
        ids = [n[: -len(".jsonl")] for n in names if n.endswith(".jsonl")]
        return sorted(i for i in ids if thread_file_name(i) == i)
