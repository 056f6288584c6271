"""The README and the manuals document only commands and options that exist, and every
option that exists.

Help texts come from the real CLI (``eidolons [CMD [ACTION]] --help``, through ``main``); the README
and the manuals in ``docs/`` (not the ADRs) are read as Markdown: fenced code blocks (one
logical line per shell line, ``\\`` joined) and inline code spans. An option documented in
any of them counts; each ``eidolons CMD`` written in any of them must exist.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from tests.conftest import clean_env, run_cli

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
# The README and its manuals: what a user reads about the commands. docs/perf.md documents
# the bench scripts' options, not the CLI's.
DOCUMENTS = [README, *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "perf.md")]

# Long options in README code that belong to other tools (pip, pytest, ruff, mypy...).
FOREIGN_OPTIONS = {"--check"}
# Options every argparse parser has; the README need not repeat them.
IMPLICIT_OPTIONS = {"--help", "--version"}

OPTION_RE = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
FENCE_RE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
INLINE_RE = re.compile(r"`([^`]+)`")
INVOCATION_RE = re.compile(r"(?<![\w.@/-])eidolons ([a-z][a-z0-9-]*)(?: ([a-z][a-z0-9/-]*))?")


def _help(*words: str) -> str:
    r = run_cli(*words, "--help", cwd=ROOT, env=clean_env(COLUMNS="80"))
    assert r.code == 0, f"eidolons {' '.join(words)} --help: {r.err}"
    return r.out


def _subcommands(help_text: str) -> list[str]:
    """The names listed under ``positional arguments`` of an argparse help with sub-parsers."""
    section = help_text.split("positional arguments:", 1)[-1].split("options:", 1)[0]
    return re.findall(r"^ {4}([a-z][a-z0-9-]*)(?= |$)", section, re.M)


@functools.cache
def _helps() -> dict[tuple[str, ...], str]:
    """Help text per command path: (), (cmd,), (cmd, action), and (cmd, action, sub) for
    an action with its own ACTIONs (``trace store init``)."""
    helps: dict[tuple[str, ...], str] = {(): _help()}
    for cmd in _subcommands(helps[()]):
        helps[(cmd,)] = _help(cmd)
        for action in _subcommands(helps[(cmd,)]):
            helps[(cmd, action)] = _help(cmd, action)
            if " ACTION ..." in helps[(cmd, action)].split("\n\n", 1)[0]:
                for sub in _subcommands(helps[(cmd, action)]):
                    helps[(cmd, action, sub)] = _help(cmd, action, sub)
    return helps


def _options(text: str) -> set[str]:
    return set(OPTION_RE.findall(text))


def _code_segments() -> list[str]:
    """Inline code spans and the logical lines of fenced code blocks, in every document."""
    segments: list[str] = []
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        for block in FENCE_RE.findall(text):
            segments.extend(block.replace("\\\n", " ").splitlines())
        segments.extend(INLINE_RE.findall(FENCE_RE.sub("", text)))
    return segments


def _invocations() -> list[tuple[str, list[str], str]]:
    """(command, actions, options part) for every ``eidolons CMD ...`` written in README code."""
    found = []
    for segment in _code_segments():
        for match in INVOCATION_RE.finditer(segment):
            cmd, action = match.group(1), match.group(2)
            rest = segment[match.end() :]
            rest = re.split(r" -- | #|\$\(", rest)[0]  # not COMMAND, comments or substitutions
            found.append((cmd, action.split("/") if action else [], rest))
    return found


def test_helps_found() -> None:
    helps = _helps()
    assert {"demo", "emit", "verify-envelope", "verify-incoming", "run", "check"} <= {
        path[0] for path in helps if path
    }
    assert ("contracts", "list") in helps and ("memory", "recall") in helps
    assert ("trace", "show") in helps


def test_readme_commands_exist() -> None:
    helps = _helps()
    invocations = _invocations()
    assert invocations, "no `eidolons CMD` found in README.md or docs/"
    for cmd, actions, _ in invocations:
        assert (cmd,) in helps, f"the docs name `eidolons {cmd}`, which is not a command"
        if any(len(path) == 2 and path[0] == cmd for path in helps):
            for action in actions:
                assert (cmd, action) in helps, f"no action `eidolons {cmd} {action}`"


def test_readme_options_exist_in_some_help() -> None:
    known = set().union(*map(_options, _helps().values()))
    written = set().union(*map(_options, _code_segments()))
    unknown = written - known - FOREIGN_OPTIONS
    assert not unknown, f"README.md or docs/ documents options no command has: {sorted(unknown)}"


def test_readme_options_belong_to_their_command() -> None:
    helps = _helps()
    for cmd, actions, rest in _invocations():
        paths: list[tuple[str, ...]] = [(cmd, a) for a in actions if (cmd, a) in helps] or [(cmd,)]
        words = rest.split()
        if len(paths) == 1 and words and (*paths[0], words[0]) in helps:  # trace store init
            paths = [(*paths[0], words[0])]
        allowed = set().union(*(_options(helps[p]) for p in paths if p in helps))
        extra = sorted(_options(rest) - allowed)
        name = " ".join(paths[0]) if len(paths) == 1 else f"{cmd} {'/'.join(actions)}"
        assert not extra, f"docs: `eidolons {name}` with {extra}, not in its --help"


def test_all_options_documented() -> None:
    written = set().union(*map(_options, _code_segments()))
    missing = {
        " ".join(("eidolons", *path)): sorted(_options(text) - IMPLICIT_OPTIONS - written)
        for path, text in _helps().items()
    }
    missing = {name: options for name, options in missing.items() if options}
    assert not missing, f"options missing from README.md and docs/: {missing}"


def test_the_readme_links_every_manual() -> None:
    text = README.read_text(encoding="utf-8")
    manuals = [*DOCUMENTS[1:], ROOT / "docs" / "perf.md", ROOT / "docs" / "adr" / "README.md"]
    unlinked = [
        p.relative_to(ROOT).as_posix()
        for p in manuals
        if f"]({p.relative_to(ROOT).as_posix()})" not in text
    ]
    assert not unlinked, f"README.md links no manual {unlinked}"
