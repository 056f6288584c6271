"""One exception tree (issue 7 §7): every error has a stable ``code``, an ``exit_code``
and ``diagnostics()``, the one line the CLI prints when an error reaches it."""

from __future__ import annotations

import argparse

import pytest

from eidolons import cli
from eidolons.contract import ContractError
from eidolons.errors import EidolonsError, EnvelopeError, InputError, TraceWriteError, UsageError


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
    from eidolons.commands import trace

    def failing(args: argparse.Namespace) -> int:
        raise TraceWriteError("cannot append")

    monkeypatch.setattr(trace, "run", failing)
    code = cli.main(["trace", "show", "t1"])
    err = capsys.readouterr().err
    assert code == 3 and err == "eidolons: cannot append [TRACE_WRITE]\n"
