"""One conformance gate's outcome (:class:`GateResult`), shared by the rules and R-1.

Pure data.
"""

from __future__ import annotations

from collections import namedtuple

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Any, NamedTuple

    class _GateResult(NamedTuple):
        id: str
        level: str
        status: str
        name: str
        reason: str | None = None
        target: str | None = None

else:  # the same fields for the interpreter: typing.NamedTuple would import typing
    _GateResult = namedtuple(
        "GateResult", ("id", "level", "status", "name", "reason", "target"), defaults=(None, None)
    )

#: Result levels, strongest first.
LEVELS: tuple[str, ...] = ("MUST", "SHOULD", "INFO")


class GateResult(_GateResult):
    """One gate's outcome for one envelope. Truthy only when ``status == "ok"``.

    ``level`` is MUST, SHOULD or INFO; ``status`` is ok, fail or warn; ``reason`` says
    why a result is not ok (and carries the §7.3 sentence on E-3.compat); ``target`` is
    the envelope the result is about, when known.

    A named tuple, not a frozen dataclass: ``eidolons check`` makes about 25 per
    envelope, and a frozen dataclass's ``__init__`` (one ``object.__setattr__`` per
    field) cost three times as much (ADR 0090). Immutable and compared by value all the
    same.
    """

    __slots__ = ()

    def __bool__(self) -> bool:
        return self.status == "ok"

    def to_json(self) -> dict[str, Any]:
        """``{"id", "level", "status", "name"[, "target"][, "reason"]}`` (upstream order)."""
        out: dict[str, Any] = {
            "id": self.id,
            "level": self.level,
            "status": self.status,
            "name": self.name,
        }
        if self.target is not None:
            out["target"] = self.target
        if self.reason is not None:
            out["reason"] = self.reason
        return out
