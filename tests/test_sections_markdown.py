"""Headings by a real CommonMark parser: setext counts; code, HTML blocks
and comments hide headings; no separator character glues a fake heading into a line; a
non-Markdown payload on an edge that requires sections is refused with a reason."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from eidolons.ecl.grammar import markdown_headings
from tests.conftest import Run, emit_cmd, emit_payload

Cli = Callable[..., Run]


def names(text: str) -> list[str]:
    return [t for _, t in markdown_headings(text)]


def test_setext_headings_count() -> None:
    assert names("Findings\n========\n\nGaps\n----\n") == ["Findings", "Gaps"]


@pytest.mark.parametrize(
    "text",
    [
        "```\n## Gaps\n```\n",  # fenced code
        "    ## Gaps\n",  # indented code
        "<div>\n## Gaps\n</div>\n",  # HTML block
        "<!--\n## Gaps\n-->\n",  # HTML comment
        "intro\u2028## Gaps\n",  # line separator does not end a line
        "intro\x1c## Gaps\n",  # file separator does not either
        "intro\x85## Gaps\n",  # nor NEL
        "> ## Gaps\n",  # inside a block quote: not a section
        "---\n## Gaps: x\n---\n",  # front matter
    ],
)
def test_hidden_or_glued_headings_do_not_count(text: str) -> None:
    assert "Gaps" not in " ".join(names(text)), names(text)


def test_front_matter_keys_are_not_a_setext_heading() -> None:
    assert names("---\ntitle: Gaps\n---\n# Report\n") == ["Report"]


def test_sections_hidden_in_code_are_refused_at_the_receiver(cli: Cli, project: Path) -> None:
    body = "# S\n## Decision target\n## Findings\n## Scope\n```\n## Gaps\n```\n"
    payload, envelope, _ = emit_payload(
        cli, project, "s.md", body, "--no-check", "--input-handle", "mission.md",
        to="spectra@4.11.0",
    )  # fmt: skip
    assert cli("verify-envelope", envelope).code == 0
    r = cli("verify-incoming", payload, "--as", "spectra", "--no-memory")
    lines = r.err.splitlines()
    assert lines[0] == "[spectra-verify-incoming] REFUSE: MISSING_REQUIRED_SECTION from atlas"
    assert lines[1].endswith("missing sections: gaps")


def test_non_markdown_payload_on_a_sections_edge_is_refused(cli: Cli, project: Path) -> None:
    payload = project / "scout.txt"
    payload.write_text("Decision target\nFindings\nGaps\nScope\n")
    args = emit_cmd(payload, "--input-handle", "mission.md", to="spectra", performative="PROPOSE")
    r = cli(*args)
    assert r.code == 3 and "is not a Markdown file" in r.err  # the sender is told first
    assert cli(*args, "--no-check").code == 0
    assert cli("verify-envelope", project / "scout.envelope.json").code == 0
    r = cli("verify-incoming", payload, "--as", "spectra", "--no-memory")
    lines = r.err.splitlines()
    assert lines[0] == "[spectra-verify-incoming] REFUSE: MISSING_REQUIRED_SECTION from atlas"
    assert "'scout.txt' is not a Markdown file" in lines[1] and "decision_target" in lines[1]
