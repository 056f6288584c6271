"""Shared test helpers: a throw-away project, the CLI run as a real subprocess, and the
upstream conformance fixtures (read in place from ``../shared/ecl/conformance-fixtures``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("EIDOLONS_SHARED", REPO.parent / "shared"))
FIXTURES = SHARED / "ecl" / "conformance-fixtures"
FIXTURE_NAMES = [
    "conformant-handoff",
    "conformant-high-trust-v2.1",
    "conformant-ise-v2",
    "conformant-ise-v2.1",
    "high-trust-no-ise-v2.1",
    "high-trust-sha256-v2",
    "ise-missing-hierarchy",
    "ise-verification-invalid-v2.1",
    "missing-integrity",
    "over-budget-context",
    "undeclared-edge",
    "v1-on-v2-compat",
]
FIXTURE_HMAC_KEY = "ecl-test-key-2.1"

needs_fixtures = pytest.mark.skipif(
    not FIXTURES.is_dir(), reason=f"upstream conformance fixtures not found at {FIXTURES}"
)


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def clean_env(**extra: str | None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("EIDOLONS_", "ECL_")) and k != "NO_COLOR"
    }
    for key, value in extra.items():
        if value is not None:
            env[key] = value
    return env


def run_cli(
    *args: str | Path, cwd: Path, env: dict[str, str] | None = None, stdin: str | None = None
) -> Run:
    proc = subprocess.run(
        [sys.executable, "-m", "eidolons", *map(str, args)],
        cwd=cwd,
        env=env if env is not None else clean_env(),
        capture_output=True,
        text=True,
        input=stdin,
        timeout=60,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / ".eidolons").mkdir(parents=True)
    return root


@pytest.fixture
def cli(project: Path) -> Callable[..., Run]:
    def _run(*args: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> Run:
        return run_cli(*args, cwd=cwd or project, env=env)

    return _run


def read_trace(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def trace_files(root: Path) -> list[Path]:
    return sorted((root / ".eidolons" / ".trace").glob("*.jsonl"))


def emit_cmd(
    payload: str | Path,
    *extra: str | Path,
    sender: str = "atlas",
    to: str = "vigil",
    performative: str = "INFORM",
    kind: str = "scout-report",
    objective: str = "o",
) -> tuple[str | Path, ...]:
    """The arguments of ``eidolons emit PAYLOAD`` with the five required options, then
    ``extra``: ``cli(*emit_cmd(payload, "--hmac", sender="forge"), env=keyed)``."""
    return (
        "emit",
        payload,
        "--from",
        sender,
        "--to",
        to,
        "--performative",
        performative,
        "--kind",
        kind,
        "--objective",
        objective,
        *extra,
    )


def emit_payload(
    cli: Callable[..., Run],
    project: Path,
    name: str = "handoff/scout-report.md",
    body: str = "# Report\n\n## Decision target\nx\n",
    *extra: str,
    sender: str = "atlas@1.4.2",
    to: str = "vigil@1.9.0",
    performative: str = "PROPOSE",
    kind: str = "scout-report",
) -> tuple[Path, Path, dict[str, Any]]:
    payload = project / name
    payload.parent.mkdir(parents=True, exist_ok=True)
    payload.write_text(body, encoding="utf-8")
    r = cli(
        *emit_cmd(
            payload,
            "--json",
            *extra,
            sender=sender,
            to=to,
            performative=performative,
            kind=kind,
            objective="Hand the scout report over.",
        )
    )
    assert r.code == 0, r.err
    doc = r.json()
    return payload, Path(doc["envelope_path"]), doc["envelope"]
