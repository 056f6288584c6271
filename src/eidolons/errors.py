"""The exception tree, grouped by who is at fault.

Every error carries a stable machine ``code`` and a human message; the CLI prints
``eidolons: <message>`` and maps the class to an exit code, never a traceback.

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

    @property
    def message(self) -> str:
        return str(self)


class UsageError(EidolonsError):
    code = "USAGE"


class InputError(EidolonsError):
    code = "INPUT"


class EnvelopeError(InputError):
    """The envelope bytes are not a well-formed ECL envelope (verdict ``malformed``)."""

    code = "MALFORMED"


class TraceWriteError(EidolonsError):
    code = "TRACE_WRITE"
