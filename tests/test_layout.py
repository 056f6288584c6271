"""The layout rules (ADR 0007): the pure core never reaches I/O, and no import cycle.

``eidolons.ecl`` takes bytes and objects and returns results. Every module it imports,
directly or through another ``eidolons`` module, at module level or inside a function,
or by an ``importlib`` string, is checked against a list of modules that open files,
sockets, databases or processes; a call to the builtin ``open`` is refused too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._imports import (
    PACKAGE,
    SRC,
    ModuleInfo,
    find_cycle,
    internal_edges,
    package_modules,
    parse_module,
)

CORE = f"{PACKAGE}.ecl"

#: Modules that do I/O (files, sockets, processes, databases, the terminal) or load code
#: and data from the disk. The core may import none of them, even lazily.
IO_MODULES = frozenset(
    {
        "asyncio",
        "ctypes",
        "fcntl",
        "ftplib",
        "glob",
        "http",
        "importlib.metadata",
        "importlib.resources",
        "io",
        "logging",
        "mcp",
        "mmap",
        "multiprocessing",
        "opentelemetry",
        "os",
        "pathlib",
        "psycopg",
        "pty",
        "select",
        "selectors",
        "shutil",
        "signal",
        "socket",
        "sqlite3",
        "ssl",
        "subprocess",
        "sys",
        "tempfile",
        "termios",
        "tty",
        "urllib",
    }
)

#: Modules outside the core that it may use: the exception tree, the escaping of
#: untrusted text (neither imports anything) and the package itself (``__version__``; its
#: lazy exports import by computed name only).
ALLOWED_OUTSIDE = frozenset({PACKAGE, f"{PACKAGE}.errors", f"{PACKAGE}._text"})


def is_io(name: str) -> bool:
    parts = name.split(".")
    return any(".".join(parts[: i + 1]) in IO_MODULES for i in range(len(parts)))


def purity_violations(modules: dict[str, ModuleInfo]) -> list[str]:
    """Every way a core module reaches an I/O module, as readable strings."""
    problems: list[str] = []
    todo = [name for name in modules if name == CORE or name.startswith(CORE + ".")]
    seen: set[str] = set()
    chain: dict[str, str] = {name: name for name in todo}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        info = modules[name]
        for line in info.opens:
            problems.append(f"{chain[name]}: calls open() (line {line})")
        if name == PACKAGE:
            continue  # the lazy-export table: imports by computed name, never at import
        for target in sorted(info.imports):
            if is_io(target):
                problems.append(f"{chain[name]} imports {target}")
        for target in sorted(internal_edges(modules, name)):
            in_core = target == CORE or target.startswith(CORE + ".")
            if not in_core and target not in ALLOWED_OUTSIDE:
                problems.append(f"{chain[name]} imports {target}, outside the core")
                continue
            chain.setdefault(target, f"{chain[name]} -> {target}")
            todo.append(target)
    return problems


def test_the_core_reaches_no_io_module() -> None:
    modules = package_modules()
    assert any(name.startswith(CORE + ".") for name in modules)
    assert purity_violations(modules) == []


@pytest.mark.parametrize(
    "source, found",
    [
        ("import os\n", "imports os"),
        ("def f():\n    from pathlib import Path\n", "imports pathlib"),
        ("import importlib\nm = importlib.import_module('sqlite3')\n", "imports sqlite3"),
        ("__import__('socket')\n", "imports socket"),
        ("from importlib import resources\n", "imports importlib.resources"),
        ("def f(p):\n    return open(p).read()\n", "calls open()"),
        ("from eidolons import trace\n", "imports eidolons.trace, outside the core"),
        ("from eidolons.gates.receiver import evaluate\n", "outside the core"),
    ],
)
def test_the_purity_check_catches_a_planted_import(source: str, found: str) -> None:
    modules = package_modules()
    name = f"{CORE}._planted"
    modules[name] = parse_module(name, SRC / PACKAGE / "ecl" / "_planted.py", source)
    problems = purity_violations(modules)
    assert any(found in p and p.startswith(name) for p in problems), problems


def test_type_checking_imports_do_not_count() -> None:
    source = "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from pathlib import Path\n"
    info = parse_module("x", Path("x.py"), source)
    assert "pathlib" not in info.imports


def test_no_import_cycle_in_the_package() -> None:
    assert find_cycle(package_modules()) is None


def test_the_cycle_check_finds_one_through_an_importlib_string() -> None:
    # only the planted modules: the package's own known cycle (xfail above) must not be
    # the one found first, whatever the visiting order
    modules: dict[str, Any] = {}
    a, b = f"{PACKAGE}._a", f"{PACKAGE}._b"
    modules[a] = parse_module(a, SRC / "a.py", f"def f():\n    import {b}\n")
    source_b = f"import importlib\nimportlib.import_module('{a}')\n"
    modules[b] = parse_module(b, SRC / "b.py", source_b)
    cycle = find_cycle(modules)
    assert cycle is not None and a in cycle and b in cycle


def test_gates_and_memory_never_import_each_other() -> None:
    """Memory is reached by callbacks (ADR 0011): the gates never import memory, and
    memory never imports the gates, in any spelling."""
    modules = package_modules()
    for name, info in modules.items():
        if name.startswith(f"{PACKAGE}.gates"):
            assert not [t for t in info.imports if t.startswith(f"{PACKAGE}.memory")], name
        if name.startswith(f"{PACKAGE}.memory"):
            assert not [t for t in info.imports if t.startswith(f"{PACKAGE}.gates")], name


def command_import_violations(modules: dict[str, ModuleInfo]) -> list[str]:
    """Every ``eidolons.commands`` module (command or private plumbing) that imports a
    command module other than itself: commands share only the ``commands/_*.py``
    plumbing and the library."""
    prefix = f"{PACKAGE}.commands."
    problems = []
    for name in sorted(modules):
        if not name.startswith(prefix):
            continue
        for target in sorted(internal_edges(modules, name)):
            if target.startswith(prefix) and not target[len(prefix) :].startswith("_"):
                problems.append(f"{name} imports {target}")
    return problems


def test_no_command_imports_another_command() -> None:
    """What two commands share lives in the plumbing (``commands/_*.py``: the CLI's
    helpers, never a command) or in the library; no module under ``eidolons.commands``
    imports a command module."""
    modules = package_modules()
    assert f"{PACKAGE}.commands._common" in modules
    assert command_import_violations(modules) == []


@pytest.mark.parametrize(
    "planted, source",
    [
        ("memory", "from eidolons.commands.contracts import run\n"),
        ("memory", "def f():\n    from eidolons.commands import trace\n"),
        ("memory", "import importlib\nimportlib.import_module('eidolons.commands.check')\n"),
        ("_trace_list", "from . import verify_incoming\n"),
    ],
)
def test_the_command_import_check_catches_a_planted_import(planted: str, source: str) -> None:
    modules = package_modules()
    name = f"{PACKAGE}.commands.{planted}"
    modules[name] = parse_module(name, SRC / PACKAGE / "commands" / f"{planted}.py", source)
    problems = command_import_violations(modules)
    assert len(problems) == 1 and problems[0].startswith(f"{name} imports "), problems


def test_the_command_import_check_allows_the_plumbing() -> None:
    modules = package_modules()
    name = f"{PACKAGE}.commands.memory"
    source = "from eidolons.commands._common import print_json\nfrom eidolons import config\n"
    modules[name] = parse_module(name, SRC / PACKAGE / "commands" / "memory.py", source)
    assert command_import_violations(modules) == []


def _parsers(parser: Any) -> Iterator[Any]:
    import argparse

    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _parsers(child)


def test_every_parser_is_the_one_parser_class() -> None:
    """One parser class with the usage exit code (issue 7 §7): the root, every command,
    every action; and no command module builds a bare ``argparse.ArgumentParser``."""
    from eidolons._cliparser import Parser
    from eidolons.cli import build_parser

    seen = list(_parsers(build_parser()))
    assert len(seen) > 20
    assert [p.prog for p in seen if type(p) is not Parser] == []
    for path in sorted((SRC / PACKAGE / "commands").glob("*.py")):
        assert "ArgumentParser(" not in path.read_text(encoding="utf-8"), path.name


@pytest.mark.parametrize(
    "argv", [["nope"], ["contracts", "list", "--bogus"], ["skill", "render", "--x"], ["trace"]]
)
def test_a_usage_error_at_any_level_exits_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from eidolons.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "usage: eidolons" in err and "Traceback" not in err
