"""The trace store: the one way the gates, the ``trace`` verbs and memory reach a trace.

:class:`~eidolons.trace.log.JsonlStore` (the default: one ECL JSONL file per thread) or
:class:`~eidolons.trace.postgres.PostgresStore` (a shared append-only table, ADR 0014),
chosen by :func:`open_store` (ADR 0014). The verdict rule (ADR 0005) is
:func:`judged_line`'s; every reader and lookup applies it through this module.
"""

from __future__ import annotations

import os

from eidolons.ecl.events import EventType, GateName
from eidolons.errors import InputError, TraceWriteError, UsageError
from eidolons.io.paths import STORE_FILE, TRACE_DSN_ENV  # spelled once (ADR 0001)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping, Sequence
    from typing import Any, Self

    from eidolons.io.paths import StrPath
    from eidolons.trace.log import TraceLine

DSN_ENV = TRACE_DSN_ENV
PROJECT_FILE = STORE_FILE
VERDICT_EVENTS = (EventType.VERIFY_PASS, EventType.VERIFY_FAIL)
NOT_COUNTED = "not_counted"  # the key the readers set on a verdict-looking event
WRITTEN_BY = "written_by"  # the key a store that knows who wrote a line sets (PostgreSQL)


class TraceReadError(InputError):
    """The trace store cannot be read (unreachable server, unreadable file, bad config)."""

    code = "TRACE_READ"


class Appended:
    """What :meth:`TraceStore.append` wrote: the event as stored (with its chain link),
    its exact line bytes (no newline) and where it went."""

    __slots__ = ("event", "line", "location")

    def __init__(self, event: dict[str, Any], line: bytes, location: str) -> None:
        self.event = event
        self.line = line
        self.location = location


def verdict_needle(message_id: str) -> bytes:
    """The id as this tool writes it inside a line (compact ASCII JSON, no quotes)."""
    from eidolons.ecl.grammar import dumps

    return dumps(message_id)[1:-1].encode("ascii")


def message_key(message_id: str) -> bytes:
    """The id as a store stamps a verdict row with it (UTF-8)."""
    return message_id.encode("utf-8", "surrogatepass")


class _NoStamp:
    """What a store of line bytes alone (the JSONL files) keeps beside a line: nothing."""


#: what a store keeps beside a line: PostgreSQL's ``verdict_for`` (the message id the row
#: was stamped a verdict for, or None), or this
NO_STAMP = _NoStamp()
if TYPE_CHECKING:
    Stamp = bytes | _NoStamp | None


def looks_like_verdict(event: Mapping[str, Any] | None) -> bool:
    """A line that reads as an orchestrator verdict, whoever wrote it."""
    return (
        event is not None
        and event.get("event") in VERDICT_EVENTS
        and event.get("gate") == GateName.ORCHESTRATOR
    )


def _uncounted(raw: bytes, event: Mapping[str, Any], stamp: Stamp) -> str | None:
    """Why the verdict-looking ``event`` (decoded from ``raw``) is not counted, or None.
    Counted: it names a message id, spelled in ``raw`` as this tool writes it, and where
    the store keeps a stamp (set only for a login bound as the database's orchestrator),
    the row is stamped for that id."""
    mid = event.get("message_id")
    if not isinstance(mid, str):
        return "it names no message id"
    if verdict_needle(mid) not in raw:
        return "its message id is not spelled as eidolons writes it"
    if not isinstance(stamp, _NoStamp) and (stamp is None or bytes(stamp) != message_key(mid)):
        return "no verdict stamp on its row: its writer is not the database's orchestrator"
    return None


def judged_line(
    raw: bytes, lineno: int, stamp: Stamp = NO_STAMP, writer: str | None = None
) -> TraceLine:
    """THE verdict rule (ADR 0005), for the gate and every view and copy: ``raw`` decoded,
    a verdict-looking event the gate would not count marked ``not_counted: <why>``, and
    the login that wrote it as ``written_by`` where the store knows it (both set by the
    reader, never taken from the bytes)."""
    from eidolons.trace.log import decode_line

    line = decode_line(raw, lineno)
    event = line.event
    if event is not None:
        event.pop(NOT_COUNTED, None)
        event.pop(WRITTEN_BY, None)
        if looks_like_verdict(event) and (why := _uncounted(raw, event, stamp)) is not None:
            event[NOT_COUNTED] = why
        if writer is not None:
            event[WRITTEN_BY] = writer
    return line


def counted_for(line: TraceLine) -> str | None:
    """The message id a judged line is a counted orchestrator verdict for, or None."""
    event = line.event
    if not looks_like_verdict(event) or event is None or NOT_COUNTED in event:
        return None
    return str(event["message_id"])


def latest_counted(lines: Iterable[TraceLine], message_id: str) -> dict[str, Any] | None:
    """The first of judged ``lines`` (read latest first) counted for ``message_id``."""
    for line in lines:
        if counted_for(line) == message_id:
            return line.event
    return None


def record_from_line(raw: bytes, message_id: str, stamp: Stamp = NO_STAMP) -> dict[str, Any] | None:
    """The event of ``raw`` when the gate counts it for ``message_id``, else None."""
    if verdict_needle(message_id) not in raw:
        return None
    line = judged_line(raw, 0, stamp)
    return line.event if counted_for(line) == message_id else None


def is_payload_event(event: Mapping[str, Any] | None, keys: list[str]) -> bool:
    """An emit or verification event naming one of ``keys`` as its payload (ADR 0007)."""
    return (
        event is not None
        and event.get("event") in (EventType.EMIT, *VERDICT_EVENTS)
        and event.get("payload_path") in keys
    )


def first_payload_event(lines: Iterable[bytes], keys: list[str]) -> dict[str, Any] | None:
    """The first of raw ``lines`` that is a payload event for one of ``keys``, or None."""
    from eidolons.ecl.grammar import dumps
    from eidolons.trace.log import PAYLOAD_FIELD, decode_line

    # ``"payload_path":"<key>"`` as this tool writes it (compact ASCII JSON)
    needles = [PAYLOAD_FIELD + dumps(k).encode("ascii") for k in keys]
    for raw in lines if keys else ():
        if any(n in raw for n in needles):
            event = decode_line(raw, 0).event
            if is_payload_event(event, keys):
                return event
    return None


class TraceStore:
    """The interface. Thread ids are mapped as the JSONL files name them
    (:func:`eidolons.trace.log.thread_file_name`): any unsafe id is the thread ``unknown``.
    Reads raise :class:`TraceReadError`, appends :class:`TraceWriteError`."""

    kind = "abstract"

    def _unreadable(self) -> Exception:
        """What a read this store does not implement raises."""
        return NotImplementedError()

    def describe(self) -> str:
        """Where the trace lives, for humans (never a password)."""
        raise NotImplementedError

    def location(self, thread_id: str | None) -> str:
        raise NotImplementedError

    def append(self, thread_id: str | None, event: Mapping[str, Any]) -> Appended:
        raise NotImplementedError

    def append_all(
        self, thread_id: str | None, events: Sequence[Mapping[str, Any]]
    ) -> list[Appended]:
        """The events appended in order (a store may write them at once: all or none)."""
        return [self.append(thread_id, event) for event in events]

    def latest_verdict(self, thread_id: str | None, message_id: str) -> dict[str, Any] | None:
        """The latest counted orchestrator verdict for ``message_id`` in the thread."""
        raise self._unreadable()

    def iter_thread(self, thread_id: str | None) -> Iterator[TraceLine]:
        """The thread's lines in order, judged (:func:`judged_line`), damage reported."""
        raise self._unreadable()

    def iter_raw(self, thread_id: str | None) -> Iterator[bytes]:
        """The thread's exact line bytes (no newline) in order, damaged ones included."""
        raise self._unreadable()

    def iter_stamped(self, thread_id: str | None) -> Iterator[tuple[bytes, Stamp, str | None]]:
        """As :meth:`iter_raw`, each line with what the store keeps beside it: its stamp
        and the login that wrote it (None where the store does not know)."""
        for raw in self.iter_raw(thread_id):
            yield raw, NO_STAMP, None

    def read_new(self, thread_id: str | None, cursor: int) -> tuple[list[TraceLine], int]:
        """The lines appended after ``cursor`` (0: all) and the next cursor (``--follow``)."""
        raise self._unreadable()

    def has_thread(self, thread_id: str) -> bool:
        raise self._unreadable()

    def find_payload(self, keys: list[str]) -> dict[str, Any] | None:
        """A payload event of any thread naming one of ``keys`` (ADR 0007), or None;
        raises :class:`TraceReadError` past the trace scan bound (the caller cannot tell)."""
        raise self._unreadable()

    def threads(self) -> list[str]:
        """The thread names in the store, sorted."""
        raise self._unreadable()

    def close(self) -> None:
        return None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class UnavailableStore(TraceStore):
    """The store a configuration asked for but cannot give: every operation fails with
    ``reason`` (a misconfiguration refuses, it never falls back)."""

    kind = "unavailable"

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def describe(self) -> str:
        return f"unavailable ({self.reason})"

    def location(self, thread_id: str | None) -> str:
        return self.describe()

    def append(self, thread_id: str | None, event: Mapping[str, Any]) -> Appended:
        raise TraceWriteError(f"trace store unavailable: {self.reason}")

    def _unreadable(self) -> Exception:
        return TraceReadError(f"trace store unavailable: {self.reason}")


def check_dsn(dsn: str) -> str:
    """A PostgreSQL connection URI, or :class:`UsageError`."""
    if not dsn.startswith(("postgresql://", "postgres://")):
        raise UsageError(f"{DSN_ENV} must be a postgresql:// URI")
    return dsn


def project_requirement(root: StrPath) -> str | None:
    """What ``.eidolons/trace-store.json`` requires: None (no file), ``"postgresql"``, or
    ``"invalid: <why>"`` (a file that cannot be read or is not understood fails closed)."""
    from eidolons.io.files import BeneathError, read_state_file

    try:  # never through a link, never blocking on a FIFO planted under that name
        raw = read_state_file(root, PROJECT_FILE, 1024 * 1024)
    except FileNotFoundError:
        return None
    except BeneathError as exc:
        return f"invalid: {exc}"
    except OSError as exc:
        return f"invalid: cannot read {PROJECT_FILE}: {exc.strerror or exc}"
    import json

    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return f"invalid: {PROJECT_FILE} is not JSON"
    if not isinstance(value, dict) or set(value) != {"store"}:
        return f'invalid: {PROJECT_FILE} must be {{"store": "postgresql"}}'
    if value["store"] != "postgresql":  # a project may require the shared store, only that
        return f'invalid: {PROJECT_FILE} "store" must be "postgresql"'
    return "postgresql"


def open_store(
    root: StrPath, env: Mapping[str, str] | None = None, *, file: StrPath | None = None
) -> TraceStore:
    """The project's configured store (ADR 0014): PostgreSQL when ``EIDOLONS_TRACE_DSN``
    is set (the DSN comes only from the environment, never from a project file), else
    the JSONL files; ``.eidolons/trace-store.json`` can only require PostgreSQL. With
    ``file`` (``--trace FILE``), that one JSONL file. Never raises: a configuration that
    cannot be honoured gives an :class:`UnavailableStore`."""
    if file is not None:
        from eidolons.trace.log import JsonlStore

        return JsonlStore(root, file=file)
    env = os.environ if env is None else env
    dsn = env.get(DSN_ENV) or None
    required = project_requirement(root)
    if required is not None and required.startswith("invalid"):
        return UnavailableStore(required[len("invalid: ") :])
    if dsn is not None:
        try:
            check_dsn(dsn)
        except UsageError as exc:
            return UnavailableStore(str(exc))
        from eidolons.trace.postgres import PostgresStore

        return PostgresStore(dsn)
    if required == "postgresql":
        return UnavailableStore(f"{PROJECT_FILE} requires PostgreSQL and {DSN_ENV} is not set")
    from eidolons.trace.log import JsonlStore

    return JsonlStore(root)


def read_thread(root: StrPath, thread_id: str) -> Iterator[TraceLine]:
    """Every line of a thread's trace in the project's configured store, in order
    (nothing when it has none)."""
    with open_store(root) as store:
        yield from store.iter_thread(thread_id)


def has_thread(root: StrPath, thread_id: str) -> bool:
    from eidolons.trace.log import thread_file_name

    if thread_file_name(thread_id) != thread_id:
        return False
    with open_store(root) as store:
        return store.has_thread(thread_id)
