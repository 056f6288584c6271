"""Fixtures for the host hooks: a project with one verified hand-off, and the host's stdin
taken field for field from ``shared/hosts/claude-code-samples`` and the host facts."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Run, clean_env, emit_payload, run_cli

# verbatim copies of shared/hosts/claude-code-samples (what a real Claude Code 2.1.328 sent)
SAMPLES = Path(__file__).parent / "samples"
PAYLOAD_TEXT = "# Scout report\n\n## Decision target\nWhere does install.sh race? SECRET-BYTES\n"
SECRET = "SECRET-BYTES"

needs_samples = pytest.mark.skipif(
    not SAMPLES.is_dir(), reason=f"Claude Code hook samples not found at {SAMPLES}"
)


class Handoff:
    """A project with one hand-off ``handoff.md`` (atlas -> vigil) as in the samples."""

    def __init__(self, root: Path, payload: Path, envelope: Path, doc: dict[str, Any]) -> None:
        self.root = root
        self.payload = payload
        self.envelope = envelope
        self.doc = doc

    def cli(self, *args: str | Path, env: dict[str, str] | None = None) -> Run:
        return run_cli(*args, cwd=self.root, env=env)

    def verify(self) -> None:
        r = self.cli("verify-envelope", self.envelope, "--block")
        assert r.code == 0, r.err

    def hook(
        self,
        host: str,
        stdin: dict[str, Any] | str | bytes,
        *extra: str,
        env: dict[str, str] | None = None,
    ) -> Run:
        if isinstance(stdin, bytes):  # exact bytes: straight to the hook's entry point
            import io

            from eidolons.hooks.fast import main

            out, err = io.StringIO(), io.StringIO()
            code = main([host, *extra], stdin=io.BytesIO(stdin), stdout=out, stderr=err)
            return Run(code, out.getvalue(), err.getvalue())
        text = stdin if isinstance(stdin, str) else json.dumps(stdin)
        return run_cli("hook", host, *extra, cwd=self.root, env=env or clean_env(), stdin=text)

    def move_into_handoff_dir(self) -> None:
        """Move payload and envelope into ``.eidolons/handoffs/`` (artifact.path is
        relative to the envelope, so the pair stays valid)."""
        target = self.root / ".eidolons" / "handoffs"
        target.mkdir(parents=True, exist_ok=True)
        self.payload = Path(shutil.move(self.payload, target / self.payload.name))
        self.envelope = Path(shutil.move(self.envelope, target / self.envelope.name))


@pytest.fixture
def handoff(cli: Callable[..., Run], project: Path) -> Handoff:
    payload, envelope, doc = emit_payload(cli, project, "handoff.md", PAYLOAD_TEXT)
    return Handoff(project, payload, envelope, doc)


def sample(name: str, project: Path, **changes: Any) -> dict[str, Any]:
    """A recorded Claude Code stdin with its placeholders filled in; ``changes`` replace
    top-level fields (``None`` deletes one)."""
    text = (SAMPLES / f"{name}.json").read_text(encoding="utf-8")
    text = text.replace("<PROJECT_SLUG>", "-proj").replace("<HOME>", str(project.parent))
    doc: dict[str, Any] = json.loads(text.replace("<PROJECT>", str(project)))
    for key, value in changes.items():
        if value is None:
            doc.pop(key, None)
        else:
            doc[key] = value
    return doc
