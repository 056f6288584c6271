"""The exception tree, grouped by who is at fault.

Every error carries a stable machine ``code``, a human message and ``diagnostics()``,
the one line the CLI prints (``eidolons: <diagnostics>``) when an error reaches it; the
class says the exit code (``exit_code``), never a traceback.

- :class:`UsageError`: the caller asked for something impossible (bad option value,
  unset key for ``--hmac``). Exit 2.
- :class:`InputError`: an input file is unreadable or malformed. Exit 2.
- :class:`TraceWriteError`: the trace could not be appended. In block mode this must
  never end in a pass.
"""

from __future__ import annotations


class EidolonsError(Exception):
    """Base class. ``code`` is stable across versions; the message is for humans."""

    code = "ERROR"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    #: the CLI's exit code when this error reaches it (ADR 0003's vocabulary)
    exit_code = 70

    @property
    def message(self) -> str:
        return str(self)

    def diagnostics(self) -> str:
        """The one line the CLI prints (``eidolons: <diagnostics>``): the message, then
        the stable code in brackets, control characters escaped."""
        from eidolons._text import printable

        return f"{printable(self.message)} [{self.code}]"


class UsageError(EidolonsError):
    code = "USAGE"
    exit_code = 2


class InputError(EidolonsError):
    code = "INPUT"
    exit_code = 2


class EnvelopeError(InputError):
    """The envelope bytes are not a well-formed ECL envelope (verdict ``malformed``)."""

    code = "MALFORMED"


class TraceWriteError(EidolonsError):
    code = "TRACE_WRITE"
    exit_code = 3  # a gate that cannot record refuses
