"""Caps on untrusted input, in one record passed explicitly. Pure: :meth:`Limits.from_env`
reads the mapping it is given; a value out of range is a usage error, never a fallback.
"""

from __future__ import annotations

from eidolons.errors import UsageError

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Mapping

MiB = 1024 * 1024
DEFAULT_MAX_ENVELOPE_BYTES = 1 * MiB
DEFAULT_MAX_JSON_DEPTH = 32
DEFAULT_MAX_PAYLOAD_BYTES = 1024 * MiB
# the largest values the environment may set (a cap is a buffer size too)
MAX_ENVELOPE_CAP = 64 * MiB
MAX_PAYLOAD_CAP = 1024 * 1024 * MiB
#: the most bytes one search of the trace reads by default
#: (:func:`eidolons.io.config.trace_scan_bound`)
DEFAULT_MAX_TRACE_SCAN_BYTES = 256 * MiB


class Limits:
    """Caps on untrusted input, in bytes (a ``__slots__`` class: no dataclasses on the
    verification path, ADR 0001)."""

    __slots__ = ("max_envelope_bytes", "max_json_depth", "max_payload_bytes")

    def __init__(
        self,
        max_envelope_bytes: int = DEFAULT_MAX_ENVELOPE_BYTES,
        max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    ) -> None:
        self.max_envelope_bytes = max_envelope_bytes
        self.max_json_depth = max_json_depth
        self.max_payload_bytes = max_payload_bytes

    def __repr__(self) -> str:
        return (
            f"Limits(max_envelope_bytes={self.max_envelope_bytes}, "
            f"max_json_depth={self.max_json_depth}, max_payload_bytes={self.max_payload_bytes})"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Limits) and all(
            getattr(self, name) == getattr(other, name) for name in self.__slots__
        )

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Limits:
        """The caps, with ``EIDOLONS_MAX_PAYLOAD_BYTES`` / ``EIDOLONS_MAX_ENVELOPE_BYTES``
        from ``env`` (the process environment, passed by the shell)."""
        return cls(
            max_envelope_bytes=_int_env(
                env, "EIDOLONS_MAX_ENVELOPE_BYTES", DEFAULT_MAX_ENVELOPE_BYTES, MAX_ENVELOPE_CAP
            ),
            max_payload_bytes=_int_env(
                env, "EIDOLONS_MAX_PAYLOAD_BYTES", DEFAULT_MAX_PAYLOAD_BYTES, MAX_PAYLOAD_CAP
            ),
        )


def _int_env(env: Mapping[str, str], name: str, default: int, maximum: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise UsageError(f"{name}={raw!r} is not an integer") from None
    if not 0 <= value <= maximum:
        raise UsageError(f"{name}={raw!r} must be between 0 and {maximum}")
    return value
