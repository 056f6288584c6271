"""What every gate family shares: one gate's outcome (:class:`GateResult`), the recorder
of results and the readings of a value."""

from __future__ import annotations

from collections import namedtuple

from eidolons.ecl import grammar

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
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
    tuple: ``check`` makes about 25 per envelope (ADR 0022)."""

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


_result = tuple.__new__  # a GateResult without its generated __new__ (a third of the cost)


class Recorder:
    """Collects results for one envelope, stamping each with the same target."""

    __slots__ = ("out", "target")

    def __init__(self, target: str | None) -> None:
        self.target = target
        self.out: list[GateResult] = []

    def ok(self, gid: str, level: str, name: str, reason: str | None = None) -> None:
        self.out.append(_result(GateResult, (gid, level, "ok", name, reason, self.target)))

    def fail(self, gid: str, level: str, name: str, reason: str) -> None:
        self.out.append(_result(GateResult, (gid, level, "fail", name, reason, self.target)))

    def warn(self, gid: str, level: str, name: str, reason: str) -> None:
        self.out.append(_result(GateResult, (gid, level, "warn", name, reason, self.target)))

    def judge(
        self, gid: str, level: str, name: str, problem: str | None, bad: str = "fail"
    ) -> None:
        """ok when there is no ``problem``, else ``bad`` (fail or warn) with it as reason."""
        status = "ok" if problem is None else bad
        self.out.append(_result(GateResult, (gid, level, status, name, problem, self.target)))

    def graded(self, gid: str, v21: bool, name: str, problem: str | None, reasons: Any) -> None:
        """A rule that is MUST for 2.1 envelopes, SHOULD before: ``reasons`` is the
        (fail, warn) pair; no ``problem`` records ok at the same level."""
        level = "MUST" if v21 else "SHOULD"
        if problem is None:
            self.ok(gid, level, name)
        elif v21:
            self.fail(gid, level, name, reasons[0])
        else:
            self.warn(gid, level, name, reasons[1])


def text(value: Any) -> str:
    """A value as ``jq -r '.x // ""'`` prints it (null and false as ``""``, strings raw,
    other values as compact JSON). For reason strings only, never for decisions."""
    if value is None or value is False:
        return ""
    if isinstance(value, str):
        return value
    if type(value) is int:
        return str(value)
    if value is True:
        return "true"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e17:
        return str(int(value))
    import json  # only to word a reason (json imports re: not on every gate's start-up)

    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def get(env: Any, *keys: str) -> Any:
    """``.a.b.c``: None when a level is absent or not an object."""
    node: Any = env
    for key in keys:
        if type(node) is not dict:
            from collections.abc import Mapping  # off the gates' start-up: rare

            if not isinstance(node, Mapping):
                return None
        node = node.get(key)
    return node


def truthy(value: Any) -> bool:
    """jq truthiness: everything but null and false."""
    return value is not None and value is not False


def is_v21(env: Mapping[str, Any]) -> bool:
    return grammar.is_v21_version(env.get("envelope_version"))


def trust_level(env: Mapping[str, Any]) -> Any:
    value = get(env, "constraints", "trust_level")
    return value if truthy(value) else "standard"


def token_count(value: Any) -> int | None:
    """Absent, null or false count as 0 (upstream ``// 0``); a non-negative JSON integer
    (or integral float) is itself; anything else is None."""
    if value is None or value is False:
        return 0
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


def exit_code(results: Iterable[GateResult]) -> int:
    """2 if a MUST failed, else 3 if a SHOULD failed, else 4 if anything warned (any
    level), else 0. INFO failures do not count."""
    code = 0
    for r in results:
        if r.status == "fail" and r.level == "MUST":
            return 2
        if r.status == "fail" and r.level == "SHOULD":
            code = 3
        elif r.status == "warn" and code == 0:
            code = 4
    return code
