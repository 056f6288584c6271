"""The layout rules (ADR 0001): the pure core never reaches I/O, and no import cycle.

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
        ("from eidolons.trace import log\n", "imports eidolons.trace.log, outside the core"),
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
    assert find_cycle(package_modules(), typed=True) is None  # type-only imports too


#: The packages, lowest first: a module imports only from its own layer or a lower one
#: (type-only imports included). ``errors`` and ``_text`` sit below them all; the package
#: root (the library API, lazy) and ``__main__`` above.
LAYERS = ("ecl", "io", "keys", "trace", "memory", "gates", "hosts", "cli")
LOOSE = {"errors", "_text"}
ENTRY = {PACKAGE, f"{PACKAGE}.__main__"}


def layer_of(name: str) -> int:
    if name in ENTRY:
        return len(LAYERS)
    part = name.split(".")[1]
    return -1 if part in LOOSE else LAYERS.index(part)


def upward_imports(modules: dict[str, ModuleInfo]) -> list[str]:
    return [
        f"{name} imports {target}"
        for name in sorted(modules)
        for target in sorted(internal_edges(modules, name, typed=True))
        if layer_of(target) > layer_of(name)
    ]


def test_the_top_holds_only_the_packages_and_two_loose_modules() -> None:
    top = {p.stem for p in (SRC / PACKAGE).glob("*.py")} - {"__init__", "__main__"}
    packages = {p.parent.name for p in (SRC / PACKAGE).glob("*/__init__.py")}
    assert top == LOOSE
    assert packages == set(LAYERS)


def test_no_import_goes_up_the_layers() -> None:
    modules = package_modules()
    assert all(layer_of(name) is not None for name in modules)
    assert upward_imports(modules) == []


@pytest.mark.parametrize(
    "module, source",
    [
        ("io.config", "from eidolons.trace.store import open_store\n"),
        ("errors", "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from eidolons.gates import x\n"),
        ("hosts.init", "def f():\n    from eidolons.cli.main import main\n"),
    ],
)
def test_the_layer_check_catches_a_planted_import(module: str, source: str) -> None:
    modules = package_modules()
    name = f"{PACKAGE}.{module}"
    modules[name] = parse_module(name, SRC / PACKAGE / "x.py", source)
    problems = upward_imports(modules)
    assert len(problems) == 1 and problems[0].startswith(f"{name} imports "), problems


def test_nothing_but_the_entry_points_imports_the_hosts_or_the_cli() -> None:
    modules = package_modules()
    for name in sorted(modules):
        for target in internal_edges(modules, name, typed=True):
            if target.startswith((f"{PACKAGE}.hosts", f"{PACKAGE}.cli")):
                assert name in ENTRY or name.startswith((f"{PACKAGE}.hosts", f"{PACKAGE}.cli")), (
                    f"{name} imports {target}"
                )


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
    """Memory is reached by callbacks (ADR 0021): the gates never import memory, and
    memory never imports the gates, in any spelling."""
    modules = package_modules()
    for name, info in modules.items():
        if name.startswith(f"{PACKAGE}.gates"):
            assert not [t for t in info.imports if t.startswith(f"{PACKAGE}.memory")], name
        if name.startswith(f"{PACKAGE}.memory"):
            assert not [t for t in info.imports if t.startswith(f"{PACKAGE}.gates")], name


def path_resolutions(source: str) -> list[int]:
    """The lines of ``source`` that resolve a path themselves: ``os.path.realpath(...)`` or a
    bare ``.resolve()`` (``pathlib`` resolves through ``os.path.realpath``)."""
    import ast

    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            func = node.func
            bare_resolve = func.attr == "resolve" and not node.args and not node.keywords
            on_os_path = isinstance(func.value, ast.Attribute) and func.value.attr == "path"
            if bare_resolve or (func.attr == "realpath" and on_os_path):
                lines.append(node.lineno)
    return lines


def test_every_path_is_resolved_through_the_one_resolver() -> None:
    """``os.path.realpath`` raises before Python 3.13 when a link is swapped between its
    ``lstat`` and its ``readlink`` (CPython gh-97566): an agent swapping links in the
    project would turn a refusal into an internal error. ``eidolons.io.paths.realpath``
    resolves again; no other module resolves a path itself."""
    package = SRC / "eidolons"
    found = {
        str(path.relative_to(package)): lines
        for path in sorted(package.rglob("*.py"))
        if path != package / "io" / "paths.py"
        and (lines := path_resolutions(path.read_text(encoding="utf-8")))
    }
    assert found == {}


@pytest.mark.parametrize(
    "source", ["os.path.realpath(p)\n", "Path(p).resolve()\n", "x = q.resolve()\n"]
)
def test_the_resolver_check_catches_a_planted_resolution(source: str) -> None:
    assert path_resolutions(source) == [1]
    assert path_resolutions("paths.realpath(p)\nstore.resolve(name)\n") == []


def _commands() -> set[str]:
    from eidolons.cli.main import COMMANDS

    return {f"{PACKAGE}.cli.{module}" for module in COMMANDS.values()}


def command_import_violations(
    modules: dict[str, ModuleInfo], commands: set[str] | None = None
) -> list[str]:
    """Every ``eidolons.cli`` module that imports a command module other than itself:
    commands share only the CLI's plumbing (``main``, ``common``, ``parser``,
    the ``trace`` command's parts) and the library."""
    commands = _commands() if commands is None else commands
    problems = []
    for name in sorted(modules):
        if not name.startswith(f"{PACKAGE}.cli."):
            continue
        for target in sorted(internal_edges(modules, name)):
            if target in commands and target != name:
                problems.append(f"{name} imports {target}")
    return problems


def test_no_command_imports_another_command() -> None:
    modules = package_modules()
    assert f"{PACKAGE}.cli.common" in modules and f"{PACKAGE}.cli.check" in _commands()
    assert command_import_violations(modules) == []


@pytest.mark.parametrize(
    "planted, source",
    [
        ("memory", "from eidolons.cli.contracts import run\n"),
        ("memory", "def f():\n    from eidolons.cli import trace\n"),
        ("memory", "import importlib\nimportlib.import_module('eidolons.cli.check')\n"),
        ("trace_list", "from . import verify_incoming\n"),
    ],
)
def test_the_command_import_check_catches_a_planted_import(planted: str, source: str) -> None:
    modules = package_modules()
    name = f"{PACKAGE}.cli.{planted}"
    modules[name] = parse_module(name, SRC / PACKAGE / "cli" / f"{planted}.py", source)
    problems = command_import_violations(modules)
    assert len(problems) == 1 and problems[0].startswith(f"{name} imports "), problems


def test_the_command_import_check_allows_the_plumbing() -> None:
    modules = package_modules()
    name = f"{PACKAGE}.cli.memory"
    source = "from eidolons.cli.common import print_json\nfrom eidolons.io import config\n"
    modules[name] = parse_module(name, SRC / PACKAGE / "cli" / "memory.py", source)
    assert command_import_violations(modules) == []


def _parsers(parser: Any) -> Iterator[Any]:
    import argparse

    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _parsers(child)


def test_every_parser_is_the_one_parser_class() -> None:
    """One parser class with the usage exit code: the root, every command,
    every action; and no command module builds a bare ``argparse.ArgumentParser``."""
    from eidolons.cli.main import build_parser
    from eidolons.cli.parser import Parser

    seen = list(_parsers(build_parser()))
    assert len(seen) > 20
    assert [p.prog for p in seen if type(p) is not Parser] == []
    for path in sorted((SRC / PACKAGE / "cli").glob("*.py")):
        assert "ArgumentParser(" not in path.read_text(encoding="utf-8"), path.name


@pytest.mark.parametrize(
    "argv",
    [["nope"], ["contracts", "list", "--bogus"], ["skill", "render", "--x"], ["trace", "shw"]],
)
def test_a_usage_error_at_any_level_exits_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from eidolons.cli.main import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "usage: eidolons" in err and "Traceback" not in err
