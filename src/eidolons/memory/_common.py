"""Vocabulary and result shapes shared by every memory backend (``crystalium.md`` §1-3).

Pure: both backends and the CLI build their answers here. Every answer is a plain ``dict``
with the server's keys and ``"backend"``; a refusal is ``{"error": <reason code>,
"message", "backend"}``; a skipped call carries ``"status": "skipped"`` and a ``"reason"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (memory open)
if TYPE_CHECKING:
    from typing import Any, Final

LAYERS: Final[tuple[str, ...]] = ("episodic", "semantic", "procedural", "execution")
DEFAULT_RECALL_LAYERS: Final[tuple[str, ...]] = ("semantic", "episodic", "procedural")
K_MAX: Final = 100

# Token budget of the working set (crystalium.md §3, composer).
TOTAL_TOKEN_CAP: Final = 3500
SLOT_CAPS: Final[dict[str, int]] = {
    "executive": 300,
    "procedural": 600,
    "semantic": 800,
    "episodic": 800,
    "execution": 1000,
    "buffer": 300,
}

# Reason codes: the server's own, then ours for what the server reports without a code.
INGEST_BAD_ENVELOPE: Final = "INGEST_BAD_ENVELOPE"
UNSUPPORTED_ENVELOPE_VERSION: Final = "UNSUPPORTED_ENVELOPE_VERSION"
INGEST_PAYLOAD_HASH_MISMATCH: Final = "INGEST_PAYLOAD_HASH_MISMATCH"
UNKNOWN_TOOL: Final = "UNKNOWN_TOOL"
RATE_LIMIT: Final = "RATE_LIMIT"
INPUT_VALIDATION: Final = "INPUT_VALIDATION"  # the server's jsonschema refusal
SERVER_ERROR: Final = "SERVER_ERROR"  # a JSON-RPC error or an answer that does not parse

INPUT_VALIDATION_PREFIX: Final = "Input validation error: "

BACKEND_LOCAL: Final = "local"
BACKEND_MCP: Final = "mcp"
BACKEND_UNAVAILABLE: Final = "unavailable"


class Frozen:
    """A record of the fields ``_fields`` names, in order: frozen, compared by value (a
    dataclass would import :mod:`inspect` at a gate's memory open, ADR 0022)."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def _set(self, *values: object) -> None:
        for name, value in zip(self._fields, values, strict=True):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: cannot assign {name}")

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._values() == self._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({inner})"


def error_result(code: str, message: str, backend: str, **extra: Any) -> dict[str, Any]:
    """The server's error body, ``{"error", "message"}``, plus ``backend``."""
    return {"error": code, "message": message, **extra, "backend": backend}


def input_error(message: str, backend: str) -> dict[str, Any]:
    return error_result(INPUT_VALIDATION, INPUT_VALIDATION_PREFIX + message, backend)


def is_error(result: Mapping[str, Any]) -> bool:
    """True when a memory answer is a refusal or an error (it carries a reason code)."""
    return "error" in result


def is_skipped(result: Mapping[str, Any]) -> bool:
    """True when the memory was unavailable and the call did nothing."""
    return result.get("status") == "skipped"


def empty_recall(k_requested: Any, k_applied: int, backend: str) -> dict[str, Any]:
    """A recall answer with no records, in the server's shape."""
    return {
        "records": [],
        "slot_breakdown": dict.fromkeys(SLOT_CAPS, 0),
        "total_tokens": 0,
        "evicted_count": 0,
        "budget": {
            "total_cap": TOTAL_TOKEN_CAP,
            "slots": dict(SLOT_CAPS),
            "k_requested": k_requested,
            "k_applied": k_applied,
            "truncated_count": 0,
        },
        "backend": backend,
    }


def skipped_recall(reason: str, k: Any = None) -> dict[str, Any]:
    """What recall answers when no memory could be reached: no records, and why."""
    result = empty_recall(k, 0, BACKEND_UNAVAILABLE)
    result["status"] = "skipped"
    result["reason"] = reason
    return result


def skipped_ingest(reason: str) -> dict[str, Any]:
    """What ingest answers when no memory could be reached: nothing stored, and why."""
    return {"status": "skipped", "reason": reason, "backend": BACKEND_UNAVAILABLE}


def clamp_k(k: int) -> int:
    return max(1, min(K_MAX, k))


def check_recall_args(
    scope: Any, query: Any, k: Any, layers: Any
) -> tuple[str | None, tuple[str, ...]]:
    """Check recall arguments as the server's input schema does (``k`` an int, not a bool;
    layers known): ``(None, layers)``, all four when none, or ``(message, ())``."""
    if not isinstance(scope, Mapping):
        return f"{scope!r} is not of type 'object'", ()
    for key in ("project", "agent_class_visibility", "sensitivity_tag"):
        value = scope.get(key)
        if value is not None and not isinstance(value, str):
            return f"scope.{key}: {value!r} is not of type 'string'", ()
    if not isinstance(query, str):
        return f"{query!r} is not of type 'string'", ()
    if isinstance(k, bool) or not isinstance(k, int):
        return f"{k!r} is not of type 'integer'", ()
    if layers is None:
        return None, LAYERS
    if isinstance(layers, str | bytes) or not isinstance(layers, Sequence):
        return f"{layers!r} is not of type 'array'", ()
    chosen: list[str] = []
    for layer in layers:
        if layer not in LAYERS:
            return f"{layer!r} is not one of {list(LAYERS)!r}", ()
        if layer not in chosen:
            chosen.append(layer)
    return None, tuple(chosen) if chosen else LAYERS


def parse_layers(text: str) -> list[str]:
    """``"semantic,episodic"`` -> ``["semantic", "episodic"]``; raises ValueError on an
    unknown name (CLI helper)."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in LAYERS]
    if unknown:
        raise ValueError(f"unknown layer(s) {', '.join(unknown)}; choose from {', '.join(LAYERS)}")
    return names
