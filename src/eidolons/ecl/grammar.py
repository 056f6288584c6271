"""The lexical grammar of ECL: every rule on the spelling of a value, written once.

Pure. Each rule is a predicate over an untrusted value that is True only for a ``str``
matching the whole rule: patterns are applied with ``re.fullmatch``, never ``re.match``
with ``$`` (which accepts a trailing newline, so ``"atlas\\n"`` would pass as a slug and a
refusal line or a trace file name could be split in two). Every module that judges a
slug, a version, a digest, a path or a thread file name calls this module; no other
module compiles a pattern for these.

Rules:

- slug: ``[a-z][a-z0-9-]*`` (eidolon names, artifact kinds, checkers, ``--as``);
- envelope version: ``(1\\.[012]|2\\.[01])(\\.\\d+)?``; a 2.1 envelope is
  ``2\\.1(\\.\\d+)?``, a 1.x envelope ``1\\.[012](\\.\\d+)?``;
- agent version: ``\\d+\\.\\d+\\.\\d+`` or ``n/a``; schema version ``\\d+\\.\\d+(\\.\\d+)?``;
- hex digest: 64 lowercase hex characters;
- extension field: ``x_[a-z][a-z0-9_]*``;
- RFC 3339 date-time; ``ecl://thread/<uuid>/message/<uuid>`` handles;
- placeholder digest: empty, ``PARENT_FILLS_*``, ``<...>``, ``TODO*`` (case-insensitive);
- safe relative path and the one ``..`` rule (see :func:`is_safe_relative_path`);
- safe file name for a thread's trace: ``[A-Za-z0-9][A-Za-z0-9._-]{0,199}``.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Any

# ``\d`` is ASCII only (re.ASCII): in a str pattern it would match any Unicode digit, so
# "١.٢.٣" would be a version and "２０２６-..." a timestamp
SLUG_PATTERN = "[a-z][a-z0-9-]*"
_SLUG = re.compile(SLUG_PATTERN)
_ENVELOPE_VERSION = re.compile(r"(1\.[012]|2\.[01])(\.\d+)?", re.ASCII)
_V1 = re.compile(r"1\.[012](\.\d+)?", re.ASCII)
_V21 = re.compile(r"2\.1(\.\d+)?", re.ASCII)
_AGENT_VERSION = re.compile(r"\d+\.\d+\.\d+|n/a", re.ASCII)
_SCHEMA_VERSION = re.compile(r"\d+\.\d+(\.\d+)?", re.ASCII)
_HEX64 = re.compile(r"[0-9a-f]{64}")
_EXTENSION = re.compile(r"x_[a-z][a-z0-9_]*")
_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", re.ASCII
)
_HANDLE = re.compile(r"ecl://thread/[0-9a-f-]{36}/message/[0-9a-f-]{36}")
_SAFE_FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


def _full(pattern: re.Pattern[str], value: Any) -> bool:
    return isinstance(value, str) and pattern.fullmatch(value) is not None


def is_slug(value: Any) -> bool:
    """An eidolon name, artifact kind or checker: ``[a-z][a-z0-9-]*``, the whole string."""
    return _full(_SLUG, value)


def is_envelope_version(value: Any) -> bool:
    """``envelope_version`` 1.0-1.2 or 2.0-2.1, optionally with a patch number."""
    return _full(_ENVELOPE_VERSION, value)


def is_v1_version(value: Any) -> bool:
    return _full(_V1, value)


def is_v21_version(value: Any) -> bool:
    """A 2.1 envelope: the promotions of I-5, S-3 and S-4 depend on this alone."""
    return _full(_V21, value)


def is_agent_version(value: Any) -> bool:
    """``from.version`` / ``to.version``: ``MAJOR.MINOR.PATCH`` or ``n/a``."""
    return _full(_AGENT_VERSION, value)


def is_schema_version(value: Any) -> bool:
    """``artifact.schema_version``: ``MAJOR.MINOR[.PATCH]``."""
    return _full(_SCHEMA_VERSION, value)


def is_hex64(value: Any) -> bool:
    """A SHA-256 or HMAC-SHA-256 tag as ECL writes it: 64 lowercase hex characters."""
    return _full(_HEX64, value)


def is_extension_field(value: Any) -> bool:
    """A vendor extension field name: ``x_<vendor>_<field>``."""
    return _full(_EXTENSION, value)


def is_rfc3339(value: Any) -> bool:
    return _full(_RFC3339, value)


def is_message_handle(value: Any) -> bool:
    """``ecl://thread/<uuid>/message/<uuid>``."""
    return _full(_HANDLE, value)


def is_safe_file_name(value: Any) -> bool:
    """A name usable as one path component (a thread's trace file): letters, digits,
    ``.``, ``_``, ``-``, not starting with ``.``, at most 200 characters."""
    return _full(_SAFE_FILE_NAME, value)


def is_placeholder(value: str) -> bool:
    """Digest values a parent still has to fill: empty, ``PARENT_FILLS_*``, ``<...>``,
    ``TODO*`` (case-insensitive)."""
    stripped = value.strip()
    return (
        stripped == ""
        or stripped.startswith("PARENT_FILLS_")
        or (stripped.startswith("<") and stripped.endswith(">"))
        or stripped.upper().startswith("TODO")
    )


def has_dotdot(path: str) -> bool:
    """The one ``..`` rule, the spec's (``artifact.path`` ``^(?!/)(?!.*\\.\\.).+$``): no
    ``..`` anywhere. ``notes..v2.md`` is refused by every gate and by ``check`` alike:
    one rule, and the spec's, rather than a more permissive per-component one."""
    return ".." in path


def is_safe_relative_path(value: Any) -> bool:
    """A relative POSIX path every reader resolves to the same file, with nothing to
    normalise away: not empty, no leading ``/``, no ``..`` (:func:`has_dotdot`), no
    backslash, NUL or other control character, and no empty or ``.`` component (so
    ``r.md/``, ``r.md/.``, ``r.md//`` and ``./r.md`` are refused as malformed, rather
    than resolving to ``r.md`` for one reader and to nothing for another)."""
    if not isinstance(value, str) or not value:
        return False
    if value.startswith("/") or "\\" in value or has_dotdot(value):
        return False
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return False
    return all(part not in ("", ".") for part in value.split("/"))
