"""Fixtures for the host hooks: a project with one verified hand-off, the host's stdin
taken field for field from ``shared/hosts/claude-code-samples`` and the host facts, the
project's Claude Code sandbox settings, and the two answers of Claude Code's dialect that
carry JSON (a deny, a verified Read pointed at the gate's copy)."""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DISK_TMPDIR, Run, clean_env, emit_payload, run_cli
from tests.hosts.fake_anthropic import FakeAnthropic

# verbatim copies of shared/hosts/claude-code-samples (what a real Claude Code 2.1.328 sent)
SAMPLES = Path(__file__).parent / "samples"
PAYLOAD_TEXT = "# Scout report\n\n## Decision target\nWhere does install.sh race? SECRET-BYTES\n"
SECRET = "SECRET-BYTES"

#: a sandbox that seals the shell (ADR 0015): on, strict, the hand-off directory unreadable
SEALED: dict[str, Any] = {
    "enabled": True,
    "allowUnsandboxedCommands": False,
    "filesystem": {"denyRead": ["./.eidolons/handoffs"]},
}

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

            from eidolons.hosts.hook.fast import main

            out, err = io.StringIO(), io.StringIO()
            code = main([host, *extra], stdin=io.BytesIO(stdin), stdout=out, stderr=err)
            return Run(code, out.getvalue(), err.getvalue())
        text = stdin if isinstance(stdin, str) else json.dumps(stdin)
        return run_cli("hook", host, *extra, cwd=self.root, env=env or clean_env(), stdin=text)

    def seal(
        self, sandbox: dict[str, Any] | None = None, local: dict[str, Any] | None = None
    ) -> None:
        """Give the project a Claude Code sandbox (:func:`write_sandbox`; default: sealed)."""
        write_sandbox(self.root, SEALED if sandbox is None else sandbox, local)

    def move_into_handoff_dir(self) -> None:
        """Move payload and envelope into ``.eidolons/handoffs/`` (artifact.path is
        relative to the envelope, so the pair stays valid)."""
        target = self.root / ".eidolons" / "handoffs"
        target.mkdir(parents=True, exist_ok=True)
        self.payload = Path(shutil.move(self.payload, target / self.payload.name))
        self.envelope = Path(shutil.move(self.envelope, target / self.envelope.name))


def write_sandbox(
    root: Path, sandbox: dict[str, Any] | None, local: dict[str, Any] | None = None
) -> None:
    """``sandbox`` as the ``sandbox`` of ``root/.claude/settings.json`` (None: a settings
    file without one) and ``local`` as that of ``settings.local.json`` (None: no file)."""
    claude = root / ".claude"
    claude.mkdir(parents=True, exist_ok=True)
    shared = {} if sandbox is None else {"sandbox": sandbox}
    (claude / "settings.json").write_text(json.dumps(shared), encoding="utf-8")
    if local is not None:
        (claude / "settings.local.json").write_text(json.dumps({"sandbox": local}), "utf-8")


def claude_deny(r: Run) -> str:
    """The reason of a Claude Code deny, checked whole: exit 2, one line of JSON on stdout
    holding only the deny, and the same reason on stderr."""
    assert r.code == 2, r
    assert r.out.endswith("\n") and "\n" not in r.out[:-1], r
    doc = json.loads(r.out)
    reason = doc["hookSpecificOutput"]["permissionDecisionReason"]
    assert doc == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }
    assert r.err == reason + "\n"
    assert isinstance(reason, str)
    return reason


def verified_read(r: Run, root: Path, tool_input: dict[str, Any], data: bytes) -> list[str]:
    """A Claude Code Read the gate let through, checked whole: exit 0, nothing on stderr,
    the Read pointed (``updatedInput``) at the gate's copy under ``.eidolons/verified/``
    whose bytes are exactly ``data``, the rest of ``tool_input`` unchanged, and the last
    line of the context naming the copy. Returns the context's lines."""
    assert (r.code, r.err) == (0, ""), r
    assert r.out.endswith("\n") and "\n" not in r.out[:-1], r
    specific = json.loads(r.out)["hookSpecificOutput"]
    copy = specific["updatedInput"]["file_path"]
    ext = Path(tool_input["file_path"]).suffix
    digest = hashlib.sha256(data).hexdigest()
    assert Path(copy) == root.resolve() / ".eidolons" / "verified" / f"{digest}{ext}"
    assert Path(copy).read_bytes() == data
    assert specific == {
        "hookEventName": "PreToolUse",
        "permissionDecision": "allow",
        "updatedInput": {**tool_input, "file_path": copy},
        "additionalContext": specific["additionalContext"],
    }
    lines: list[str] = specific["additionalContext"].split("\n")
    assert lines[-1] == f"(the Read shows the gate's copy of the verified bytes, {copy})"
    return lines


@pytest.fixture
def handoff(cli: Callable[..., Run], project: Path) -> Handoff:
    payload, envelope, doc = emit_payload(cli, project, "handoff.md", PAYLOAD_TEXT)
    return Handoff(project, payload, envelope, doc)


@pytest.fixture
def sealed(handoff: Handoff) -> Handoff:
    """The hand-off project with a Claude Code sandbox that seals the shell."""
    handoff.seal()
    return handoff


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


@pytest.fixture(scope="session")
def disk_tmp() -> Iterator[Callable[[str], Path]]:
    """New directories for the real host's projects, on disk, not in the suite's tmpfs
    (the host's sandbox mounts a /dev of its own); removed at the end."""
    root = Path(tempfile.mkdtemp(prefix="eidolons-hosts-", dir=DISK_TMPDIR))

    def make(name: str) -> Path:
        path = root / name
        path.mkdir()
        return path

    yield make
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def fake() -> Iterator[FakeAnthropic]:
    server = FakeAnthropic().start()
    yield server
    server.stop()
