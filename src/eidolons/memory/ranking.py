"""The recall's ranking rules: query terms (words, identifiers), the FTS5 ``OR`` query,
selectivity and weighted reciprocal-rank fusion of the two arms. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from eidolons.memory.textscan import (
    LazyPattern,
    ascii_words,
    candidate_runs,
    has_camel,
    kebab_words,
)

TYPE_CHECKING = False  # as typing.TYPE_CHECKING: typing is not imported at memory open
if TYPE_CHECKING:
    from typing import Final

RRF_K: Final = 60
MAX_QUERY_TERMS: Final = 32
_WORD_RE: Final = LazyPattern(r"\w+")
_SEPARATORS: Final = r"\s\"'`()\[\]{}<>,;|"
# a whole raw token (a run of non-separators) not of lower-case ASCII letters only, which
# never look like an identifier
_CANDIDATE_RE: Final = LazyPattern(
    f"(?<![^{_SEPARATORS}])(?![a-z]+(?![^{_SEPARATORS}]))[^{_SEPARATORS}]+"
)
_SCAN_MAX: Final = 512  # longer texts (an excerpt) by the pattern: no re at a recall (ADR 0022)
_IDENT_PUNCT: Final = frozenset("_./-:\\#@=")
_KEBAB_WORDS_RE: Final = LazyPattern(r"(?i)[a-z]+(?:-[a-z]+)+")


def _distinct(tokens: Iterable[str]) -> list[str]:
    """The first ``MAX_QUERY_TERMS`` distinct tokens, in order."""
    seen: dict[str, None] = {}
    for token in tokens:
        seen.setdefault(token, None)
        if len(seen) >= MAX_QUERY_TERMS:
            break
    return list(seen)


def word_terms(query: str) -> list[str]:
    """The query's word tokens (``\\w+``), lower-cased, deduplicated, at most 32."""
    tokens = ascii_words(query)
    return _distinct(
        token.lower() for token in (_WORD_RE.findall(query) if tokens is None else tokens)
    )


def looks_like_identifier(token: str) -> bool:
    """A path, a dotted or snake/kebab name, a camelCase name, or anything with a digit."""
    return (
        any(ch in _IDENT_PUNCT for ch in token)
        or any(ch.isdigit() for ch in token)
        or has_camel(token)
    )


def _identifier_tokens(text: str) -> Iterator[str]:
    """The tokens of ``text`` (runs without whitespace, quotes, brackets, ``,;|``, stripped
    of ``.:!?=`` at both ends) that look like identifiers or paths, at least 3 chars."""
    runs = candidate_runs(text) if len(text) <= _SCAN_MAX else None
    for raw in _CANDIDATE_RE.findall(text) if runs is None else runs:
        token = raw.strip(".:!?=")
        if len(token) < 3:
            continue
        # a token of letters only can look like an identifier by an inner capital alone
        if has_camel(token) if token.isalpha() else looks_like_identifier(token):
            yield token


def identifier_terms(query: str) -> list[str]:
    """The query's identifier- and path-like tokens, deduplicated, at most 32: what the
    trigram arm searches for."""
    return _distinct(_identifier_tokens(query))


def trigram_terms(query: str) -> list[str]:
    """:func:`identifier_terms` but the hyphenated words (``scout-report``), which the word
    arm already searches as their words (ADR 0021)."""
    return [term for term in identifier_terms(query) if not _kebab_words(term) or has_camel(term)]


def _kebab_words(term: str) -> bool:
    """Whether ``_KEBAB_WORDS_RE`` matches the whole ``term``."""
    plain = kebab_words(term)
    return _KEBAB_WORDS_RE.fullmatch(term) is not None if plain is None else plain


def identifier_text(text: str) -> str:
    """What the trigram index holds of a text: its identifier- and path-like tokens, in
    order, one space apart; every occurrence of a query term lies inside one (ADR 0021)."""
    return " ".join(_identifier_tokens(text))


def fts_or(terms: Iterable[str]) -> str:
    """An FTS5 query: each term as a quoted phrase, OR-ed."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def selectivity(n_hits: int, fetch_limit: int, n_scoped: int) -> float:
    """The server's rule: 0 when the arm is empty or censored (filled its fetch), else
    ``1 - hits / scoped``."""
    if n_hits == 0 or n_hits >= fetch_limit or n_scoped <= 0:
        return 0.0
    return max(0.0, 1.0 - n_hits / n_scoped)


def rrf_fuse(
    arms: Sequence[tuple[float, Sequence[str]]], k_rrf: int = RRF_K
) -> list[tuple[str, float]]:
    """Weighted reciprocal-rank fusion: ``score(id) = sum(w / (k_rrf + rank))``, ranks from
    1, ordered by score descending then id ascending."""
    scores: dict[str, float] = {}
    for weight, ranked in arms:
        for rank, ident in enumerate(ranked, start=1):
            scores[ident] = scores.get(ident, 0.0) + weight / (k_rrf + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))
