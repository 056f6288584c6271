"""Every ``sh`` block of the README and of its manuals in ``docs/`` runs as written, or says
why it cannot.

The blocks are found with a CommonMark parser (markdown-it-py). A block preceded by an
HTML comment ``<!-- not-run: REASON -->`` is listed as skipped with that reason (pip
installs, servers, host set-up, placeholders); every other ``sh`` block is run with
``bash -euo pipefail`` in a fresh temporary directory, with the real ``eidolons`` (the
interpreter's bin directory) first on PATH and a throw-away HOME.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md"))]
NOT_RUN = re.compile(r"\A<!--\s*not-run:\s*(\S.*?)\s*-->\s*\Z", re.DOTALL)
BIN = Path(sys.executable).parent


class Block:
    def __init__(self, doc: str, line: int, info: str, code: str, skip: str | None) -> None:
        self.doc, self.line, self.info, self.code, self.skip = doc, line, info, code, skip

    @property
    def first_line(self) -> str:
        return self.code.splitlines()[0] if self.code else ""


def document_blocks(document: Path) -> tuple[list[Block], list[tuple[int, str]]]:
    """The fenced blocks with their not-run reasons, and markers that precede no block."""
    from markdown_it import MarkdownIt

    doc = document.relative_to(ROOT).as_posix()
    tokens: list[Any] = MarkdownIt("commonmark").parse(document.read_text(encoding="utf-8"))
    blocks: list[Block] = []
    stray: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for token in tokens:
        if token.type == "html_block" and (m := NOT_RUN.match(token.content.strip())):
            if pending is not None:
                stray.append(pending)
            pending = (token.map[0] + 1, m.group(1))
            continue
        if token.type == "fence":
            reason = pending[1] if pending else None
            if pending is not None and token.info.strip() != "sh":
                stray.append(pending)
            blocks.append(Block(doc, token.map[0] + 1, token.info.strip(), token.content, reason))
            pending = None
        elif pending is not None and token.nesting >= 0:
            stray.append(pending)
            pending = None
    if pending is not None:
        stray.append(pending)
    return blocks, [(line, f"{doc}: {reason}") for line, reason in stray]


def all_blocks() -> tuple[list[Block], list[tuple[int, str]]]:
    blocks: list[Block] = []
    stray: list[tuple[int, str]] = []
    for document in DOCUMENTS:
        found, lost = document_blocks(document)
        blocks += found
        stray += lost
    return blocks, stray


BLOCKS, STRAY = all_blocks()
SH = [b for b in BLOCKS if b.info == "sh"]


def test_every_sh_block_is_run_or_skipped_with_a_reason() -> None:
    assert STRAY == [], "a not-run marker must stand right before an sh block"
    run = [b.first_line for b in SH if b.skip is None and b.doc == "README.md"]
    assert "mkdir -p proj/.eidolons && cd proj" in run  # the emit/verify/trace walk-through
    assert all(b.skip.strip() for b in SH if b.skip is not None)


@pytest.mark.parametrize(
    "block",
    [
        pytest.param(
            b, id=f"{b.doc}:line{b.line}", marks=[pytest.mark.skip(reason=f"not-run: {b.skip}")]
        )
        if b.skip
        else pytest.param(b, id=f"{b.doc}:line{b.line}")
        for b in SH
    ],
)
def test_sh_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    if not (BIN / "eidolons").exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"no eidolons script beside {sys.executable} (pip install -e .)")
        pytest.skip(f"no eidolons script beside {sys.executable}")
    home = tmp_path / "home"
    home.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("EIDOLONS_", "ECL_", "PYTEST_", "CRYSTALIUM_"))
    }
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", HOME=str(home), NO_COLOR="1")
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.code],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, (
        f"{block.doc} line {block.line} exited {proc.returncode}\n"
        f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    )
