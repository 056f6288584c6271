"""The host adapters open no file themselves: their reads and writes go through
:mod:`eidolons.io` (``io.files``), where the atomic write and the bounded reads live."""

from __future__ import annotations

import ast
from pathlib import Path

import eidolons.hosts

HOSTS = Path(eidolons.hosts.__file__).parent

#: calls that open, read, write or replace a file
OPENERS = frozenset(
    {
        "open",
        "fdopen",
        "read_text",
        "write_text",
        "read_bytes",
        "write_bytes",
        "mkstemp",
        "replace",
        "rename",
    }
)
#: the io functions of those names are what the adapters call instead
ALLOWED = frozenset({"read_text", "write_text"})


def _opening_calls(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "open":
            found.append((node.lineno, "open"))
        elif isinstance(func, ast.Attribute) and func.attr in OPENERS:
            owner = func.value
            # str.replace on a text is not os.replace
            if func.attr == "replace" and not (isinstance(owner, ast.Name) and owner.id == "os"):
                continue
            found.append((node.lineno, func.attr))
        elif isinstance(func, ast.Name) and func.id in OPENERS - ALLOWED - {"replace"}:
            found.append((node.lineno, func.id))
    return found


def test_no_host_adapter_opens_a_file_itself() -> None:
    offenders = [
        f"{path.relative_to(HOSTS)}:{line}: {name}"
        for path in sorted(HOSTS.rglob("*.py"))
        for line, name in _opening_calls(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert offenders == []


def test_the_check_sees_a_direct_read() -> None:
    tree = ast.parse("p.read_text()\nopen(x)\nos.replace(a, b)\ntext.replace('a', 'b')\n")
    assert [name for _, name in _opening_calls(tree)] == ["read_text", "open", "replace"]
