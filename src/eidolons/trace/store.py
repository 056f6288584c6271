"""The trace store: the one way the gates, the ``trace`` verbs and memory reach a trace.

Two implementations behind :class:`TraceStore`:

- :class:`~eidolons.trace.jsonl.JsonlStore` (the default): the ECL JSONL files
  ``<root>/.eidolons/.trace/<thread>.jsonl``, unchanged on disk (:mod:`eidolons.trace.log`).
- :class:`~eidolons.trace.postgres.PostgresStore`: a shared, append-only table on
  PostgreSQL, for pipelines whose agents run on several machines (ADR 0070).

Which one is chosen by :func:`open_store` (ADR 0071):

- ``EIDOLONS_TRACE_DSN=postgresql://...`` in the environment selects PostgreSQL. The DSN
  (server, database, credentials) comes only from the environment, never from a project
  file: an agent can write project files, and a store it chose could hold its own passes.
- A project may record ``{"store": "postgresql"}`` in ``.eidolons/trace-store.json``. That
  file can only make the choice stricter: with it and no DSN (or with a file that cannot
  be read or parsed) every operation fails (a receiver refuses UNVERIFIED); it never
  selects JSONL over a DSN, and never falls back to a file.

psycopg is imported only when a DSN is set.
"""

from __future__ import annotations

import os

from eidolons.ecl.events import EventType, GateName
from eidolons.errors import InputError, TraceWriteError, UsageError
from eidolons.io.project import STORE_FILE, TRACE_DSN_ENV  # spelled once (ADR 0129)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import Any, Self

    from eidolons.io.paths import StrPath
    from eidolons.trace.log import TraceLine

DSN_ENV = TRACE_DSN_ENV
PROJECT_FILE = STORE_FILE
ORCHESTRATOR_GATE = GateName.ORCHESTRATOR
VERDICT_EVENTS = (EventType.VERIFY_PASS, EventType.VERIFY_FAIL)


class TraceReadError(InputError):
    """The trace store cannot be read (unreachable server, unreadable file, bad config)."""

    code = "TRACE_READ"


class Appended:
    """What :meth:`TraceStore.append` wrote: the event as stored (with any link the store
    added), its exact line bytes (no newline) and where it went."""

    __slots__ = ("event", "line", "location")

    def __init__(self, event: dict[str, Any], line: bytes, location: str) -> None:
        self.event = event
        self.line = line
        self.location = location


def verdict_needle(message_id: str) -> bytes:
    """The id as this tool writes it inside a line (compact ASCII JSON, no quotes)."""
    from eidolons.ecl.jsontext import dumps

    return dumps(message_id)[1:-1].encode("ascii")


def message_key(message_id: str) -> bytes:
    """The id as a store stamps a verdict row with it (UTF-8)."""
    return message_id.encode("utf-8", "surrogatepass")


class _NoStamp:
    """A store that keeps nothing beside a line's bytes (the JSONL files)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_STAMP"


#: what a store keeps beside a line: PostgreSQL's ``verdict_for`` column (the message id
#: the row was stamped a verdict for, or None), or this: nothing
NO_STAMP = _NoStamp()
NOT_COUNTED = "not_counted"  # the key the readers set on a verdict-looking event


def is_orchestrator_verdict(event: Mapping[str, Any] | None, message_id: str) -> bool:
    """What a verdict line says (ADR 0005): a ``verify_pass``/``verify_fail`` for
    ``message_id`` written by the orchestrator gate. Events by receivers, senders, other
    tools or by hand without ``gate: "orchestrator"`` are never integrity evidence. Whether
    the gate counts such a line is :func:`uncounted_reason`."""
    return looks_like_verdict(event) and event is not None and event.get("message_id") == message_id


def uncounted_reason(
    raw: bytes,
    event: Mapping[str, Any] | None,
    message_id: str,
    stamp: bytes | _NoStamp | None = NO_STAMP,
) -> str | None:
    """THE record rule, for the gate and for every view and copy of a trace: None when
    the line ``raw`` (decoded as ``event``) is an orchestrator verdict for ``message_id``
    that the receiver gate counts, else why not. Counted: its bytes say so
    (:func:`is_orchestrator_verdict`), they spell the id as this tool writes it (a line
    spelling it another way was not written by this tool), and where the store keeps a
    stamp beside the bytes (PostgreSQL's ``verdict_for``, set only for a login bound as
    the database's orchestrator), the row is stamped for that id."""
    if not is_orchestrator_verdict(event, message_id):
        return "not an orchestrator verdict for this message"
    if verdict_needle(message_id) not in raw:
        return "its message id is not spelled as eidolons writes it"
    if not isinstance(stamp, _NoStamp) and (
        stamp is None or bytes(stamp) != message_key(message_id)
    ):
        return "no verdict stamp on its row: its writer is not the database's orchestrator"
    return None


def looks_like_verdict(event: Mapping[str, Any] | None) -> bool:
    """A line that reads as an orchestrator verdict, whoever wrote it."""
    return (
        event is not None
        and event.get("event") in VERDICT_EVENTS
        and event.get("gate") == ORCHESTRATOR_GATE
    )


def not_counted(
    raw: bytes, event: Mapping[str, Any] | None, stamp: bytes | _NoStamp | None = NO_STAMP
) -> str | None:
    """For views and copies: why a line that reads as an orchestrator verdict is one the
    gate would not count (by :func:`uncounted_reason`), or None (a counted verdict, or a
    line that is no verdict at all)."""
    if event is None or not looks_like_verdict(event):  # (None: for the type checker)
        return None
    mid = event.get("message_id")
    if not isinstance(mid, str):
        return "it names no message id"
    return uncounted_reason(raw, event, mid, stamp)


def judged_line(raw: bytes, lineno: int, stamp: bytes | _NoStamp | None = NO_STAMP) -> TraceLine:
    """``raw`` decoded, as a reader hands it to the views: a verdict-looking event the
    gate would not count carries ``not_counted: <why>`` (set by the reader, never taken
    from the bytes)."""
    from eidolons.trace.log import decode_line

    line = decode_line(raw, lineno)
    event = line.event
    if event is not None:
        why = not_counted(raw, event, stamp)
        event.pop(NOT_COUNTED, None)  # the reader's word, whatever the bytes say
        if why is not None:
            event[NOT_COUNTED] = why
    return line


def payload_needle(key: str) -> bytes:
    """``"payload_path":"<key>"`` as this tool writes it (compact ASCII JSON)."""
    from eidolons.ecl.jsontext import dumps

    return b'"payload_path":' + dumps(key).encode("ascii")


def is_payload_event(event: Mapping[str, Any] | None, keys: list[str]) -> bool:
    """An emit or verification event naming one of ``keys`` as its payload (ADR 0021)."""
    return (
        event is not None
        and event.get("event") in (EventType.EMIT, *VERDICT_EVENTS)
        and event.get("payload_path") in keys
    )


def record_from_line(
    raw: bytes, message_id: str, stamp: bytes | _NoStamp | None = NO_STAMP
) -> dict[str, Any] | None:
    """The event of ``raw`` when the gate counts it as an orchestrator verdict for
    ``message_id`` (:func:`uncounted_reason`), else None."""
    from eidolons.trace.log import decode_line

    if verdict_needle(message_id) not in raw:
        return None
    event = decode_line(raw, 0).event
    return event if uncounted_reason(raw, event, message_id, stamp) is None else None


class TraceStore:
    """The interface. Thread ids are mapped as the JSONL files name them
    (:func:`eidolons.trace.log.thread_file_name`): any unsafe id is the thread ``unknown``."""

    kind = "abstract"

    def describe(self) -> str:
        """Where the trace lives, for humans (never a password)."""
        raise NotImplementedError

    def location(self, thread_id: str | None) -> str:
        """Where ``thread_id``'s events live (a path, or the store and thread)."""
        raise NotImplementedError

    def append(self, thread_id: str | None, event: Mapping[str, Any]) -> Appended:
        """Append one event to the thread. Raises :class:`TraceWriteError` on any failure."""
        raise NotImplementedError

    def latest_verdict(self, thread_id: str | None, message_id: str) -> dict[str, Any] | None:
        """The latest orchestrator verdict for ``message_id`` in the thread (see
        :func:`record_from_line`), or None. Raises :class:`TraceReadError`."""
        raise NotImplementedError

    def iter_thread(self, thread_id: str | None) -> Iterator[TraceLine]:
        """The thread's lines in order, damaged ones reported (``event`` None)."""
        raise NotImplementedError

    def iter_raw(self, thread_id: str | None) -> Iterator[bytes]:
        """The thread's exact line bytes (no newline) in order, damaged ones included."""
        raise NotImplementedError

    def iter_stamped(
        self, thread_id: str | None
    ) -> Iterator[tuple[bytes, bytes | _NoStamp | None]]:
        """As :meth:`iter_raw`, each line with what the store keeps beside it (see
        :func:`uncounted_reason`): :data:`NO_STAMP` for a store of bytes alone."""
        for raw in self.iter_raw(thread_id):
            yield raw, NO_STAMP

    def read_new(self, thread_id: str | None, cursor: int) -> tuple[list[TraceLine], int]:
        """The complete lines appended after ``cursor`` (0: from the start) and the cursor
        to pass next time (``trace show --follow``)."""
        raise NotImplementedError

    def has_thread(self, thread_id: str) -> bool:
        raise NotImplementedError

    def find_payload(self, keys: list[str]) -> dict[str, Any] | None:
        """An ``emit``/``verify_pass``/``verify_fail`` event of any thread whose
        ``payload_path`` is one of ``keys`` (ADR 0021), or None. Reads at most
        :func:`eidolons.io.config.trace_scan_bound` bytes; past that raises
        :class:`TraceReadError` (the caller cannot tell, so must not conclude "no")."""
        from eidolons.io.settings import trace_scan_bound
        from eidolons.trace.log import decode_line

        if not keys:
            return None
        needles = [payload_needle(k) for k in keys]
        budget = trace_scan_bound()
        for thread in self.threads():
            for raw in self.iter_raw(thread):
                budget -= len(raw) + 1
                if budget < 0:
                    raise TraceReadError(
                        f"the traces exceed the {trace_scan_bound()}-byte scan bound"
                    )
                if any(n in raw for n in needles):
                    event = decode_line(raw, 0).event
                    if is_payload_event(event, keys):
                        return event
        return None

    def threads(self) -> list[str]:
        """The thread names in the store, sorted."""
        raise NotImplementedError

    def close(self) -> None:
        return None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class UnavailableStore(TraceStore):
    """The store a configuration asked for but cannot give: every operation fails with
    ``reason``. It exists so that a misconfiguration refuses instead of falling back."""

    kind = "unavailable"

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def describe(self) -> str:
        return f"unavailable ({self.reason})"

    def location(self, thread_id: str | None) -> str:
        return self.describe()

    def append(self, thread_id: str | None, event: Mapping[str, Any]) -> Appended:
        raise TraceWriteError(f"trace store unavailable: {self.reason}")

    def latest_verdict(self, thread_id: str | None, message_id: str) -> dict[str, Any] | None:
        raise TraceReadError(f"trace store unavailable: {self.reason}")

    def iter_thread(self, thread_id: str | None) -> Iterator[TraceLine]:
        raise TraceReadError(f"trace store unavailable: {self.reason}")

    def iter_raw(self, thread_id: str | None) -> Iterator[bytes]:
        raise TraceReadError(f"trace store unavailable: {self.reason}")

    def read_new(self, thread_id: str | None, cursor: int) -> tuple[list[TraceLine], int]:
        raise TraceReadError(f"trace store unavailable: {self.reason}")

    def has_thread(self, thread_id: str) -> bool:
        raise TraceReadError(f"trace store unavailable: {self.reason}")

    def threads(self) -> list[str]:
        raise TraceReadError(f"trace store unavailable: {self.reason}")

    def find_payload(self, keys: list[str]) -> dict[str, Any] | None:
        raise TraceReadError(f"trace store unavailable: {self.reason}")


def check_dsn(dsn: str) -> str:
    """A PostgreSQL connection URI, or :class:`UsageError`."""
    if not dsn.startswith(("postgresql://", "postgres://")):
        raise UsageError(f"{DSN_ENV} must be a postgresql:// URI")
    return dsn


def project_requirement(root: StrPath) -> str | None:
    """What ``.eidolons/trace-store.json`` requires: None (no file), ``"postgresql"``, or
    ``"invalid: <why>"`` (a file that cannot be read or is not understood fails closed)."""
    import stat

    from eidolons.io.beneath import BeneathError, open_state_path

    try:  # never through a link, never blocking on a FIFO planted under that name
        fd = open_state_path(
            root, tuple(PROJECT_FILE.split(os.sep)), os.O_RDONLY | os.O_NONBLOCK, create=False
        )
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return f"invalid: {PROJECT_FILE} is not a regular file"
            with os.fdopen(os.dup(fd), "rb") as fh:
                raw = fh.read(1024 * 1024)
        finally:
            os.close(fd)
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
    """The project's configured store (module docstring); with ``file`` (``--trace
    FILE``), that one JSONL file. Never raises: a configuration that cannot be honoured
    gives an :class:`UnavailableStore`."""
    if file is not None:
        from eidolons.trace.jsonl import JsonlStore

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
    from eidolons.trace.jsonl import JsonlStore

    return JsonlStore(root)


def list_threads(root: StrPath) -> list[str]:
    """The ids of the threads with a trace in the project's configured store, sorted."""
    with open_store(root) as store:
        return store.threads()


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
