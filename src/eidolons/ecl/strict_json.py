"""Strict JSON: the only parser of untrusted JSON bytes (envelopes, ``--ise``). Pure.

Each failure raises :class:`~eidolons.errors.EnvelopeError`: more than
``Limits.max_envelope_bytes``, bad UTF-8 or a BOM, a duplicate key at any depth, ``NaN``
or ``Infinity``, a number that overflows a double (ADR 0009), a lone surrogate, nesting
deeper than ``Limits.max_json_depth``. The C scanner of ``json.loads`` does the parse;
any failure is parsed again by :func:`json.loads`, whose error is reported (ADR 0022).
"""

from __future__ import annotations

from eidolons.ecl.jsontext import NotWhole as _Retry  # the scanner could not read it all
from eidolons.ecl.jsontext import OutOfRange as _OutOfRange
from eidolons.ecl.jsontext import finite_float as _finite_float
from eidolons.ecl.jsontext import scan_whole
from eidolons.ecl.limits import Limits
from eidolons.errors import EnvelopeError

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Any


_DEFAULT_LIMITS = Limits()


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
    """What the C scanner reads its options from (as a ``json.JSONDecoder`` would hold
    them for ``json.loads(text, object_pairs_hook=..., parse_constant=...)``)."""

    strict = True
    object_hook = None
    object_pairs_hook = staticmethod(_no_duplicates)
    parse_float = staticmethod(_finite_float)
    parse_int = int
    parse_constant = staticmethod(_no_constants)


try:
    from _json import make_scanner as _make_scanner

    _scan: Any = _make_scanner(_Options)  # type: ignore[arg-type]
except ImportError:  # pragma: no cover - an interpreter without the C accelerator
    _scan = None


def _fast_loads(text: str) -> Any:
    """``json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants,
    parse_float=_finite_float)`` for valid text, by the same C scanner; raises ``_Retry``
    for anything else (which :func:`json.loads` then reports), :class:`_DuplicateKey`,
    :class:`_OutOfRange` and ``RecursionError`` as :func:`json.loads` would."""
    if _scan is None:
        raise _Retry
    return scan_whole(_scan, text, keep=(_DuplicateKey, _OutOfRange, RecursionError))


def loads_strict(data: bytes, limits: Limits | None = None) -> Any:
    """Parse untrusted JSON bytes under the rules in the module docstring (1 and 2)."""
    limits = limits or _DEFAULT_LIMITS
    if len(data) > limits.max_envelope_bytes:
        raise EnvelopeError(
            f"envelope is {len(data)} bytes, above the {limits.max_envelope_bytes}-byte cap"
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
        except _Retry:
            import json

            value = json.loads(
                text,
                object_pairs_hook=_no_duplicates,
                parse_constant=_no_constants,
                parse_float=_finite_float,
            )
    except _DuplicateKey as exc:
        raise EnvelopeError(f"duplicate JSON key {str(exc)!r}") from None
    except _OutOfRange as exc:
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
    """Bound the nesting depth and (``surrogates``) refuse lone surrogates, iteratively,
    in one frame: only a non-ASCII string costs a call."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            if depth > max_depth:
                raise EnvelopeError(f"JSON nesting deeper than {max_depth}")
            for key, child in node.items():
                if surrogates and not key.isascii():
                    _check_text(key)
                stack.append((child, depth + 1))
        elif isinstance(node, list):
            if depth > max_depth:
                raise EnvelopeError(f"JSON nesting deeper than {max_depth}")
            for child in node:
                stack.append((child, depth + 1))
        elif surrogates and isinstance(node, str) and not node.isascii():
            _check_text(node)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise EnvelopeError("JSON string holds a lone surrogate escape") from None


def json_type(value: Any) -> str:
    """The JSON type name of a parsed value (as ``jq type`` names it)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"
