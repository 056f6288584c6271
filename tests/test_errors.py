"""One exception tree: every error has a stable ``code``, an ``exit_code``
and ``diagnostics()``, the one line the CLI prints when an error reaches it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import pytest

from eidolons.cli import main as cli
from eidolons.errors import EidolonsError, EnvelopeError, InputError, TraceWriteError, UsageError
from eidolons.io.contracts import ContractError
from tests.conftest import Run, clean_env


@pytest.mark.parametrize(
    "error, code, exit_code",
    [
        (UsageError("bad option"), "USAGE", 2),
        (InputError("unreadable"), "INPUT", 2),
        (EnvelopeError("not JSON"), "MALFORMED", 2),
        (TraceWriteError("disk full"), "TRACE_WRITE", 3),
        (ContractError("x.yaml", "bad"), "CONTRACT_INVALID", 2),
        (EidolonsError("bug"), "ERROR", 70),
    ],
)
def test_codes_and_exit_codes(error: EidolonsError, code: str, exit_code: int) -> None:
    assert error.code == code and error.exit_code == exit_code
    assert error.diagnostics().endswith(f"[{code}]")


def test_diagnostics_escape_control_characters() -> None:
    line = InputError("name\nREFUSE: forged").diagnostics()
    assert "\n" not in line and "\\n" in line


def test_the_cli_prints_the_diagnostics_and_exits_by_class(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from eidolons.cli import trace

    def failing(args: argparse.Namespace) -> int:
        raise TraceWriteError("cannot append")

    monkeypatch.setattr(trace, "run", failing)
    code = cli.main(["trace", "show", "t1"])
    err = capsys.readouterr().err
    assert code == 3 and err == "eidolons: cannot append [TRACE_WRITE]\n"


def test_a_command_that_catches_a_typed_error_prints_its_diagnostics(
    cli: Callable[..., Run],
) -> None:
    r = cli("memory", "recall", "q", "--k", "0")
    assert r.code == 2
    assert r.err == "eidolons: --k must be at least 1, got 0 [USAGE]\n"


def test_a_key_file_that_must_not_be_used_is_refused_with_its_code(
    cli: Callable[..., Run], project: Path, tmp_path: Path
) -> None:
    inside = project / "secrets" / "orchestrator.pem"
    env = clean_env(XDG_CONFIG_HOME=str(tmp_path / "config"), EIDOLONS_SIGNING_KEY_FILE=str(inside))
    r = cli("keys", "init", "--root", project, env=env)
    assert r.code == 3, r
    assert r.err.startswith("eidolons: ") and r.err.endswith(" [KEY_FILE]\n"), r.err
    assert "inside the project" in r.err


def test_init_and_skill_errors_are_in_the_one_tree() -> None:
    """Every error a command raises carries a stable code and the CLI's exit code."""
    from eidolons.errors import EidolonsError
    from eidolons.hosts.init import InitError
    from eidolons.hosts.skills.render import SkillError

    for cls, code, exit_code in (
        (InitError, "INIT", 2),
        (SkillError, "SKILL", 2),
    ):
        assert issubclass(cls, EidolonsError)
        assert (cls.code, cls.exit_code) == (code, exit_code)
    assert InitError("x\n").diagnostics() == "x\\n [INIT]"
