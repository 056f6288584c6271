"""The lexical grammar of ECL: every rule on the spelling of a value, written once.

Pure. Each predicate is True only for a ``str`` matching the whole rule (a trailing
newline would split a refusal line or a trace file name). The rules are written as tests
over the characters (``re`` is not on the gates' path, ADR 0022); each docstring gives its
pattern (``\\d`` ASCII only), and ``tests/test_grammar_rules.py`` checks every predicate
against it with ``re.fullmatch`` on many generated strings.
"""

from __future__ import annotations

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Any

_LOWER = "abcdefghijklmnopqrstuvwxyz"
_DIGITS = "0123456789"
_HEX = "0123456789abcdef"
_ALNUM = _LOWER + _LOWER.upper() + _DIGITS
_SLUG = _LOWER + _DIGITS + "-"
#: ``str.translate`` table deleting the control characters (C0 and DEL)
_CONTROLS = dict.fromkeys([*range(0x20), 0x7F])


def _digits(text: str) -> bool:
    """``\\d+`` (ASCII digits, at least one)."""
    return bool(text) and not text.strip(_DIGITS)


def _slug(text: str) -> bool:
    return bool(text) and text[0] in _LOWER and not text.strip(_SLUG)


def _version(value: Any, heads: frozenset[str]) -> bool:
    """``MAJOR.MINOR(\\.\\d+)?`` where ``MAJOR.MINOR`` is one of ``heads``."""
    if not isinstance(value, str):
        return False
    parts = value.split(".")
    if len(parts) not in (2, 3) or f"{parts[0]}.{parts[1]}" not in heads:
        return False
    return len(parts) == 2 or (bool(parts[2]) and not parts[2].strip(_DIGITS))


_V1 = frozenset({"1.0", "1.1", "1.2"})
_V2 = frozenset({"2.0", "2.1"})
_V21 = frozenset({"2.1"})
_ENVELOPE_VERSIONS = _V1 | _V2


def is_slug(value: Any) -> bool:
    """An eidolon name, artifact kind or checker: ``[a-z][a-z0-9-]*``, the whole string."""
    return isinstance(value, str) and bool(value) and value[0] in _LOWER and not value.strip(_SLUG)


def is_envelope_version(value: Any) -> bool:
    """``envelope_version`` 1.0-1.2 or 2.0-2.1, optionally with a patch number."""
    return _version(value, _ENVELOPE_VERSIONS)


def is_v1_version(value: Any) -> bool:
    """``1\\.[012](\\.\\d+)?``."""
    return _version(value, _V1)


def is_v21_version(value: Any) -> bool:
    """``2\\.1(\\.\\d+)?``: the promotions of I-5, S-3 and S-4 depend on this alone."""
    return _version(value, _V21)


def is_agent_version(value: Any) -> bool:
    """``from.version`` / ``to.version``: ``MAJOR.MINOR.PATCH`` or ``n/a``."""
    if value == "n/a" and isinstance(value, str):
        return True
    if not isinstance(value, str):
        return False
    parts = value.split(".")
    return len(parts) == 3 and all(parts) and not "".join(parts).strip(_DIGITS)


def is_schema_version(value: Any) -> bool:
    """``artifact.schema_version``: ``MAJOR.MINOR[.PATCH]``."""
    if not isinstance(value, str):
        return False
    parts = value.split(".")
    return len(parts) in (2, 3) and all(parts) and not "".join(parts).strip(_DIGITS)


def is_hex64(value: Any) -> bool:
    """A SHA-256 or HMAC-SHA-256 tag as ECL writes it: 64 lowercase hex characters."""
    return isinstance(value, str) and len(value) == 64 and not value.strip(_HEX)


def is_extension_field(value: Any) -> bool:
    """A vendor extension field name: ``x_<vendor>_<field>``."""
    return (
        isinstance(value, str)
        and value.startswith("x_")
        and len(value) > 2
        and value[2] in _LOWER
        and not value.strip(_LOWER + _DIGITS + "_")
    )


def _date_time(value: Any, t: str) -> str | None:
    """What follows ``\\d{4}-\\d{2}-\\d{2}[t]\\d{2}:\\d{2}:\\d{2}`` at the start of
    ``value`` (a str), or None when it does not start so."""
    if not isinstance(value, str) or len(value) < 19:
        return None
    head = value[:19]
    for i, c in enumerate(head):
        if i in (4, 7):
            ok = c == "-"
        elif i == 10:
            ok = c in t
        elif i in (13, 16):
            ok = c == ":"
        else:
            ok = c in _DIGITS
        if not ok:
            return None
    return value[19:]


def _fraction(rest: str, most: int | None) -> str | None:
    """``rest`` after an optional ``\\.\\d+`` (at most ``most`` digits), or None."""
    if not rest.startswith("."):
        return rest
    n = len(rest) - len(rest[1:].lstrip(_DIGITS)) - 1
    if n == 0 or (most is not None and n > most):
        return None
    return rest[1 + n :]


def is_rfc3339(value: Any) -> bool:
    """``\\d{4}-\\d{2}-\\d{2}[Tt]\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?([Zz]|[+-]\\d{2}:\\d{2})``."""
    rest = _date_time(value, "Tt")
    rest = None if rest is None else _fraction(rest, None)
    if rest is None:
        return False
    if rest in ("Z", "z"):
        return True
    return (
        len(rest) == 6
        and rest[0] in "+-"
        and _digits(rest[1:3])
        and rest[3] == ":"
        and _digits(rest[4:6])
    )


def is_utc_timestamp(value: Any) -> bool:
    """A trust store's time stamp: RFC 3339 in UTC, ``T`` and ``Z`` upper case, at most
    microseconds."""
    rest = _date_time(value, "T")
    return rest is not None and _fraction(rest, 6) == "Z"


def is_message_handle(value: Any) -> bool:
    """``ecl://thread/<uuid>/message/<uuid>``."""
    if not isinstance(value, str) or len(value) != 94:
        return False
    if not (value.startswith("ecl://thread/") and value[49:58] == "/message/"):
        return False
    return not value[13:49].strip(_HEX + "-") and not value[58:].strip(_HEX + "-")


def is_trust_role(value: Any) -> bool:
    """A trust store key's role: ``orchestrator`` or ``sender:<slug>``."""
    if not isinstance(value, str):
        return False
    return value == "orchestrator" or (value.startswith("sender:") and _slug(value[7:]))


def is_project_id(value: Any) -> bool:
    """A project's id in its trust store and its receipts: 32 lowercase hex characters
    (128 random bits, made once by ``eidolons keys init``)."""
    return isinstance(value, str) and len(value) == 32 and not value.strip(_HEX)


def is_trust_edge(value: Any) -> bool:
    """A trust store edge: ``<slug or *>-><slug or *>``."""
    if not isinstance(value, str):
        return False
    parts = value.split("->")
    return len(parts) == 2 and all(p == "*" or _slug(p) for p in parts)


def is_safe_file_name(value: Any) -> bool:
    """A name usable as one path component (a thread's trace file): letters, digits,
    ``.``, ``_``, ``-``, not starting with ``.``, at most 200 characters."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= 200
        and value[0] in _ALNUM
        and not value.strip(_ALNUM + "._-")
    )


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
    """The spec's one ``..`` rule (``^(?!/)(?!.*\\.\\.).+$``): no ``..`` anywhere, so
    ``notes..v2.md`` is refused by every gate and by ``check`` alike."""
    return ".." in path


def is_safe_relative_path(value: Any) -> bool:
    """A relative POSIX path every reader resolves alike: not empty, no leading ``/``, no
    ``..``, backslash or control character, no empty or ``.`` component (``./r.md`` and
    ``r.md/`` would be ``r.md`` to one reader and nothing to another)."""
    if not isinstance(value, str) or not value:
        return False
    if value.startswith("/") or "\\" in value or has_dotdot(value):
        return False
    if len(value.translate(_CONTROLS)) != len(value):
        return False
    parts = value.split("/")
    return "" not in parts and "." not in parts
