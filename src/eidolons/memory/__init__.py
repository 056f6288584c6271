"""Memory around the receiver gate: recall before, ingest only after a pass (CRYSTALIUM).

One interface, :class:`Memory`, with the shapes of the CRYSTALIUM ``recall`` and ``ingest``
tools, and two backends: ``local``, the embedded store under ``<root>/.eidolons/memory/``
(:mod:`eidolons.memory.local`), and ``mcp``, a client for a real server
(:mod:`eidolons.memory.mcp_client`, the optional ``eidolons[mcp]`` extra). Rules:

1. The backend comes from the environment only (:meth:`MemoryConfig.from_env`); a
   malformed configuration is a :class:`~eidolons.errors.UsageError`, never a fallback.
2. ``off``: :func:`open_memory` returns None and the caller does nothing.
3. A memory that cannot be reached never raises: the call answers ``{"status": "skipped",
   "reason", "backend": "unavailable"}`` (a recall with empty ``records``).
4. Every answer names its backend in ``"backend"``, as :attr:`Memory.backend` does.
5. Ingest happens only after the receiver gate passed, through :func:`gate_callbacks`;
   memory and gates never import each other (ADR 0021).

Importing this module is cheap (no sqlite3, asyncio, mcp nor typing, ADR 0022): the
backends are imported by :func:`open_memory`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from eidolons.errors import UsageError
from eidolons.io.paths import realpath

__all__ = [
    "BACKEND_LOCAL",
    "BACKEND_MCP",
    "BACKEND_UNAVAILABLE",
    "DEFAULT_RECALL_LAYERS",
    "LAYERS",
    "Memory",
    "MemoryConfig",
    "Payload",
    "build_recall_query",
    "gate_callbacks",
    "ingest_after_pass",
    "is_error",
    "is_skipped",
    "open_gate_memory",
    "open_memory",
    "recall_before",
]

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (ADR 0022)
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any, Final, Literal, Protocol, TypeAlias

    Payload: TypeAlias = bytes | bytearray | str | Mapping[str, Any] | list[Any]
    Mode: TypeAlias = Literal["off", "local", "mcp"]
else:
    Protocol = object  # Memory is a protocol for the type checker, a plain base at run time
    Payload = bytes | bytearray | str | Mapping | list
"""What ``ingest`` accepts: the bytes the gate verified, a string, or a JSON object or
array (the server's "dict payload", which skips the digest binding)."""

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


def ingested(
    envelope: Mapping[str, Any],
    ident: str,
    tier: str,
    state: str,
    commit_status: str,
    normalized: bool,
    backend: str,
) -> dict[str, Any]:
    """An ingest answer, in the server's shape: the crystal stored or merged."""
    result: dict[str, Any] = {
        "status": "ingested",
        "id": ident,
        "layer": "episodic",
        "trust_tier": tier,
        "validation_state": state,
        "source_eidolon": envelope["from"]["eidolon"],
        "artifact_kind": str(envelope["artifact"]["kind"]),
        "envelope_version": str(envelope["envelope_version"]),
        "commit_status": commit_status,
    }
    if normalized:
        result["scope_normalized"] = True
    result["backend"] = backend
    return result


def check_ingest_args(payload: Any, encoding: Any) -> str | None:
    """Check ingest arguments as the server's input schema does: None, or the message."""
    if payload is None:
        return "'payload' is a required property"
    if not isinstance(payload, bytes | bytearray | memoryview | str | Mapping | list):
        return f"{payload!r} is not of type 'object', 'string'"
    if encoding not in ("utf8", "base64", "json"):
        return f"{encoding!r} is not one of ['utf8', 'base64', 'json']"
    return None


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


#: of each recalled record's text shown, by the CLI and the MCP server alike
RECALLED_CHARS = 120


def record_line(rec: Mapping[str, Any]) -> str:
    """One recalled record on one line, every field escaped: memory holds text from
    earlier payloads, which an attacker may have written."""
    from eidolons._text import printable

    text = str(rec.get("summary") or rec.get("content") or rec.get("text") or "")
    layer, ident = printable(str(rec.get("layer", "?"))), printable(str(rec.get("id", "?")))
    return f"  - [{layer}] {ident}: {printable(text[:RECALLED_CHARS])}"


def parse_layers(text: str) -> list[str]:
    """``"semantic,episodic"`` -> ``["semantic", "episodic"]``; raises ValueError on an
    unknown name (CLI helper)."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in LAYERS]
    if unknown:
        raise ValueError(f"unknown layer(s) {', '.join(unknown)}; choose from {', '.join(LAYERS)}")
    return names


MODES: tuple[Mode, ...] = ("off", "local", "mcp")
_STORE_DIR = os.path.join(".eidolons", "memory")  # the local store, under the project root


def __getattr__(name: str) -> Path:
    if name == "STORE_DIR":  # a Path, made on first use: no pathlib at open (ADR 0021)
        from pathlib import Path

        return Path(_STORE_DIR)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


DEFAULT_FIRST_CALL_TIMEOUT = 120.0
DEFAULT_CALL_TIMEOUT = 30.0


class Memory(Protocol):
    """What the receiver gate and the CLI talk to. Both backends implement it."""

    @property
    def backend(self) -> str:
        """``"local"``, ``"mcp"`` or ``"unavailable"``: who answers (or would answer)."""

    @property
    def project(self) -> str | None:
        """The project key for ``scope.project`` (None: the server's own)."""

    def recall(
        self,
        scope: Mapping[str, Any],
        query: str,
        k: int = 5,
        layers: Sequence[str] | None = None,
        *,
        explain: bool = False,
    ) -> dict[str, Any]:
        """``{"records": [...], "slot_breakdown", "total_tokens", "evicted_count",
        "budget", "backend"}``, or a refusal."""

    def ingest(
        self,
        envelope: Mapping[str, Any],
        payload: Payload,
        *,
        payload_encoding: str = "utf8",
        gated: bool = False,
    ) -> dict[str, Any]:
        """``{"status": "ingested", "id", "layer", "trust_tier", "validation_state", ...,
        "commit_status", "backend"}`` or a refusal ``{"error", "message", "backend"}``.
        ``gated``: the hand-off passed both gates (ADR 0021)."""

    def stats(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


class MemoryConfig(Frozen):
    """How to reach the memory, timeouts in seconds (``first_call_timeout`` covers a
    server's start and its first recall, which loads its embedding model). ``extra_env``:
    more environment for a stdio server."""

    _fields = tuple(
        "mode command url project store_dir first_call_timeout call_timeout close_timeout "
        "extra_env".split()
    )
    __slots__ = _fields

    mode: Mode
    command: tuple[str, ...]
    url: str | None
    project: str | None
    store_dir: Path | None
    first_call_timeout: float
    call_timeout: float
    close_timeout: float
    extra_env: Mapping[str, str]

    def __init__(
        self,
        mode: Mode = "local",
        command: tuple[str, ...] = (),
        url: str | None = None,
        project: str | None = None,
        store_dir: Path | None = None,
        first_call_timeout: float = DEFAULT_FIRST_CALL_TIMEOUT,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        close_timeout: float = 10.0,
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        self._set(
            mode,
            command,
            url,
            project,
            store_dir,
            first_call_timeout,
            call_timeout,
            close_timeout,
            {} if extra_env is None else extra_env,
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> MemoryConfig:
        """Read ``EIDOLONS_MEMORY``, ``EIDOLONS_MEMORY_COMMAND``, ``EIDOLONS_MEMORY_URL``,
        ``EIDOLONS_MEMORY_PROJECT``, ``EIDOLONS_MEMORY_TIMEOUT`` and
        ``EIDOLONS_MEMORY_FIRST_TIMEOUT``. Raises :class:`UsageError` when malformed."""
        env = os.environ if env is None else env
        raw_mode = (env.get("EIDOLONS_MEMORY") or "local").strip().lower()
        if raw_mode not in MODES:
            raise UsageError(f"EIDOLONS_MEMORY must be off, local or mcp, got {raw_mode!r}")
        mode: Mode = raw_mode
        command: tuple[str, ...] = ()
        raw_command = env.get("EIDOLONS_MEMORY_COMMAND") or ""
        if raw_command.strip():
            import shlex  # only for a command line to split (not on the local memory's open)

            try:
                command = tuple(shlex.split(raw_command))
            except ValueError as exc:
                raise UsageError(f"EIDOLONS_MEMORY_COMMAND cannot be split: {exc}") from None
        url = (env.get("EIDOLONS_MEMORY_URL") or "").strip() or None
        if mode == "mcp":
            if command and url:
                raise UsageError(
                    "EIDOLONS_MEMORY=mcp: set EIDOLONS_MEMORY_COMMAND or EIDOLONS_MEMORY_URL, "
                    "not both"
                )
            if not command and not url:
                raise UsageError(
                    "EIDOLONS_MEMORY=mcp needs EIDOLONS_MEMORY_COMMAND (stdio) or "
                    "EIDOLONS_MEMORY_URL (streamable HTTP)"
                )
            if url and not url.startswith(("http://", "https://")):
                raise UsageError(f"EIDOLONS_MEMORY_URL must be an http(s) URL, got {url!r}")
        return cls(
            mode=mode,
            command=command,
            url=url,
            project=(env.get("EIDOLONS_MEMORY_PROJECT") or "").strip() or None,
            call_timeout=_seconds(env, "EIDOLONS_MEMORY_TIMEOUT", DEFAULT_CALL_TIMEOUT),
            first_call_timeout=_seconds(
                env, "EIDOLONS_MEMORY_FIRST_TIMEOUT", DEFAULT_FIRST_CALL_TIMEOUT
            ),
        )


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"{name}={raw!r} is not a number of seconds") from None
    if not value > 0:
        raise UsageError(f"{name}={raw!r} must be > 0")
    return value


def open_memory(root: str | os.PathLike[str], config: MemoryConfig | None = None) -> Memory | None:
    """The configured memory for the project at ``root`` (``config`` or the environment),
    or None when off. Touches neither disk nor network (the first call does). Raises
    :class:`UsageError` for a malformed configuration."""
    config = MemoryConfig.from_env() if config is None else config
    if config.mode == "off":
        return None
    if config.mode == "local":
        from eidolons.memory.local import LocalMemory
        from eidolons.memory.rules import LocalLimits

        where = os.fspath(root)
        return LocalMemory(
            config.store_dir or os.path.join(where, _STORE_DIR),
            project=config.project or _project_key(where),
            limits=LocalLimits(call_timeout_s=config.call_timeout),
        )
    from eidolons.memory.mcp_client import McpMemory  # imports the SDK in its thread only

    return McpMemory(config)


def open_gate_memory(root: str | os.PathLike[str]) -> tuple[Memory | None, str | None]:
    """:func:`open_memory` for a gate: the memory and None, or None and why it is not used
    (``skipped: <why>``). Never raises: a broken configuration never changes a verdict."""
    try:
        return open_memory(root), None
    except Exception as exc:  # memory is context for the receiver, never the verdict
        return None, f"skipped: {exc}"


def _project_key(root: str) -> str:
    """The local project key: the project directory's name, as the server names its data
    directory after the project."""
    return os.path.basename(realpath(root)) or "default"


def build_recall_query(envelope: Mapping[str, Any]) -> str:
    """The seeds' recall query: objective, sender and artifact kind, space-separated."""
    parts: list[str] = []
    objective = envelope.get("objective")
    if isinstance(objective, str):
        parts.append(objective)
    sender = envelope.get("from")
    if isinstance(sender, Mapping) and isinstance(sender.get("eidolon"), str):
        parts.append(sender["eidolon"])
    artifact = envelope.get("artifact")
    if isinstance(artifact, Mapping) and isinstance(artifact.get("kind"), str):
        parts.append(artifact["kind"])
    return " ".join(part.strip() for part in parts if part.strip())


def recall_before(
    memory: Memory | None,
    envelope: Mapping[str, Any],
    receiver: str,
    *,
    k: int = 5,
    layers: Sequence[str] = DEFAULT_RECALL_LAYERS,
) -> dict[str, Any]:
    """Recall for an inbound hand-off: the memory's project and the receiver's class, the
    query of :func:`build_recall_query`. Never raises: a failure is a skipped result."""
    if memory is None:
        return skipped_recall("memory is off", k)
    scope: dict[str, Any] = {"agent_class_visibility": receiver}
    if memory.project:
        scope["project"] = memory.project
    try:
        return memory.recall(scope, build_recall_query(envelope), k=k, layers=list(layers))
    except Exception as exc:  # memory failures never reach the gate's verdict
        return skipped_recall(f"recall failed: {type(exc).__name__}: {exc}", k)


def ingest_after_pass(
    memory: Memory | None, envelope: Mapping[str, Any], payload: Payload
) -> dict[str, Any]:
    """Ingest a hand-off the receiver gate has just passed, with the bytes it verified
    (both gates passed: ``gated``). Never raises."""
    if memory is None:
        return skipped_ingest("memory is off")
    try:
        return memory.ingest(envelope, payload, gated=True)
    except Exception as exc:  # memory failures never reach the gate's verdict
        return skipped_ingest(f"ingest failed: {type(exc).__name__}: {exc}")


def gate_callbacks(
    memory: Memory, receiver: str
) -> tuple[
    Callable[[Any], Mapping[str, Any]], Callable[[Any, bytes | bytearray | None], Mapping[str, Any]]
]:
    """The receiver gate's callbacks (ADR 0021): ``on_envelope`` recalls before the
    verdict, ``on_pass`` ingests after the pass is on record."""

    def on_envelope(envelope: Any) -> Mapping[str, Any]:
        return {"recall": recall_before(memory, envelope.data, receiver)}

    def on_pass(envelope: Any, payload: bytes | bytearray | None) -> Mapping[str, Any]:
        if payload is None:  # --no-reverify and nothing needed the bytes
            why = "payload bytes not read and verified (no re-verification)"
            return {"ingest": {**skipped_ingest(why), "backend": memory.backend}}
        return {"ingest": ingest_after_pass(memory, envelope.data, payload)}

    return on_envelope, on_pass
