"""The documented public API is importable from the package root and works on bytes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import eidolons


def test_all_matches_the_lazy_table() -> None:
    assert set(eidolons.__all__) == {"__version__", *eidolons._EXPORTS}


def test_every_export_resolves() -> None:
    for name in eidolons.__all__:
        assert getattr(eidolons, name) is not None, name
    with pytest.raises(AttributeError):
        _ = eidolons.no_such_thing


def test_library_round_trip(tmp_path: Path) -> None:
    (tmp_path / ".eidolons").mkdir()
    payload = tmp_path / "r.md"
    payload.write_bytes(b"# report\n")
    result = eidolons.emit_envelope(
        payload,
        sender=eidolons.AgentRef("atlas", "1.0.0"),
        recipient=eidolons.AgentRef("vigil", "n/a"),
        performative="INFORM",
        kind="scout-report",
        objective="o",
        root=tmp_path,
    )
    env = eidolons.parse_envelope(result.envelope_path.read_bytes())
    assert env.integrity_value == eidolons.digest_bytes(b"# report\n", "sha256").value
    check = eidolons.verify_envelope_file(result.envelope_path, root=tmp_path)
    assert check and check.verdict is eidolons.Verdict.PASS
    payload.write_bytes(b"# rewritten\n")
    assert not eidolons.verify_envelope_file(result.envelope_path, root=tmp_path)
    trace = eidolons.thread_trace_path(tmp_path, env.thread_id)
    eidolons.append_event(trace, {"event": "note"})
    assert [ln.event["event"] for ln in eidolons.read_events(trace) if ln.event] == ["emit", "note"]
    with pytest.raises(eidolons.EnvelopeError):
        eidolons.parse_envelope(json.dumps({"a": 1}).encode())


def test_import_is_cheap() -> None:
    """``import eidolons`` must not drag the gates, yaml or jsonschema onto the CLI path."""
    heavy = ("yaml", "jsonschema", "dataclasses", "eidolons.ecl.envelope")
    code = f"import sys, eidolons; print(','.join(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-S", "-c", f"import sys; sys.path[:0] = {sys.path!r}; {code}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out == ""
