"""Where the gates keep their state in a project, and the bound on reading it: a leaf
module, so the trace, the stores and the configuration need not import one another
(ADR 0007).
"""

from __future__ import annotations

import os

from eidolons.ecl.limits import DEFAULT_MAX_TRACE_SCAN_BYTES, MAX_PAYLOAD_CAP, _int_env
from eidolons.errors import UsageError
from eidolons.io.project import TRACE_DIR  # spelled once (ADR 0129)

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "DEFAULT_MAX_TRACE_SCAN_BYTES",
    "DEFAULT_TRACE_TIMEOUT_S",
    "TRACE_DIR",
    "TRACE_TIMEOUT_ENV",
    "trace_scan_bound",
    "trace_timeout_s",
]

TRACE_TIMEOUT_ENV = "EIDOLONS_TRACE_TIMEOUT_S"
DEFAULT_TRACE_TIMEOUT_S = 5.0  # well inside the hook's own 10-second budget
MAX_TRACE_TIMEOUT_S = 3600.0


def trace_scan_bound(env: Mapping[str, str] | None = None) -> int:
    """The most bytes one search of the trace reads (``EIDOLONS_MAX_TRACE_SCAN_BYTES``,
    default 256 MiB): a gate's backward scan for a record, or the search of every thread
    for a payload. A trace made huge (a sparse hole of a terabyte) then costs a bounded
    read, and past the bound the search fails with a reason (fail closed)."""
    env = os.environ if env is None else env
    return _int_env(
        env, "EIDOLONS_MAX_TRACE_SCAN_BYTES", DEFAULT_MAX_TRACE_SCAN_BYTES, MAX_PAYLOAD_CAP
    )


def trace_timeout_s(env: Mapping[str, str] | None = None) -> float:
    """``EIDOLONS_TRACE_TIMEOUT_S`` (default 5): the longest a gate waits for the trace,
    whichever the store: for a file lock (the JSONL trace's append lock, this host's
    payload index, the memory store's creation lock: :mod:`eidolons.io.filelock`), and for
    PostgreSQL's connection, locks and statements. Past it the operation fails (closed).
    Raises :class:`UsageError` for a value that is not a number of seconds in
    (0, 3600]."""
    env = os.environ if env is None else env
    raw = env.get(TRACE_TIMEOUT_ENV) or ""
    if not raw:
        return DEFAULT_TRACE_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= MAX_TRACE_TIMEOUT_S:  # NaN fails this too
        raise UsageError(f"{TRACE_TIMEOUT_ENV}={raw!r} must be a number of seconds in (0, 3600]")
    return value
