"""The project's state paths are spelled once (ADR 0001): in :mod:`eidolons.io.paths`
(``os`` only, on every path that needs one), imported everywhere else; and moving them
there added no module to the hook's or the early SKIP's path."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from eidolons.io import paths as knownhandoff
from tests.conftest import REPO
from tests.test_launcher import LAUNCHER, imported

SRC = REPO / "src" / "eidolons"
#: the spellings that must appear once: the home's own, nowhere else
SPELLINGS = {
    ".trace",
    "trace-store.json",
    "config.toml",
    "handoffs",
    ".ignore",
    "handoffs/",
    "EIDOLONS_TRACE_DSN",
    "EIDOLONS_HANDOFF_DIRS",
}
HOME = "io/paths.py"
#: (file, constant): the same characters naming something else
OTHER_MEANINGS = {
    ("hosts/hook/events.py", "config.toml"),  # Codex's own .codex/config.toml (host wiring)
    ("io/config.py", "handoffs"),  # the [handoffs] section of the TOML file
}


def test_each_state_path_is_spelled_once() -> None:
    found: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        name = path.relative_to(SRC).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Constant)
                and node.value in SPELLINGS
                and (name, node.value) not in OTHER_MEANINGS
            ):
                found.setdefault(node.value, []).append(f"{name}:{node.lineno}")
    assert {k: v for k, v in found.items() if v != [f"{HOME}:{v[0].split(':')[1]}"]} == {}
    assert {s for s in SPELLINGS if s not in found} == set()


def test_the_modules_that_named_them_use_the_one_spelling() -> None:
    from eidolons.hosts.hook import decide, events
    from eidolons.hosts.init import DIRS, IGNORE
    from eidolons.io import config
    from eidolons.io import config as state
    from eidolons.trace import store as tracestore

    assert state.TRACE_DIR is knownhandoff.TRACE_DIR is config.TRACE_DIR
    assert tracestore.PROJECT_FILE is knownhandoff.STORE_FILE
    assert tracestore.DSN_ENV is knownhandoff.TRACE_DSN_ENV
    assert events.HANDOFF_DIR is knownhandoff.HANDOFF_DIR is config.HANDOFF_DIR
    assert decide.IGNORE_FILE is knownhandoff.IGNORE_FILE is IGNORE
    assert DIRS == (knownhandoff.STATE_DIR, knownhandoff.HANDOFF_DIR)
    assert knownhandoff.TRACE_DIR == ".eidolons/.trace"  # what every existing project holds
    assert knownhandoff.STORE_FILE == ".eidolons/trace-store.json"
    assert knownhandoff.CONFIG_FILE == ".eidolons/config.toml"


@pytest.mark.parametrize(
    "tool",
    [
        {"tool_name": "TodoWrite", "tool_input": {"todos": []}},  # touches no file
        {"tool_name": "Read", "tool_input": {"file_path": "src.py"}},  # no hand-off
    ],
)
def test_the_hook_s_no_work_paths_import_no_more(tmp_path: Path, tool: dict[str, object]) -> None:
    (tmp_path / ".eidolons").mkdir()
    event = {"hook_event_name": "PreToolUse", "cwd": str(tmp_path), **tool}
    if tool["tool_name"] == "Read":
        event["tool_input"] = {"file_path": str(tmp_path / "src.py")}
    argv = [str(LAUNCHER), "hook", "claude-code", "--root", str(tmp_path)]
    names, code = imported(argv, tmp_path, json.dumps(event))
    assert code == 0
    ours = {n for n in names if n.startswith("eidolons")}
    # the key directories are found when first needed: no eidolons.keys module on these
    # paths; the state names' home is the only module added
    assert ours <= {
        "eidolons",
        "eidolons.cli",  # the packages' own __init__: a docstring each
        "eidolons.hosts",
        "eidolons.io",
        "eidolons.errors",
        "eidolons.ecl",  # the strict JSON reader the event is parsed by, and its limits
        "eidolons.ecl.grammar",
        "eidolons.cli.main",
        "eidolons.hosts.hook",
        "eidolons.hosts.hook.fast",
        "eidolons.hosts.hook.events",
        "eidolons.io.paths",
    }, sorted(ours)
    if tool["tool_name"] == "TodoWrite":
        assert "eidolons.keys.host" not in ours
