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

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from eidolons.gates.receiver import IncomingResult


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


class OnPassError(EidolonsError):
    """A library caller's ``on_pass`` callback raised after the receiver gate's pass was
    recorded (ADR 0125, part 2): the record stands, ``result`` is the recorded (passing)
    result, the callback's exception is the ``__cause__``. Never a silent pass: the caller
    learns its callback failed; never a lost record: nothing is undone in the trace."""

    code = "ON_PASS_FAILED"

    def __init__(self, message: str, *, result: IncomingResult) -> None:
        super().__init__(message)
        self.result = result
