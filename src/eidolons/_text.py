"""Untrusted text on a terminal: control characters escaped.

Envelope fields, file names and trace values are attacker-controlled; printed raw, a
newline or an escape sequence in ``from.eidolon`` could forge a second verdict line
(``ecl verify [pass] ...``) under a real refusal. Every one-line output passes untrusted
text through :func:`printable`.
"""

from __future__ import annotations

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
