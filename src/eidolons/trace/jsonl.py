"""The default store: one ECL JSONL file per thread (rules in :mod:`eidolons.trace.log`)."""

from __future__ import annotations

import os

from eidolons.errors import InputError, TraceWriteError, UsageError
from eidolons.io import paths as pathstr
from eidolons.io.config import TRACE_DIR, trace_scan_bound
from eidolons.io.files import deadline
from eidolons.trace.log import (
    TraceLine,
    append_event,
    open_trace,
    payload_search_lines,
    read_events,
    read_new_events,
    read_raw_lines,
    reverse_lines,
    thread_file_name,
    thread_trace_path,
)
from eidolons.trace.store import (
    Appended,
    TraceReadError,
    TraceStore,
    first_payload_event,
    is_payload_event,
    judged_line,
    latest_counted,
    verdict_needle,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from pathlib import Path
    from typing import Any

    from eidolons.io.paths import StrPath


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
        from eidolons.trace.verdictindex import update

        extra = self._own_key(event)
        try:  # one deadline for the trace's lock and then the payload index's
            until = deadline()
        except UsageError as exc:
            raise TraceWriteError(f"cannot append to trace {path}: {exc}") from None

        def after(fd: int, start: int, line: bytes, before: os.stat_result) -> None:
            update(fd, start, line)  # never raises
            self.index_payloads(extra, before, until)

        line = append_event(path, event, after=after, until=until)
        from eidolons.ecl.jsontext import loads

        return Appended(loads(line), line, str(path))

    def _own_key(self, event: Mapping[str, Any]) -> list[str]:
        """The payload key of the payload event this append writes: the index names it even when
        the full search would not read the line back (``--trace FILE``, a trace padded past the
        scan bound)."""
        key = event.get("payload_path")
        if not isinstance(key, str) or not is_payload_event(event, [key]):
            return []
        return [key]

    def index_payloads(
        self,
        extra: list[str] | None = None,
        appended: os.stat_result | None = None,
        until: float | None = None,
    ) -> None:
        """Bring this host's payload index (ADR 0110) up to the project's trace files, under the
        trace's append lock (``appended``: the trace's ``fstat`` before the line; ``until``: the
        lock deadline it shares). Never raises: an index left behind covers less, and its
        readers take the full rule."""
        from eidolons.trace.payloadfill import refresh

        try:
            refresh(str(self.root), is_payload_event, extra or (), appended, until)
        except Exception:  # a hint: what it does not cover is read in full
            pass

    def latest_verdict(self, thread_id: str | None, message_id: str) -> dict[str, Any] | None:
        # the verdict index answers in O(1) when it checks out (ADR 0087), else the scan
        from eidolons.trace.verdictindex import lookup

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
                lines = reverse_lines(
                    fd, st.st_size, contains=needle, max_bytes=bound, name=path, decode=judged_line
                )
                return latest_counted(lines, message_id)
            finally:
                os.close(fd)
        except InputError as exc:
            raise TraceReadError(str(exc)) from None
        return None

    def iter_thread(self, thread_id: str | None) -> Iterator[TraceLine]:
        try:
            yield from read_events(self._file(thread_id), judged_line)
        except InputError as exc:
            raise TraceReadError(str(exc)) from None

    def iter_raw(self, thread_id: str | None) -> Iterator[bytes]:
        try:
            yield from read_raw_lines(self._file(thread_id))
        except InputError as exc:
            raise TraceReadError(str(exc)) from None

    def read_new(self, thread_id: str | None, cursor: int) -> tuple[list[TraceLine], int]:
        try:
            return read_new_events(self._file(thread_id), cursor, judged_line)
        except InputError as exc:
            raise TraceReadError(str(exc)) from None

    def has_thread(self, thread_id: str) -> bool:
        return os.path.isfile(self._file(thread_id))

    def find_payload(self, keys: list[str]) -> dict[str, Any] | None:
        try:  # checks each file's size before reading it: a sparse hole is never read
            return first_payload_event(payload_search_lines(self.root), keys)
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
