"""R-1 required sections (:func:`eidolons.ecl.contract.section_result`) and the small
Markdown reader behind it (:func:`markdown_headings`, :func:`normalise_section`)."""

from __future__ import annotations

from typing import Any

import pytest

from eidolons.ecl.contract import section_result
from eidolons.ecl.envelope import GateResult
from eidolons.ecl.grammar import is_markdown_path, markdown_headings, normalise_section
from eidolons.io.contracts import Contract

SECTIONS = ["decision_target", "findings", "gaps", "scope"]


def contract(sections: list[str] | None = None, kind: str = "scout-report") -> Contract:
    artifact: dict[str, Any] = {"kind": kind, "schema_ref": "x.json"}
    if sections is not None:
        artifact["required_sections"] = sections
    doc = {
        "contract_version": "1.0",
        "from": "atlas",
        "to": "spectra",
        "edge_origin": "roster",
        "performatives_allowed": ["PROPOSE"],
        "artifacts": [artifact],
    }
    return Contract.from_dict(doc, "test")


def r1(text: str, sections: list[str] | None = None, **kw: Any) -> GateResult | None:
    wanted = SECTIONS if sections is None else sections
    return section_result(text.encode(), contract(wanted), "scout-report", **kw)


def missing(text: str, sections: list[str] | None = None) -> str | None:
    result = r1(text, sections)
    assert result is not None
    assert result.id == "R-1" and result.name == "required_sections_present"
    return result.reason


FULL = "# Report\n\n## Decision target\nx\n\n## Findings\n\n## Gaps\n\n## Scope\n"


def test_all_sections_present() -> None:
    result = r1(FULL)
    assert result == GateResult("R-1", "INFO", "ok", "required_sections_present")


def test_missing_sections_listed_in_contract_order() -> None:
    assert missing("# Report\n## Findings\n") == "missing sections: decision_target, gaps, scope"
    assert missing("") == "missing sections: decision_target, findings, gaps, scope"


@pytest.mark.parametrize("hashes", ["#", "##", "###", "####", "#####", "######"])
def test_any_heading_level_counts(hashes: str) -> None:
    assert missing(f"{hashes} Gaps\n", ["gaps"]) is None


@pytest.mark.parametrize(
    "line",
    [
        "####### Gaps",  # seven: not a heading
        "#Gaps",  # no space after the hashes
        "    ## Gaps",  # four spaces: indented code
        "Gaps",
        "> ## Gaps",  # inside a block quote
        "- ## Gaps",  # inside a list item: not recognised
        "Some text ## Gaps",
    ],
)
def test_lines_that_are_not_headings(line: str) -> None:
    assert missing(line + "\n", ["gaps"]) == "missing sections: gaps"


@pytest.mark.parametrize(
    "heading",
    [
        "## Decision target",
        "## decision_target",
        "## Decision-Target",
        "##   DECISION   target   ",
        "## Decision target ##",
        "   ## Decision target",
        "##\tDecision target",
        "## Decision - target",
    ],
)
def test_normalisation(heading: str) -> None:
    assert missing(heading + "\n", ["decision_target"]) is None


def test_section_names_are_normalised_too() -> None:
    assert missing("## Decision target\n", ["Decision-Target"]) is None


def test_normalisation_is_not_loose() -> None:
    assert missing("## Decision targets\n", ["decision_target"]) is not None
    assert missing("## Findings (3)\n", ["findings"]) is not None
    assert missing("## **Gaps**\n", ["gaps"]) is not None
    assert normalise_section("  Decision   target-x ") == "decision_target_x"


def test_headings_in_fenced_code_are_ignored() -> None:
    text = "```markdown\n## Gaps\n```\n~~~\n## Scope\n~~~\n"
    assert missing(text, ["gaps", "scope"]) == "missing sections: gaps, scope"


def test_fence_closes_only_on_same_char_and_length() -> None:
    text = "````\n```\n## Gaps\n~~~~\n````\n## Scope\n"
    assert missing(text, ["gaps", "scope"]) == "missing sections: gaps"


def test_unclosed_fence_runs_to_the_end() -> None:
    assert missing("## Scope\n```\n## Gaps\n", ["gaps", "scope"]) == "missing sections: gaps"


def test_inline_backticks_are_not_a_fence() -> None:
    assert missing("``` not a fence ` here\n## Gaps\n", ["gaps"]) is None


def test_front_matter_is_not_a_heading() -> None:
    text = "---\ngaps: 1\n# gaps\ndecision_target: x\n---\n\n## Scope\n"
    assert missing(text, ["gaps", "decision_target", "scope"]) == (
        "missing sections: gaps, decision_target"
    )
    assert missing("---\ntitle: x\n...\n## Gaps\n", ["gaps"]) is None


def test_unclosed_front_matter_is_text() -> None:
    assert missing("---\n## Gaps\n", ["gaps"]) is None


def test_front_matter_only_at_the_start() -> None:
    text = "## Findings\n\n---\n## Gaps\n---\n"
    assert missing(text, ["findings", "gaps"]) is None


def test_crlf_and_invalid_utf8() -> None:
    assert missing("## Gaps\r\n## Scope\r\n", ["gaps", "scope"]) is None
    result = section_result(b"## Gaps \xff\n## Scope\n", contract(["scope"]), "scout-report")
    assert result is not None and result.status == "ok"


def test_markdown_headings_levels_and_text() -> None:
    assert markdown_headings("# A\n### B ###\n###### C\n") == [(1, "A"), (3, "B"), (6, "C")]
    assert markdown_headings("#\n## #\n") == [(1, ""), (2, "")]
    assert markdown_headings("## C#\n") == [(2, "C#")]


def test_not_applicable_cases_return_none() -> None:
    text = b"# nothing\n"
    assert section_result(text, None, "scout-report") is None
    assert section_result(text, contract(SECTIONS), None) is None
    assert section_result(text, contract(SECTIONS), "spec") is None
    assert section_result(text, contract([]), "scout-report") is None
    assert section_result(text, contract(None), "scout-report") is None
    assert section_result(text, contract(SECTIONS), "scout-report", path="report.json") is None
    result = section_result(text, contract(SECTIONS), "scout-report", path="dir/Report.MD")
    assert result is not None and result.status == "fail"


def test_level_and_target() -> None:
    result = r1("# x\n", level="MUST", target="/a/b.envelope.json")
    assert result is not None
    assert (result.level, result.status, result.target) == ("MUST", "fail", "/a/b.envelope.json")
    assert not result


def test_is_markdown_path() -> None:
    assert is_markdown_path("a/b.md") and is_markdown_path("B.Markdown")
    assert not is_markdown_path("b.md.txt") and not is_markdown_path("md")
