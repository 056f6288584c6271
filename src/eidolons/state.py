"""Where the gates keep their state in a project, and the bound on reading it.

A leaf module (it imports only the core's limits and the names' one spelling,
:mod:`eidolons.knownhandoff`, ``os`` only): the trace, the trace stores and the
configuration all read these names, so none of them has to import another to know where
the trace lives (no import cycle, ADR 0007). :mod:`eidolons.config` re-exports them.
"""

from __future__ import annotations

import os

from eidolons.ecl.limits import DEFAULT_MAX_TRACE_SCAN_BYTES, MAX_PAYLOAD_CAP, _int_env
from eidolons.knownhandoff import TRACE_DIR  # spelled once (ADR 0129)

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["DEFAULT_MAX_TRACE_SCAN_BYTES", "TRACE_DIR", "trace_scan_bound"]


def trace_scan_bound(env: Mapping[str, str] | None = None) -> int:
    """The most bytes one search of the trace reads (``EIDOLONS_MAX_TRACE_SCAN_BYTES``,
    default 256 MiB): a gate's backward scan for a record, or the search of every thread
    for a payload. A trace made huge (a sparse hole of a terabyte) then costs a bounded
    read, and past the bound the search fails with a reason (fail closed)."""
    env = os.environ if env is None else env
    return _int_env(
        env, "EIDOLONS_MAX_TRACE_SCAN_BYTES", DEFAULT_MAX_TRACE_SCAN_BYTES, MAX_PAYLOAD_CAP
    )
