"""The hot commands' argv fast path (ADR 0022) reads exactly what the one argparse parser
reads: for every argv shape, either it declines (and the parser decides, help, errors and
exit codes included) or it gives the same arguments the parser gives, with no output."""

from __future__ import annotations

import contextlib
import io
import random
from pathlib import Path

import pytest

from eidolons.cli import main as cli
from eidolons.cli.common import Option, fast_parse

COMMANDS = cli.FAST_COMMANDS
VALUES = ("x.envelope.json", "", "-", "--", "-x", "-1", "a b", "--json", "warn", "block", "é")


def tokens(name: str) -> list[str]:
    options = cli._load(name).OPTIONS  # type: ignore[union-attr]
    out = [n for o in options if not o.positional for n in o.names]
    out += [n[:-1] for n in out if len(n) > 4]  # abbreviations argparse accepts
    out += [f"{n}=v" for n in out[:3]]
    return [*out, "-h", "--help", "--version", "--nope", "-V", *VALUES]


def full(argv: list[str]) -> tuple[object, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        result = cli.parse(argv, cli.build_parser(argv[0]))
    return result, out.getvalue(), err.getvalue()


def shapes(name: str, count: int, seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    words = tokens(name)
    simple = [
        [name, "x.envelope.json"],
        [name, "x.envelope.json", "--block", "--json"],
        [name, "--json", "x.envelope.json", "--as", "vigil"],
        [name, "r.md", "--as", "vigil", "--contracts", "a", "--contracts", "b"],
        [name, "r.md", "--as", "vigil", "--json", "--root", "/tmp"],
    ]
    options = cli._load(name).OPTIONS  # type: ignore[union-attr]
    out = list(simple)
    for _ in range(count):
        units: list[list[str]] = []
        for option in options:
            if option.positional:
                units.append([rng.choice(VALUES)])
            elif rng.random() < 0.5:
                flag = rng.choice(option.names)
                value = [] if option.action == "store_true" else [rng.choice(VALUES)]
                units.extend([[flag, *value]] * (1 + (rng.random() < 0.1)))
        for _ in range(rng.choice((0, 0, 0, 1, 2))):  # noise: unknown, abbreviated, -h...
            units.append([rng.choice(words)])
        rng.shuffle(units)
        out.append([name, *(word for unit in units for word in unit)])
    return out


@pytest.mark.parametrize("name", COMMANDS)
def test_fast_path_equals_the_parser_on_many_shapes(name: str) -> None:
    accepted = 0
    for argv in shapes(name, 2000, seed=len(name)):
        fast = cli.fast_args(argv)
        if fast is None:
            continue  # the parser decides, as it always did
        accepted += 1
        result, out, err = full(argv)
        assert not isinstance(result, int), (argv, err)
        assert (out, err) == ("", "")
        expected = {k: v for k, v in vars(result).items() if k != "_parsers"}
        assert vars(fast) == expected, argv
    assert accepted >= 20  # the fast path is really taken on the simple shapes


@pytest.mark.parametrize(
    "argv",
    [
        ["--jso"],  # abbreviation
        ["--mode=warn", "e"],
        ["e", "-h"],
        ["e", "--help"],
        ["e", "--mode"],  # missing value
        ["e", "--mode", "--json"],  # value that looks like an option
        ["e", "--mode", "a", "--mode", "b"],  # repeated: argparse's last-wins
        ["e", "f"],  # extra positional
        [],  # missing positional
        ["e", "--"],
        ["-", "--json"],
        ["e", "--nope"],
    ],
)
def test_unusual_shapes_go_to_the_parser(argv: list[str]) -> None:
    assert cli.fast_args(["verify-envelope", *argv]) is None


def test_required_option_missing_goes_to_the_parser() -> None:
    assert cli.fast_args(["verify-incoming", "r.md"]) is None
    assert cli.fast_args(["verify-incoming", "r.md", "--as", "vigil"]) is not None


def test_declaration_builds_the_same_help(capsys: pytest.CaptureFixture[str]) -> None:
    # the help a user sees comes from the declaration: every option and its help text
    for name in COMMANDS:
        result, out, _ = full([name, "--help"])
        assert result == 0
        module = cli._load(name)
        for option in module.OPTIONS:  # type: ignore[union-attr]
            for flag in option.names:
                assert flag in out or option.metavar in out
            if option.help:
                assert option.help.split()[0] in out


def test_append_default_is_not_shared() -> None:
    options = (Option("p"), Option("--c", action="append", default=[]))
    first = fast_parse(["a", "--c", "x"], options)
    second = fast_parse(["a"], options)
    assert first is not None and second is not None
    assert vars(first) == {"p": "a", "c": ["x"]}
    assert vars(second) == {"p": "a", "c": []}
    assert options[1].default == []


def test_bad_declarations_are_refused() -> None:
    with pytest.raises(ValueError):
        Option("--n", action="count")
    with pytest.raises(ValueError):
        Option("p", action="store_true")


def test_main_runs_a_fast_shape_like_the_parser(tmp_path: Path) -> None:
    # end to end: the same exit code and line whichever reader took the argv
    from tests.conftest import run_cli

    (tmp_path / ".eidolons").mkdir()
    fast = run_cli("verify-envelope", "missing.envelope.json", "--block", cwd=tmp_path)
    slow = run_cli("verify-envelope", "missing.envelope.json", "--bloc", cwd=tmp_path)
    assert (fast.code, fast.out, fast.err) == (slow.code, slow.out, slow.err)
    assert fast.code != 0
