"""JSON text out and in, exactly as ``json.dumps(value, ensure_ascii=True, ...)`` and
``json.loads`` (the tool's own lines), by the C accelerators of ``_json`` without importing
:mod:`json` (which imports ``re``); anything they do not know falls back to :mod:`json`
(ADR 0022, ``tests/test_json_fast.py``). Pure. Writes are ASCII: untrusted strings can
never make the encoder fail. The strict reader of untrusted JSON is
:mod:`eidolons.ecl.strict_json`."""

from __future__ import annotations

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_encode_str: Any
_make_encoder: Any
_scan: Any
try:
    from _json import encode_basestring_ascii as _encode_str
    from _json import make_encoder as _make_encoder
    from _json import make_scanner as _make_scanner
except ImportError:  # pragma: no cover - an interpreter without the C accelerator
    _encode_str = _make_encoder = _scan = None
else:

    class _Defaults:
        """``json.loads``' own options (``json.decoder.JSONDecoder()``'s), for the scanner."""

        strict = True
        object_hook = None
        object_pairs_hook = None
        parse_float = float
        parse_int = int
        parse_constant = staticmethod(
            {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__
        )

    _scan = _make_scanner(_Defaults)  # type: ignore[arg-type]

_WHITESPACE = " \t\n\r"
_INFINITY = float("inf")


class OutOfRange(ValueError):
    """A JSON number a double cannot hold (:func:`finite_float`)."""


def finite_float(text: str) -> float:
    """The one number rule of the strict readers (:mod:`eidolons.ecl.strict_json`, the
    hook's event reader), given as ``parse_float`` to the C scanner and to
    :func:`json.loads` alike (ADR 0009): a JSON number with a fraction or an exponent as
    ``float`` reads it, unless it overflows a double (``1e999``, ``-1e999``, 400 digits),
    which ``float`` reads as an infinity, the very value ``Infinity`` is refused for:
    :class:`OutOfRange`. An underflow (``1e-999``) is 0.0, as ``float`` reads it: the
    text names a finite number. (:func:`loads`, ``json.loads`` for the tool's own lines,
    keeps ``float``.)"""
    value = float(text)
    if value == _INFINITY or value == -_INFINITY:
        raise OutOfRange(text)
    return value


class NotWhole(Exception):
    """The scanner did not read the whole text as one JSON value (the public parser then
    says why, or reads it: :func:`scan_whole`)."""


def scan_whole(
    scan: Any, text: str, keep: tuple[type[BaseException], ...] = (RecursionError,)
) -> Any:
    """The value a ``_json`` scanner reads from all of ``text`` (JSON whitespace around it,
    as :func:`json.loads` allows), for both readers (this module's and
    :mod:`eidolons.ecl.strict_json`'s). The exceptions in ``keep`` propagate (a caller
    keeps ``RecursionError``: too deep is never "retry"); anything else the scanner
    raises, or text after the value, raises :class:`NotWhole`."""
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


def loads(data: bytes | bytearray) -> Any:
    """``json.loads(data)``: the same value, or the same exception (raised by
    :func:`json.loads` itself, to which anything but plain ASCII JSON is handed)."""
    if _scan is not None and data.isascii() and b"\x00" not in data[:2]:
        try:  # the ASCII text is what json.loads' encoding detection gives here
            return scan_whole(_scan, data.decode("ascii"))
        except NotWhole:
            pass
    import json

    return json.loads(data)


class _Unknown(Exception):
    """A value this writer leaves to :mod:`json` (its conversion or its error)."""


def _unknown(value: Any) -> Any:
    raise _Unknown


def dumps(
    value: Any, *, indent: int | None = None, compact: bool = False, sort_keys: bool = False
) -> str:
    """``json.dumps(value, ensure_ascii=True, indent=indent, sort_keys=sort_keys)``; with
    ``compact``, the separators ``(",", ":")`` (``indent`` must then be None)."""
    if _encode_str is not None and _make_encoder is not None and not (sort_keys and indent):
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
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return str(_encode_str(value))
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value in (float("inf"), float("-inf")):
            return "Infinity" if value > 0 else "-Infinity"
        return float.__repr__(value)
    raise _Unknown


def _key(key: Any) -> str:
    if isinstance(key, str):
        return str(_encode_str(key))
    if key is None or isinstance(key, (bool, int, float)):
        return str(_encode_str(_scalar(key)))
    raise _Unknown


def _indented(value: Any, step: str, newline: str, out: Callable[[str], Any]) -> None:
    """``json``'s indented layout: items one per line, ``,`` after each but the last,
    ``": "`` after keys, empty containers as ``{}`` / ``[]``."""
    if isinstance(value, dict):
        if not value:
            out("{}")
            return
        inner = newline + step
        out("{")
        first = True
        for key, child in value.items():
            out(inner if first else "," + inner)
            first = False
            out(_key(key))
            out(": ")
            _indented(child, step, inner, out)
        out(newline + "}")
    elif isinstance(value, (list, tuple)):
        if not value:
            out("[]")
            return
        inner = newline + step
        out("[")
        first = True
        for child in value:
            out(inner if first else "," + inner)
            first = False
            _indented(child, step, inner, out)
        out(newline + "]")
    else:
        out(_scalar(value))
