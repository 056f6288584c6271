"""What ``eidolons verify-envelope ENV --block --json`` imports in a project without a
trust store (ADR 0022): none of the modules taken off its path
comes back. Subprocess, ``-X importtime``; not timed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import emit_payload
from tests.test_launcher import LAUNCHER, imported

#: each was on this path before, and costs start-up
OFF_THE_PATH = (
    "re",
    "argparse",
    "pathlib",
    "json",
    "typing",
    "dataclasses",
    "inspect",
    "hashlib",
    "_hashlib",
    "hmac",
    "shutil",
    "locale",
    "gettext",
    "importlib.resources",
    "decimal",
    "base64",
    "tempfile",
    "urllib.parse",
    "fnmatch",
    "collections.abc",
)


@pytest.mark.parametrize(
    "extra", [["--block", "--json"], ["--block"], ["--json", "--no-trace"], ["--mode", "warn"]]
)
def test_verify_envelope_imports_none_of_them(cli: object, project: Path, extra: list[str]) -> None:
    _, envelope, _ = emit_payload(cli, project)  # type: ignore[arg-type]
    argv = [str(LAUNCHER), "verify-envelope", str(envelope), *extra]
    # this host's own state (pins, heads) in a fresh directory: what the test sees is the
    # gate's path, not what an earlier run left in ~/.config
    names, code = imported(argv, project, XDG_CONFIG_HOME=str(project.parent / "config"))
    assert code == 0
    assert "eidolons.gates.orchestrator" in names  # the gate really ran
    assert sorted(set(OFF_THE_PATH) & names) == []


def test_a_tampered_payload_is_still_refused_on_the_light_path(cli: object, project: Path) -> None:
    payload, envelope, _ = emit_payload(cli, project)  # type: ignore[arg-type]
    payload.write_text(payload.read_text() + "tampered\n")
    argv = [str(LAUNCHER), "verify-envelope", str(envelope), "--block", "--json"]
    names, code = imported(argv, project, XDG_CONFIG_HOME=str(project.parent / "config"))
    assert code == 3
    assert not {"re", "pathlib", "json", "hashlib"} & names
    events = [
        json.loads(x)
        for f in (project / ".eidolons" / ".trace").glob("*.jsonl")
        for x in f.read_text().splitlines()
    ]
    assert [e["event"] for e in events if e.get("gate") == "orchestrator"] == ["verify_fail"]
