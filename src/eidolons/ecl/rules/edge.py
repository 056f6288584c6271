"""C-1..C-4 (the hand-off graph), D-0..D-3 (the context budget) and R-1 (a Markdown
payload's required sections, :func:`section_result`: MUST at the receiver gate, INFO at
``check``), against the edge's contract."""

from __future__ import annotations

import functools
from collections.abc import Mapping

from eidolons.ecl.envelope import GateResult, Recorder, get, text, token_count
from eidolons.ecl.verdict import RefusalCode

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Any

    from eidolons.ecl.contract import Contract, ContractSet


#: The receiver gate's refusal code for a failed gate (ECL §5.3 names).
RECEIVER_FAILURE_CODES: Mapping[str, RefusalCode] = {
    "C-1": RefusalCode.UNDECLARED_EDGE,
    "C-2": RefusalCode.PERFORMATIVE_NOT_ALLOWED,
    "C-3": RefusalCode.ARTIFACT_KIND_NOT_ALLOWED,
    "D-1": RefusalCode.CONTEXT_OVER_BUDGET,
    "D-2": RefusalCode.CONTEXT_OVER_BUDGET,
    "R-1": RefusalCode.MISSING_REQUIRED_SECTION,
}


def edge_contract(env: Mapping[str, Any], contracts: ContractSet) -> Contract | None:
    """The contract of the envelope's ``from.eidolon -> to.eidolon``, None if none."""
    sender, receiver = get(env, "from", "eidolon"), get(env, "to", "eidolon")
    if isinstance(sender, str) and isinstance(receiver, str):
        return contracts.get(sender, receiver)
    return None


def edge_results(
    env: Mapping[str, Any], contract: Contract | None, *, target: str | None = None
) -> list[GateResult]:
    """C-1..C-4 against the edge's ``contract``; without one only C-1 (failed)."""
    rec = Recorder(target)
    if contract is None:
        sender, receiver = text(get(env, "from", "eidolon")), text(get(env, "to", "eidolon"))
        reason = f"no contract for {sender} -> {receiver}"
        rec.fail("C-1", "MUST", "contract_for_edge_exists", reason)
        return rec.out
    rec.ok("C-1", "MUST", "contract_for_edge_exists")

    performative = env.get("performative")
    ok = isinstance(performative, str) and performative in contract.performatives_allowed
    problem = None if ok else f"performative={text(performative)} not in contract"
    rec.judge("C-2", "MUST", "performative_allowed_on_edge", problem)

    kind = get(env, "artifact", "kind")
    ok = isinstance(kind, str) and contract.artifact_for_kind(kind) is not None
    problem = None if ok else f"kind={text(kind)} not in contract"
    rec.judge("C-3", "MUST", "artifact_kind_allowed_on_edge", problem)

    origin = text(env.get("edge_origin"))
    ok = not origin or origin == contract.edge_origin
    problem = None if ok else f"envelope={origin} contract={contract.edge_origin}"
    rec.judge("C-4", "SHOULD", "edge_origin_consistent", problem, "warn")
    return rec.out


def context_results(
    env: Mapping[str, Any], contract: Contract | None, *, target: str | None = None
) -> list[GateResult]:
    """D-0..D-3; D-2 only with a contract that sets ``token_budget_max``."""
    rec = Recorder(target)
    delta = env.get("context_delta")
    if delta is None:
        rec.warn("D-0", "SHOULD", "context_delta_present", "envelope omits context_delta")
        return rec.out
    rec.ok("D-0", "SHOULD", "context_delta_present")

    if isinstance(delta, Mapping):
        raw_used, raw_budget = delta.get("tokens_used"), delta.get("token_budget")
        used, budget = token_count(raw_used), token_count(raw_budget)
        shown_used, shown_budget = text(raw_used) or "0", text(raw_budget) or "0"
        used_problem = "tokens_used must be a non-negative integer"
        budget_problem = "token_budget must be a non-negative integer"
    else:  # jq cannot index a non-object: upstream's values come out empty and fail
        used = budget = None
        shown_used = shown_budget = ""
        used_problem = budget_problem = "context_delta must be an object"

    name = "tokens_used_within_envelope_budget"
    if used is None or budget is None:
        problem = used_problem if used is None else budget_problem
        rec.fail("D-1", "MUST", name, f"used={shown_used} budget={shown_budget} ({problem})")
    elif used <= budget:
        rec.ok("D-1", "MUST", name)
    else:
        rec.fail("D-1", "MUST", name, f"used={used} budget={budget}")

    if contract is not None and contract.token_budget_max is not None:
        cmax = contract.token_budget_max
        name = "tokens_used_within_contract_budget"
        if used is None:
            rec.fail("D-2", "MUST", name, f"used={shown_used} contract_max={cmax} ({used_problem})")
        elif used <= cmax:
            rec.ok("D-2", "MUST", name)
        else:
            rec.fail("D-2", "MUST", name, f"used={used} contract_max={cmax}")

    summary = delta.get("summary") if isinstance(delta, Mapping) else None
    heuristic = (len(text(summary).encode("utf-8", "surrogatepass")) + 1) // 4
    if heuristic <= 200:
        rec.ok("D-3", "SHOULD", "summary_within_200_tokens")
    else:
        rec.warn("D-3", "SHOULD", "summary_within_200_tokens", f"heuristic≈{heuristic}")
    return rec.out


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
