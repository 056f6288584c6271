"""Required sections (R-1): the ATX headings of a Markdown payload against the
``required_sections`` of the edge's contract.

Pure: bytes and a contract in, a :class:`GateResult` out. The receiver gate (MUST) and
``eidolons check`` (INFO, MUST with ``--strict``) both decide with :func:`section_result`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from eidolons.ecl.results import GateResult

if TYPE_CHECKING:
    from eidolons.ecl.contract import Contract

#: Payload names (``artifact.path``) treated as Markdown by R-1, compared lower-case.
MARKDOWN_SUFFIXES: tuple[str, ...] = (".md", ".markdown")


_ATX_RE = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*\Z")
_CLOSING_RE = re.compile(r"(?:^|[ \t]+)#+[ \t]*\Z")
_FENCE_RE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)\Z")
_SEPARATORS_RE = re.compile(r"[\s\-]+")


def normalise_section(text: str) -> str:
    """A heading or section name as compared by R-1: trimmed, case-folded, and every run
    of whitespace and hyphens turned into one underscore (``Decision target`` and
    ``decision-target`` both give ``decision_target``)."""
    return _SEPARATORS_RE.sub("_", text.strip()).casefold()


def is_markdown_path(path: str) -> bool:
    """True when ``path`` names a Markdown file (``.md`` or ``.markdown``, any case)."""
    return path.lower().endswith(MARKDOWN_SUFFIXES)


def markdown_headings(text: str) -> list[tuple[int, str]]:
    """The ATX headings of a Markdown document as ``(level, text)``, in order.

    Rules (a CommonMark subset, deliberately small):

    - A heading is a line of up to three spaces, 1 to 6 ``#``, then a space, a tab or the
      end of the line; an optional closing run of ``#`` is dropped. ``#hashtag`` is not
      a heading; Setext (underlined) headings are not recognised.
    - Fenced code blocks (a line of up to three spaces then at least three backticks or
      tildes) hide everything up to the closing fence of the same character and at least
      the same length, or to the end of the document when none closes it. A backtick
      fence whose info string contains a backtick is not a fence.
    - YAML front matter (the first line is ``---`` and a later line is ``---`` or
      ``...``) is skipped; its keys are not headings. An unclosed ``---`` is ordinary
      text.
    """
    lines = text.splitlines()
    start = 0
    if lines and lines[0].rstrip() == "---":
        for i in range(1, len(lines)):
            if lines[i].rstrip() in ("---", "..."):
                start = i + 1
                break
    headings: list[tuple[int, str]] = []
    fence: str | None = None
    for line in lines[start:]:
        if fence is not None:
            m = _FENCE_RE.match(line)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                if not m.group(2).strip():
                    fence = None
            continue
        m = _FENCE_RE.match(line)
        if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            fence = m.group(1)
            continue
        m = _ATX_RE.match(line)
        if m:
            content = _CLOSING_RE.sub("", m.group(2) or "")
            headings.append((len(m.group(1)), content.strip()))
    return headings


def section_result(
    payload: bytes,
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
