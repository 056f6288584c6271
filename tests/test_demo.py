"""The demo shows the product: the receiver passing, refusing a rewritten
payload with the exact REFUSE line and reason, a high-trust HMAC hop, the trace; the
path it prints exists, or it says it was removed; a bad --keep DIR is a usage error."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import run_cli


def test_demo_shows_the_receiver_gate(tmp_path: Path) -> None:
    r = run_cli("demo", cwd=tmp_path)
    assert r.code == 0, r.err
    out = r.out
    assert "[vigil-verify-incoming] PASS: scout-report from atlas" in out
    assert (
        "[vigil-verify-incoming] REFUSE: INTEGRITY_MISMATCH from atlas\n"
        "[vigil-verify-incoming] reason: [tamper] payload SHA-256 does not match integrity tag\n"
    ) in out
    assert "hmac-sha256" in out and "[vigil-verify-incoming] PASS: change-summary from apivr" in out
    assert "evidence: signed-receipt+hmac" in out  # the demo's own key, in a scratch host
    assert "gate=receiver INTEGRITY_MISMATCH (refused)" in out  # the trace
    removed = re.search(r"the demo project (\S+) has been removed", out)
    assert removed is not None and not Path(removed.group(1)).exists()


def test_demo_keep_prints_a_path_that_exists(tmp_path: Path) -> None:
    r = run_cli("demo", "--keep", tmp_path / "kept", cwd=tmp_path)
    assert r.code == 0, r.err
    shown = re.search(r"demo project: (\S+) \(kept\)", r.out)
    assert shown is not None and Path(shown.group(1)).is_dir()
    assert (
        Path(shown.group(1)) / ".eidolons" / "handoffs" / "scout-report.envelope.json"
    ).is_file()


def test_demo_keep_bad_dir_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    for bad in (tmp_path / "file", tmp_path / "file" / "sub"):
        r = run_cli("demo", "--keep", bad, cwd=tmp_path)
        assert r.code == 2 and r.err.startswith("eidolons: --keep ") and r.err.count("\n") == 1
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    r = run_cli("demo", "--keep", tmp_path / "full", cwd=tmp_path)
    assert r.code == 2 and "not empty" in r.err
