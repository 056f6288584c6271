"""The memory's text rules by plain scans, so a recall or a merge imports no :mod:`re`
(ADR 0022). Each rule stays a :class:`LazyPattern`, compiled on first use; each scan gives
the pattern's exact answer or None (then the caller uses the pattern), as
``tests/memory/test_memory_textscan.py`` checks."""

from __future__ import annotations

TYPE_CHECKING = False  # as typing.TYPE_CHECKING: typing is not imported at memory open
if TYPE_CHECKING:
    import re
    from typing import Final


class LazyPattern:
    """A regular expression compiled on first use, with the methods the memory calls."""

    __slots__ = ("_compiled", "pattern")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._compiled: re.Pattern[str] | None = None

    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            import re

            self._compiled = re.compile(self.pattern)
        return self._compiled

    def fullmatch(self, text: str) -> re.Match[str] | None:
        return self.compiled().fullmatch(text)

    def findall(self, text: str) -> list[str]:
        return self.compiled().findall(text)

    def sub(self, replacement: str, text: str) -> str:
        return self.compiled().sub(replacement, text)

    def __repr__(self) -> str:
        return f"LazyPattern({self.pattern!r})"


_LOWER: Final = frozenset("abcdefghijklmnopqrstuvwxyz")
_UPPER: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_DIGITS: Final = frozenset("0123456789")
_LOWER_OR_DIGIT: Final = _LOWER | _DIGITS
_WORD_ASCII: Final = _LOWER | _UPPER | _DIGITS | {"_"}
# the separators of a raw token that are not whitespace (whitespace is str.split's, the
# same Py_UNICODE_ISSPACE as the patterns' \s)
_SEPARATORS_TO_SPACE: Final = str.maketrans(dict.fromkeys("\"'`()[]{}<>,;|", " "))


def ascii_words(text: str) -> list[str] | None:
    """``re.findall(r"\\w+", text)`` for an ASCII ``text`` (``\\w`` is then
    ``[A-Za-z0-9_]``); None for any other text."""
    if not text.isascii():
        return None
    words: list[str] = []
    start = -1
    for index, ch in enumerate(text):
        if ch in _WORD_ASCII:
            if start < 0:
                start = index
        elif start >= 0:
            words.append(text[start:index])
            start = -1
    if start >= 0:
        words.append(text[start:])
    return words


def candidate_runs(text: str) -> list[str] | None:
    """For an ASCII ``text``, what ``ranking``'s candidate pattern finds: every maximal run
    of non-separators (whitespace, quotes, brackets, ``,;|``) that is not made of
    lower-case letters only, in order; None for any other text."""
    if not text.isascii():
        return None
    runs = text.translate(_SEPARATORS_TO_SPACE).split()
    return [run for run in runs if not (run.isalpha() and run.islower())]


def has_camel(text: str) -> bool:
    """``re.search("[a-z0-9][A-Z]", text)`` (ASCII classes: exact for any text)."""
    previous = False
    for ch in text:
        if previous and ch in _UPPER:
            return True
        previous = ch in _LOWER_OR_DIGIT
    return False


def kebab_words(term: str) -> bool | None:
    """``re.fullmatch("(?i)[a-z]+(?:-[a-z]+)+", term)`` for an ASCII ``term`` (letters
    joined by single hyphens); None for any other term (case folding reaches past ASCII)."""
    if not term.isascii():
        return None
    parts = term.split("-")
    return len(parts) >= 2 and all(part.isalpha() for part in parts)


def plain_term(term: str) -> bool:
    """``re.fullmatch("[a-z0-9]+", term)`` (ASCII classes: exact for any text)."""
    return bool(term) and all(ch in _LOWER_OR_DIGIT for ch in term)


def envelope_version(text: str) -> bool | None:
    """``re.fullmatch(r"[12](\\.\\d+){1,2}", text)`` for an ASCII ``text``; None for any
    other (``\\d`` is every Unicode decimal digit)."""
    if not text.isascii():
        return None
    if text[:1] not in ("1", "2") or text[1:2] != ".":
        return False
    parts = text[2:].split(".")
    return len(parts) <= 2 and all(part and all(ch in _DIGITS for ch in part) for part in parts)


def tier_digit(text: str) -> str | None:
    """The digit of ``re.fullmatch("[Tt]([0-3])", text)``, or None when it does not match
    (literal characters: exact for any text)."""
    if len(text) == 2 and text[0] in ("T", "t") and text[1] in ("0", "1", "2", "3"):
        return text[1]
    return None


def _ssn_shape(text: str) -> bool:
    """Whether ``text`` holds ``ddd-dd-dddd`` (``d`` a Unicode decimal digit, as ``\\d``):
    what the SSN pattern needs, without its word boundaries."""
    at = text.find("-", 3)
    while 0 <= at <= len(text) - 8:
        if (
            text[at + 3] == "-"
            and text[at - 3 : at].isdecimal()
            and text[at + 1 : at + 3].isdecimal()
            and text[at + 4 : at + 8].isdecimal()
        ):
            return True
        at = text.find("-", at + 1)
    return False


_GITHUB_PREFIXES: Final = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")


def may_redact(rule: str, text: str) -> bool:
    """False only when the redaction pattern named ``rule`` cannot match ``text``: each
    pattern needs a literal its test here looks for (the password rule ignores case, which
    reaches past ASCII: any other text may match). True for a rule it does not know."""
    if rule == "SSN":
        return _ssn_shape(text)
    if rule == "AWS_KEY":
        return "AKIA" in text or "ASIA" in text
    if rule == "GITHUB_TOKEN":
        return any(prefix in text for prefix in _GITHUB_PREFIXES)
    if rule == "JWT":
        return "eyJ" in text
    if rule == "PEM_PRIVATE_KEY":
        return "-----BEGIN " in text
    if rule == "PASSWORD":
        return not text.isascii() or "password" in text.lower()
    return True
