"""A static import graph of the ``eidolons`` package, for the layout tests.

Every import counts, wherever it is written (module level or inside a function) and
however (``import``, ``from ... import``, relative, ``importlib.import_module("...")``
or ``__import__("...")`` with a literal name), except those under ``if TYPE_CHECKING:``,
which never run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "eidolons"


@dataclass
class ModuleInfo:
    name: str
    path: Path
    imports: set[str] = field(default_factory=set)  # dotted names as written (resolved)
    opens: list[int] = field(default_factory=list)  # lines calling the builtin open()
    #: ``imports`` and those under ``if TYPE_CHECKING:`` (a type-level edge is an edge of
    #: the design, if not of the running program)
    typed: set[str] = field(default_factory=set)


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST) -> Iterator[ast.AST]:
    """Like ast.walk, skipping ``if TYPE_CHECKING:`` bodies."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        for child in ast.iter_child_nodes(current):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                stack.extend(child.orelse)
                continue
            stack.append(child)


def parse_module(name: str, path: Path, source: str | None = None) -> ModuleInfo:
    text = path.read_text(encoding="utf-8") if source is None else source
    tree = ast.parse(text, str(path))
    info = ModuleInfo(name, path)
    _collect(info, name, path, _walk(tree))
    typed = ModuleInfo(name, path)
    _collect(typed, name, path, ast.walk(tree))
    info.typed = typed.imports
    return info


def _collect(info: ModuleInfo, name: str, path: Path, nodes: Iterator[ast.AST]) -> None:
    is_package = path.name == "__init__.py"
    for node in nodes:
        if isinstance(node, ast.Import):
            info.imports.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                if not is_package:
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            info.imports.add(module)
            # ``from eidolons.gates import receiver`` imports the module eidolons.gates.receiver
            info.imports.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call):
            func = node.func
            called = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else ""
            )
            if called in ("import_module", "__import__") and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    info.imports.add(arg.value)
            if isinstance(func, ast.Name) and func.id == "open":
                info.opens.append(node.lineno)


#: path -> ((mtime_ns, size), its parse): the layout tests parse the package many times
_PARSED: dict[Path, tuple[tuple[int, int], ModuleInfo]] = {}


def package_modules() -> dict[str, ModuleInfo]:
    """Every module of the package, parsed (a file is re-parsed when it changed); each call
    returns fresh ``ModuleInfo`` copies, so a test may change what it gets."""
    out: dict[str, ModuleInfo] = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        name = module_name(path)
        st = path.stat()
        stamp = (st.st_mtime_ns, st.st_size)
        hit = _PARSED.get(path)
        if hit is None or hit[0] != stamp:
            hit = (stamp, parse_module(name, path))
            _PARSED[path] = hit
        info = hit[1]
        out[name] = ModuleInfo(
            info.name, info.path, set(info.imports), list(info.opens), set(info.typed)
        )
    return out


def internal_edges(modules: dict[str, ModuleInfo], name: str, typed: bool = False) -> set[str]:
    """The package modules ``name`` imports (names that are not modules are dropped:
    ``from eidolons.trace.log import append_event`` adds ``eidolons.trace.log.append_event``)."""
    return {
        target
        for target in (modules[name].typed if typed else modules[name].imports)
        if target in modules and target != name and target != PACKAGE
    }


def unit_of(modules: dict[str, ModuleInfo], name: str) -> str:
    """A subpackage and its own modules are one unit (``eidolons.trace.store`` lazily
    loading its backends, which import its base types, is not a layering cycle); the
    top-level modules and ``eidolons.ecl``'s modules are units of their own."""
    parts = name.split(".")
    if len(parts) >= 3 and ".".join(parts[:2]) in modules and parts[1] != "ecl":
        return ".".join(parts[:2])
    return name


def find_cycle(modules: dict[str, ModuleInfo], typed: bool = False) -> list[str] | None:
    """One import cycle among the package's units (see :func:`unit_of`), or None. Every
    import counts: module level, inside functions, and ``importlib`` strings."""
    units: dict[str, set[str]] = {}
    for name in modules:
        edges = units.setdefault(unit_of(modules, name), set())
        edges.update(unit_of(modules, t) for t in internal_edges(modules, name, typed))
    for unit, edges in units.items():
        edges.discard(unit)
    return _find_cycle(units)


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    WHITE, GREY, BLACK = 0, 1, 2
    colour = dict.fromkeys(graph, WHITE)
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        colour[node] = GREY
        stack.append(node)
        for target in sorted(graph[node]):
            if colour[target] == GREY:
                return [*stack[stack.index(target) :], target]
            if colour[target] == WHITE:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        colour[node] = BLACK
        return None

    for name in sorted(graph):
        if colour[name] == WHITE:
            found = visit(name)
            if found:
                return found
    return None
