"""One conformance gate's outcome (:class:`GateResult`), shared by the rules and R-1.

Pure data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Result levels, strongest first.
LEVELS: tuple[str, ...] = ("MUST", "SHOULD", "INFO")


@dataclass(frozen=True)
class GateResult:
    """One gate's outcome for one envelope. Truthy only when ``status == "ok"``.

    ``level`` is MUST, SHOULD or INFO; ``status`` is ok, fail or warn; ``reason`` says
    why a result is not ok (and carries the §7.3 sentence on E-3.compat); ``target`` is
    the envelope the result is about, when known.
    """

    id: str
    level: str
    status: str
    name: str
    reason: str | None = None
    target: str | None = None

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
