"""Required sections (R-1): a Markdown payload's headings against the ``required_sections``
of the edge's contract. Pure; the receiver gate (MUST) and ``check`` (INFO, MUST with
``--strict``) both decide with :func:`section_result`.
"""

from __future__ import annotations

import functools

from eidolons.ecl.results import GateResult

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Any

    from eidolons.ecl.contract import Contract

#: Payload names (``artifact.path``) treated as Markdown by R-1, compared lower-case.
MARKDOWN_SUFFIXES: tuple[str, ...] = (".md", ".markdown")


_SEPARATORS = r"[\s\-]+"
_SEPARATORS_RE: list[Any] = []  # compiled on first use: re is not on every gate's start-up


def normalise_section(text: str) -> str:
    """A heading or section name as compared by R-1: trimmed, case-folded, and every run
    of whitespace and hyphens turned into one underscore (``Decision target`` and
    ``decision-target`` both give ``decision_target``)."""
    if len(text) <= _CACHED_LENGTH:  # the same few names, on every payload checked
        return _normalise_cached(text)
    return _normalise(text)


def _normalise(text: str) -> str:
    if not _SEPARATORS_RE:
        import re

        _SEPARATORS_RE.append(re.compile(_SEPARATORS))
    return str(_SEPARATORS_RE[0].sub("_", text.strip()).casefold())


_CACHED_LENGTH = 120  # longer headings are normalised each time, never kept
_normalise_cached = functools.lru_cache(maxsize=2048)(_normalise)


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
    Markdown document as ``(level, raw text)``, by a CommonMark parser (ADR 0023). Lines
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


def section_result(
    payload: bytes | bytearray,
    contract: Contract | None,
    kind: str | None,
    *,
    level: str = "INFO",
    path: str | None = None,
    target: str | None = None,
) -> GateResult | None:
    """R-1: each ``required_sections`` name of the contract's entry for ``kind`` is a
    heading (both normalised); the reason lists the missing ones in contract order.
    None when it does not apply (no contract, kind or sections, or ``path`` given and not
    Markdown)."""
    if contract is None or kind is None:
        return None
    artifact = contract.artifact_for_kind(kind)
    if artifact is None or not artifact.required_sections:
        return None
    if path is not None and not is_markdown_path(path):
        return None
    found = {normalise_section(t) for _, t in markdown_headings(payload.decode("utf-8", "replace"))}
    missing = [s for s in artifact.required_sections if normalise_section(s) not in found]
    name = "required_sections_present"
    if missing:
        return GateResult(
            "R-1", level, "fail", name, "missing sections: " + ", ".join(missing), target
        )
    return GateResult("R-1", level, "ok", name, None, target)
