"""Untrusted text on a terminal: control characters escaped; and the small words every
message shares (a count and its noun, a suggestion for a mistyped name).

Envelope fields, file names and trace values are attacker-controlled; printed raw, a
newline or an escape sequence in ``from.eidolon`` could forge a second verdict line
(``ecl verify [pass] ...``) under a real refusal. Every one-line output passes untrusted
text through :func:`printable`. What is written as UTF-8 JSON (the MCP server's replies)
passes through :func:`encodable`: a file name that is not UTF-8 (``\\xff``, which Python
spells as the lone surrogate ``\\udcff``) cannot be encoded, and is escaped as
:func:`printable` escapes it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Iterable

_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F]} | {0x0A: "\\n", 0x0D: "\\r"}


def printable(text: str) -> str:
    """``text`` with every non-printable character escaped (``\\n``, ``\\x1b``,
    ``\\u2028``...); printable text is returned unchanged."""
    if text.isprintable():
        return text
    return "".join(_escape(c) for c in text)


def _escape(c: str) -> str:
    if c.isprintable():
        return c
    return _CONTROL.get(ord(c)) or f"\\u{ord(c):04x}"


def encodable(text: str) -> str:
    """``text`` with every lone surrogate (what a non-UTF-8 byte of a file name decodes
    to) escaped as :func:`printable` escapes it (``\\udcff``); any text that encodes as
    UTF-8 is returned unchanged, newlines and escape sequences included."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # only a surrogate fails: every other code point encodes
        return "".join(_escape(c) if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`` (did you mean 'X'?)`` naming the nearest of ``known`` to ``word``, or ``""``
    when none is close (:func:`difflib.get_close_matches`, imported only then)."""
    import difflib

    near = difflib.get_close_matches(word, sorted(known), n=1)
    return f" (did you mean {near[0]!r}?)" if near else ""


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """``n`` and its noun agreeing: ``1 hop``, ``2 hops`` (``nouns``: an irregular plural)."""
    return f"{n} {noun if n == 1 else nouns or noun + 's'}"
