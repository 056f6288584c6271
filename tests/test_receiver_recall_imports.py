"""A recall shown by ``verify-incoming`` loads no ``re`` and no ``math`` (ADR 0022): the
memory's patterns are compiled only where a plain scan cannot answer."""

from __future__ import annotations

import json
from pathlib import Path

from tests.test_receiver_skip import launch, traced  # noqa: F401  (traced: a fixture)


def test_a_recall_shown_or_printed_imports_no_re(traced: Path) -> None:  # noqa: F811
    payload = str(traced / "handoff" / "scout-report.md")
    first, _ = launch(traced, payload, "--as", "vigil")  # the first reception stores it
    assert first.code == 0 and "PASS" in first.err, first.err
    shown, modules = launch(traced, payload, "--as", "vigil", "--show-recall")
    assert shown.code == 0 and "recall (local): 1 record\n" in shown.err, shown.err
    assert "eidolons.memory.local" in modules
    assert sorted({"re", "math"} & modules) == []
    printed, modules = launch(traced, payload, "--as", "vigil", "--json")
    assert printed.code == 0, printed.err
    assert len(json.loads(printed.out)["recall"]["records"]) == 1
    assert sorted({"re", "math"} & modules) == []
