"""One conformance gate's outcome (:class:`GateResult`). Pure data."""

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


class GateResult(_GateResult):
    """One gate's outcome for one envelope, truthy only when ``status`` is ok. ``level``
    MUST, SHOULD or INFO; ``status`` ok, fail or warn; ``target`` the envelope. A named
    tuple: ``check`` makes about 25 per envelope (ADR 0090)."""

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
