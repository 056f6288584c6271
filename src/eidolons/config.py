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

from eidolons.ecl.limits import Limits
from eidolons.errors import UsageError

__all__ = ["TRACE_DIR", "Limits", "find_root", "hmac_key", "verify_mode"]

TRACE_DIR = Path(".eidolons") / ".trace"


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
