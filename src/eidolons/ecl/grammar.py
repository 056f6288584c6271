"""The text of ECL: the strict reader of untrusted JSON, JSON in and out for the tool's own
lines, the caps on untrusted input, and every rule on the spelling of a value. Pure.

:func:`loads_strict` raises :class:`~eidolons.errors.EnvelopeError` for more than
``Limits.max_envelope_bytes``, bad UTF-8 or a BOM, a duplicate key at any depth, ``NaN``
or ``Infinity``, a number that overflows a double (ADR 0009), a lone surrogate, nesting
deeper than ``Limits.max_json_depth``. The C scanner of ``_json`` does the parse and
:func:`dumps` the writing without importing :mod:`json` (which imports ``re``); anything
they cannot do falls back to :mod:`json`, whose value or error is the answer (ADR 0022,
``tests/test_json_fast.py``). Writes are ASCII. A value out of range in
:meth:`Limits.from_env` is a usage error, never a fallback.

Markdown payloads' headings are read by a CommonMark parser (ADR 0008), as R-1 compares
them. The lexical predicates are True only for a ``str`` matching the whole rule, written as
tests over the characters (``re`` is not on the gates' path); each docstring gives its
pattern (``\\d`` ASCII only), and ``tests/test_grammar_rules.py`` checks each against it.
"""

from __future__ import annotations

from eidolons.errors import EnvelopeError, UsageError

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

MiB = 1024 * 1024
DEFAULT_MAX_ENVELOPE_BYTES = 1 * MiB
DEFAULT_MAX_JSON_DEPTH = 32
DEFAULT_MAX_PAYLOAD_BYTES = 1024 * MiB
# the largest values the environment may set (a cap is a buffer size too)
MAX_ENVELOPE_CAP = 64 * MiB
MAX_PAYLOAD_CAP = 1024 * 1024 * MiB
#: the most bytes one search of the trace reads by default (``io.config.trace_scan_bound``)
DEFAULT_MAX_TRACE_SCAN_BYTES = 256 * MiB


class Limits:
    """Caps on untrusted input, in bytes (``__slots__``: no dataclasses on the verification
    path, ADR 0001)."""

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
        inner = ", ".join(f"{name}={getattr(self, name)}" for name in self.__slots__)
        return f"Limits({inner})"

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


_DEFAULT_LIMITS = Limits()

# ------------------------------------------------------------------------- JSON in


class OutOfRange(ValueError):
    """A JSON number a double cannot hold (:func:`finite_float`)."""


def finite_float(text: str) -> float:
    """The one number rule of the strict readers (ADR 0009), as ``parse_float``: a number
    ``float`` reads as an infinity (``1e999``) is :class:`OutOfRange`, the value
    ``Infinity`` is refused for; an underflow (``1e-999``) is 0.0, as ``float`` reads it."""
    value = float(text)
    if value == _INFINITY or value == -_INFINITY:
        raise OutOfRange(text)
    return value


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _no_constants(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


class _Options:
    """The options a ``_json`` scanner reads, as ``json.loads(text, object_pairs_hook=...,
    parse_constant=..., parse_float=...)`` would hold them."""

    strict = True
    object_hook = None
    object_pairs_hook = staticmethod(_no_duplicates)
    parse_float = staticmethod(finite_float)
    parse_int = int
    parse_constant = staticmethod(_no_constants)


class _Defaults:
    """``json.loads``' own options, for the reader of the tool's own lines."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_int = int
    parse_float = float
    parse_constant = staticmethod(
        {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__
    )


_scan: Any
_scan_plain: Any
_encode_str: Any
_make_encoder: Any
try:
    from _json import encode_basestring_ascii as _encode_str
    from _json import make_encoder as _make_encoder
    from _json import make_scanner as _make_scanner

    _scan = _make_scanner(_Options)  # type: ignore[arg-type]
    _scan_plain = _make_scanner(_Defaults)  # type: ignore[arg-type]
except ImportError:  # pragma: no cover - an interpreter without the C accelerator
    _scan = _scan_plain = _encode_str = _make_encoder = None

_WHITESPACE = " \t\n\r"
_INFINITY = float("inf")


class NotWhole(Exception):
    """The scanner did not read the whole text as one JSON value (``json`` says why)."""


def scan_whole(
    scan: Any, text: str, keep: tuple[type[BaseException], ...] = (RecursionError,)
) -> Any:
    """The value ``scan`` reads from all of ``text`` (JSON whitespace around it allowed).
    The exceptions in ``keep`` propagate; anything else raised, or text after the value,
    is :class:`NotWhole`."""
    if scan is None:
        raise NotWhole
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, end = scan(text, start)
    except keep:
        raise
    except Exception:  # StopIteration, JSONDecodeError, a hook's error: json says which
        raise NotWhole from None
    if text[end:].strip(_WHITESPACE):
        raise NotWhole
    return value


def _fast_loads(text: str) -> Any:
    """The strict parse by the C scanner; :class:`NotWhole` for what ``json`` must report."""
    return scan_whole(_scan, text, keep=(_DuplicateKey, OutOfRange, RecursionError))


def loads_strict(data: bytes, limits: Limits | None = None) -> Any:
    """Parse untrusted JSON bytes under the rules of the module docstring."""
    limits = limits or _DEFAULT_LIMITS
    if len(data) > limits.max_envelope_bytes:
        from eidolons._text import plural

        raise EnvelopeError(
            f"envelope is {plural(len(data), 'byte')}, above the "
            f"{limits.max_envelope_bytes}-byte cap"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EnvelopeError(
            f"envelope is not valid UTF-8 ({exc.reason} at byte {exc.start})"
        ) from None
    if text.startswith("\ufeff"):
        raise EnvelopeError("envelope starts with a byte-order mark")
    try:
        try:
            value = _fast_loads(text)
        except NotWhole:
            import json

            value = json.loads(
                text,
                object_pairs_hook=_no_duplicates,
                parse_constant=_no_constants,
                parse_float=finite_float,
            )
    except _DuplicateKey as exc:
        raise EnvelopeError(f"duplicate JSON key {str(exc)!r}") from None
    except OutOfRange as exc:
        number = str(exc) if len(str(exc)) <= 40 else str(exc)[:40] + "..."
        raise EnvelopeError(f"not valid JSON: number {number} is out of range") from None
    except RecursionError:
        raise EnvelopeError("JSON nesting too deep") from None
    except ValueError as exc:  # only json.loads raises it (the fast path retries there)
        import json

        if isinstance(exc, json.JSONDecodeError):
            raise EnvelopeError(
                f"not valid JSON: {exc.msg} (line {exc.lineno} column {exc.colno})"
            ) from None
        raise EnvelopeError(f"not valid JSON: {exc}") from None
    escapes = "\\ud" in text or "\\uD" in text  # a lone surrogate needs one (UTF-8 has none)
    if escapes or text.count("{") + text.count("[") > limits.max_json_depth:
        _check_tree(value, limits.max_json_depth, surrogates=escapes)
    return value


def _check_tree(value: Any, max_depth: int, *, surrogates: bool = True) -> None:
    """Bound the nesting depth and (``surrogates``) refuse lone surrogates, in one frame."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > max_depth:
                raise EnvelopeError(f"JSON nesting deeper than {max_depth}")
            if isinstance(node, dict):
                for key in node if surrogates else ():
                    _check_text(key)
                node = node.values()
            stack.extend((child, depth + 1) for child in node)
        elif surrogates and isinstance(node, str):
            _check_text(node)


def _check_text(text: str) -> None:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise EnvelopeError("JSON string holds a lone surrogate escape") from None


def json_type(value: Any) -> str:
    """The JSON type name of a parsed value (as ``jq type`` names it)."""
    for kind, name in _JSON_TYPES:
        if isinstance(value, kind):
            return name
    return "null" if value is None else "object"


_JSON_TYPES = ((bool, "boolean"), ((int, float), "number"), (str, "string"), (list, "array"))


def loads(data: bytes | bytearray) -> Any:
    """``json.loads(data)`` for the tool's own lines: the same value, or the same exception
    (raised by :func:`json.loads` itself, to which anything but plain ASCII is handed)."""
    if data.isascii() and b"\x00" not in data[:2]:
        try:  # the ASCII text is what json.loads' encoding detection gives here
            return scan_whole(_scan_plain, data.decode("ascii"))
        except NotWhole:
            pass
    import json

    return json.loads(data)


# ------------------------------------------------------------------------ JSON out


class _Unknown(Exception):
    """A value this writer leaves to :mod:`json` (its conversion or its error)."""


def _unknown(value: Any) -> Any:
    raise _Unknown


def dumps(
    value: Any, *, indent: int | None = None, compact: bool = False, sort_keys: bool = False
) -> str:
    """``json.dumps(value, ensure_ascii=True, indent=indent, sort_keys=sort_keys)``; with
    ``compact``, the separators ``(",", ":")`` (``indent`` must then be None)."""
    if _make_encoder is not None and not (sort_keys and indent):
        try:
            if indent is None:
                item, key = ("," if compact else ", "), (":" if compact else ": ")
                encode = _make_encoder(
                    {}, _unknown, _encode_str, None, key, item, sort_keys, False, True
                )
                if isinstance(value, str):
                    return str(_encode_str(value))
                return "".join(encode(value, 0))
            if not compact:
                parts: list[str] = []
                _indented(value, " " * indent, "\n", parts.append)
                return "".join(parts)
        except (_Unknown, RecursionError, ValueError):
            pass
    import json

    separators = (",", ":") if compact else None
    return json.dumps(
        value, ensure_ascii=True, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _scalar(value: Any) -> str:
    if value is None or value is True or value is False:
        return _CONSTANTS[value]
    if isinstance(value, str):
        return str(_encode_str(value))
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value in (_INFINITY, -_INFINITY):
            return "Infinity" if value > 0 else "-Infinity"
        return float.__repr__(value)
    raise _Unknown


_CONSTANTS = {None: "null", True: "true", False: "false"}


def _indented(value: Any, step: str, newline: str, out: Callable[[str], Any]) -> None:
    """``json``'s indented layout: one item a line, ``": "`` after keys, empty containers
    as ``{}`` / ``[]``."""
    if isinstance(value, dict):
        items: Any = value.items()
        brackets = "{}"
    elif isinstance(value, (list, tuple)):
        items = ((None, child) for child in value)
        brackets = "[]"
    else:
        out(_scalar(value))
        return
    if not value:
        out(brackets)
        return
    inner = newline + step
    out(brackets[0])
    first = True
    for key, child in items:
        out(inner if first else "," + inner)
        first = False
        if brackets == "{}":
            if not isinstance(key, (str, bool, int, float)) and key is not None:
                raise _Unknown
            out(str(_encode_str(key if isinstance(key, str) else _scalar(key))) + ": ")
        _indented(child, step, inner, out)
    out(newline + brackets[1])


# ---------------------------------------------------------------- lexical rules

_LOWER = "abcdefghijklmnopqrstuvwxyz"
_DIGITS = "0123456789"
_HEX = "0123456789abcdef"
_ALNUM = _LOWER + _LOWER.upper() + _DIGITS
_SLUG = _LOWER + _DIGITS + "-"
#: ``str.translate`` table deleting the control characters (C0 and DEL)
_CONTROLS = dict.fromkeys([*range(0x20), 0x7F])
_V1 = frozenset({"1.0", "1.1", "1.2"})
_V21 = frozenset({"2.1"})
_ENVELOPE_VERSIONS = _V1 | {"2.0", "2.1"}


def _digits(text: str) -> bool:
    """``\\d+`` (ASCII digits, at least one)."""
    return bool(text) and not text.strip(_DIGITS)


def _version(value: Any, heads: frozenset[str]) -> bool:
    """``MAJOR.MINOR(\\.\\d+)?`` where ``MAJOR.MINOR`` is one of ``heads``."""
    if not isinstance(value, str):
        return False
    parts = value.split(".")
    if len(parts) not in (2, 3) or f"{parts[0]}.{parts[1]}" not in heads:
        return False
    return len(parts) == 2 or _digits(parts[2])


def _numbers(value: Any, counts: tuple[int, ...]) -> bool:
    """``\\d+(\\.\\d+)*`` with as many parts as one of ``counts``."""
    if not isinstance(value, str):
        return False
    parts = value.split(".")
    return len(parts) in counts and all(parts) and _digits("".join(parts))


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
    return (value == "n/a" and isinstance(value, str)) or _numbers(value, (3,))


def is_schema_version(value: Any) -> bool:
    """``artifact.schema_version``: ``MAJOR.MINOR[.PATCH]``."""
    return _numbers(value, (2, 3))


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


#: the characters allowed at each place of the date and time (the ``T`` is the caller's)
_DATE_PARTS = [_DIGITS if c == "d" else c for c in "dddd-dd-ddTdd:dd:dd"]


def _date_time(value: Any, t: str) -> str | None:
    """What follows ``\\d{4}-\\d{2}-\\d{2}[t]\\d{2}:\\d{2}:\\d{2}`` at the start of
    ``value`` (a str), or None when it does not start so."""
    if not isinstance(value, str) or len(value) < 19:
        return None
    for i, c in enumerate(value[:19]):
        if c not in (t if i == 10 else _DATE_PARTS[i]):
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
    return len(rest) == 6 and rest[0] in "+-" and _digits(rest[1:3] + rest[4:6]) and rest[3] == ":"


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
    return value == "orchestrator" or (
        isinstance(value, str) and value.startswith("sender:") and is_slug(value[7:])
    )


def is_project_id(value: Any) -> bool:
    """A project's id in its trust store and its receipts: 32 lowercase hex characters
    (128 random bits, made once by ``eidolons keys init``)."""
    return isinstance(value, str) and len(value) == 32 and not value.strip(_HEX)


def is_trust_edge(value: Any) -> bool:
    """A trust store edge: ``<slug or *>-><slug or *>``."""
    if not isinstance(value, str):
        return False
    parts = value.split("->")
    return len(parts) == 2 and all(p == "*" or is_slug(p) for p in parts)


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
    ``..``, backslash or control character, no empty or ``.`` component."""
    if not isinstance(value, str) or not value:
        return False
    if value.startswith("/") or "\\" in value or has_dotdot(value):
        return False
    if len(value.translate(_CONTROLS)) != len(value):
        return False
    parts = value.split("/")
    return "" not in parts and "." not in parts


# ------------------------------------------------------------ Markdown headings

#: Payload names (``artifact.path``) treated as Markdown by R-1, compared lower-case.
MARKDOWN_SUFFIXES: tuple[str, ...] = (".md", ".markdown")


_SEPARATORS = r"[\s\-]+"
_SEPARATORS_RE: list[Any] = []  # compiled on first use: re is not on every gate's start-up


def normalise_section(text: str) -> str:
    """A heading or section name as compared by R-1: trimmed, case-folded, and every run
    of whitespace and hyphens turned into one underscore (``Decision target`` and
    ``decision-target`` both give ``decision_target``)."""
    found = _NORMALISED.get(text)
    if found is None:
        found = _normalise(text)
        # the same few names, on every payload checked; longer or further ones never kept
        if len(text) <= _CACHED_LENGTH and len(_NORMALISED) < _CACHED_NAMES:
            _NORMALISED[text] = found
    return found


def _normalise(text: str) -> str:
    if not _SEPARATORS_RE:
        import re

        _SEPARATORS_RE.append(re.compile(_SEPARATORS))
    return str(_SEPARATORS_RE[0].sub("_", text.strip()).casefold())


_CACHED_LENGTH = 120
_CACHED_NAMES = 2048
_NORMALISED: dict[str, str] = {}  # a plain dict: functools is not imported on the SKIP path


def is_markdown_path(path: str) -> bool:
    """True when ``path`` names a Markdown file (``.md`` or ``.markdown``, any case)."""
    return path.lower().endswith(MARKDOWN_SUFFIXES)


_PARSER: list[Any] = []  # the one MarkdownIt, built on first use


def _block_parser() -> Any:
    """The CommonMark parser, built once, its ``inline`` rules off: a heading's text is
    the block parser's, so they change no heading and cost half the parse
    (``tests/test_sections_markdown.py`` checks the headings match the full parse)."""
    if not _PARSER:
        from markdown_it import MarkdownIt

        _PARSER.append(MarkdownIt("commonmark").disable(["inline", "text_join"]))
    return _PARSER[0]


def markdown_headings(text: str) -> list[tuple[int, str]]:
    """The top-level headings (ATX or setext, not in code, HTML, quotes or lists) of a
    Markdown document as ``(level, raw text)``, by a CommonMark parser (ADR 0008). Lines
    end only at ``\n``, ``\r\n`` or ``\r``; YAML front matter is skipped."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[0].rstrip(" \t") == "---":
        for i in range(1, len(lines)):
            if lines[i].rstrip(" \t") in ("---", "..."):
                lines = [""] * (i + 1) + lines[i + 1 :]  # keep line numbers, drop the block
                break
    tokens = _block_parser().parse("\n".join(lines))
    headings: list[tuple[int, str]] = []
    for i, token in enumerate(tokens):
        # a section is a top-level heading: not one inside a block quote or a list item
        if token.type != "heading_open" or token.level != 0 or i + 1 >= len(tokens):
            continue
        headings.append((int(token.tag[1:]), tokens[i + 1].content.strip()))
    return headings
