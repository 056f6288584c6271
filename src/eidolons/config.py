"""Limits and environment configuration, in one place.

Every limit the gates enforce lives in :class:`Limits` and is passed explicitly; the
defaults are documented in the README. Environment variables read here:

- ``EIDOLONS_ROOT``: the project root (else the nearest ancestor with ``.eidolons/`` or
  ``.git/``, else the current directory).
- ``EIDOLONS_ECL_VERIFY_MODE``: ``block`` (default) or ``warn`` (an explicit opt-in).
  Anything else is a usage error, never a silent fallback.
- ``EIDOLONS_MAX_PAYLOAD_BYTES`` / ``EIDOLONS_MAX_ENVELOPE_BYTES``: override the caps.
- ``ECL_HMAC_KEY``: the HMAC key, used as raw UTF-8 bytes (as ``openssl -hmac``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from eidolons.errors import UsageError

MiB = 1024 * 1024
DEFAULT_MAX_ENVELOPE_BYTES = 1 * MiB
DEFAULT_MAX_JSON_DEPTH = 32
DEFAULT_MAX_PAYLOAD_BYTES = 1024 * MiB
# the largest values the environment may set (a cap is a buffer size too)
MAX_ENVELOPE_CAP = 64 * MiB
MAX_PAYLOAD_CAP = 1024 * 1024 * MiB
TRACE_DIR = Path(".eidolons") / ".trace"


class Limits:
    """Caps on untrusted input. Sizes in bytes.

    Records on the verification path are plain ``__slots__`` classes rather than
    dataclasses: importing :mod:`dataclasses` pulls in :mod:`inspect` and costs about a
    sixth of a whole verification (ADR 0001)."""

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
    def from_env(cls, env: Mapping[str, str] | None = None) -> Limits:
        env = os.environ if env is None else env
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


def find_root(explicit: str | os.PathLike[str] | None = None, cwd: Path | None = None) -> Path:
    """The project root: ``--root``, else ``EIDOLONS_ROOT``, else the nearest ancestor of
    the current directory holding ``.eidolons/`` or ``.git/``, else the current directory."""
    if explicit:
        root = Path(explicit)
        if not root.is_dir():
            raise UsageError(f"--root {str(root)!r} is not a directory")
        return root.resolve()
    env_root = os.environ.get("EIDOLONS_ROOT")
    if env_root:
        root = Path(env_root)
        if not root.is_dir():
            raise UsageError(f"EIDOLONS_ROOT={env_root!r} is not a directory")
        return root.resolve()
    here = (cwd or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / ".eidolons").is_dir() or (candidate / ".git").exists():
            return candidate
    return here


def hmac_key(env: Mapping[str, str] | None = None) -> bytes | None:
    """``ECL_HMAC_KEY`` as raw bytes, or None when unset or empty."""
    env = os.environ if env is None else env
    raw = env.get("ECL_HMAC_KEY")
    # fsencode gives back the exact bytes of the environment (surrogateescape)
    return os.fsencode(raw) if raw else None


VERIFY_MODES = ("warn", "block")


def verify_mode(explicit: str | None, env: Mapping[str, str] | None = None) -> str:
    """The verify mode: ``--mode`` if given, else ``EIDOLONS_ECL_VERIFY_MODE``, else block.

    Block is the default of every gate (the seeds' posture change); warn is an opt-in."""
    if explicit is not None:
        if explicit not in VERIFY_MODES:
            raise UsageError(f"--mode must be warn or block, got {explicit!r}")
        return explicit
    env = os.environ if env is None else env
    raw = env.get("EIDOLONS_ECL_VERIFY_MODE")
    if not raw:  # unset or empty (as ${VAR:-block}); any other value must be valid
        return "block"
    if raw not in VERIFY_MODES:
        raise UsageError(f"EIDOLONS_ECL_VERIFY_MODE must be warn or block, got {raw!r}")
    return raw
