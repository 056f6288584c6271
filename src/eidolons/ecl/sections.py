"""Required sections (R-1): the headings of a Markdown payload against the
``required_sections`` of the edge's contract.

Pure: bytes and a contract in, a :class:`GateResult` out. The receiver gate (MUST) and
``eidolons check`` (INFO, MUST with ``--strict``) both decide with :func:`section_result`.
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
    """The CommonMark parser R-1 uses, built once per process (it is immutable once
    configured, and every parse gets its own state). Its core ``inline`` rule is off (and
    ``text_join``, which only rewrites what ``inline`` makes): a heading's text is the
    content of the inline token that the *block* parser makes, so parsing emphasis,
    links and code spans inside every paragraph changes no heading and only costs time
    (half of the parse). ``tests/test_sections_markdown.py`` checks
    that the headings are those of the full parse."""
    if not _PARSER:
        from markdown_it import MarkdownIt

        _PARSER.append(MarkdownIt("commonmark").disable(["inline", "text_join"]))
    return _PARSER[0]


def markdown_headings(text: str) -> list[tuple[int, str]]:
    """The headings of a Markdown document as ``(level, text)``, in order, found by a real
    CommonMark parser (``markdown-it-py``, imported only here; ADR 0023).

    - ATX (``## Scope``) and setext (``Scope`` underlined with ``===``/``---``) headings
      count; headings inside fenced or indented code, HTML blocks and comments do not.
    - Lines end only at ``\n``, ``\r\n`` or ``\r`` (CommonMark): a separator such as
      U+2028 or ``\x1c`` never starts a new line, so it cannot glue a fake heading in.
    - YAML front matter (the first line is ``---`` and a later line is ``---`` or
      ``...``) is skipped; its keys are not headings (nor a setext heading above the
      closing ``---``). An unclosed ``---`` is ordinary text.
    - Only top-level headings are sections: one inside a block quote or a list item is
      not. The heading text is its raw inline source, trimmed (``**Gaps**`` is not
      ``Gaps``: R-1 compares names, not renderings).
    """
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
    """R-1 required_sections_present for a Markdown payload.

    The sections are ``required_sections`` of the contract's ``artifacts[]`` entry for
    ``kind``. Each must appear as the text of a heading of any level (see
    :func:`markdown_headings`) after :func:`normalise_section` on both sides. The
    reason lists the missing ones in contract order: ``"missing sections: gaps, scope"``.

    Returns None (not applicable) when there is no contract, no kind, the contract does
    not accept the kind, the entry has no required sections, or ``path`` is given and
    does not name a Markdown file (:func:`is_markdown_path`). Without ``path`` the
    payload is taken to be Markdown. The bytes are decoded as UTF-8, undecodable bytes
    replaced.
    """
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
