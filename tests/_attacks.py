"""The shared probes of the gates: a Claude Code ``PreToolUse`` Read event,
the real hook entry point run in-process on it, the payload index's host path, and the
one check that every gate refuses a payload (hook, early SKIP, ``verify-incoming``)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

from eidolons.io.project import rules_out
from tests.conftest import Run

Cli = Callable[..., Run]


def refused(r: Run) -> bool:
    return r.code == 3 and "REFUSE: UNVERIFIED" in r.err


def event(
    root: Path, tool: str, tool_input: dict[str, object], agent: str | None = "vigil"
) -> bytes:
    """A Claude Code ``PreToolUse`` event for ``tool`` by ``agent`` (None: the main agent)."""
    doc: dict[str, object] = {
        "session_id": "s",
        "transcript_path": str(root / "t.jsonl"),
        "cwd": str(root),
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_use_id": "toolu_1",
    }
    if agent is not None:
        doc.update(agent_id="ae03233dc7de3192d", agent_type=agent)
    return json.dumps(doc).encode()


def read_event(root: Path, path: Path, agent: str | None = "vigil") -> bytes:
    return event(root, "Read", {"file_path": str(path)}, agent)


def run_hook(root: Path, doc: bytes) -> tuple[int, str]:
    """The real hook entry point (what ``eidolons init`` registers), in-process, on the
    event ``doc``, in the host's environment (the test process's: the agent's variables
    never reach it)."""
    from eidolons.hosts.hook.fast import main

    err = io.StringIO()
    code = main(
        ["claude-code", "--root", str(root)],
        stdin=io.BytesIO(doc),
        stdout=io.StringIO(),
        stderr=err,
    )
    return code, err.getvalue()


def hook(root: Path, path: Path, agent: str | None = "vigil") -> tuple[int, str]:
    """The hook on a Read of ``path`` by ``agent``."""
    return run_hook(root, read_event(root, path, agent))


def denied(root: Path, path: Path) -> bool:
    """The hook denies a Read of ``path`` by a subagent and by the main agent."""
    return all(hook(root, path, agent)[0] == 2 for agent in ("vigil", None))


def host_index(root: Path) -> Path:
    from eidolons.io.payloadindex import index_path

    return Path(index_path(str(root)))


def assert_gated(cli: Cli, project: Path, payload: Path) -> None:
    """Every gate refuses the payload: the hook denies a Read by a subagent and by the
    main loop, the early SKIP's rule cannot rule it out, and ``verify-incoming`` refuses
    it UNVERIFIED (text and JSON)."""
    for agent in ("vigil", None):
        code, err = hook(project, payload, agent)
        assert code == 2, (agent, err)
    assert not rules_out(str(payload), str(project.resolve()))
    assert refused(cli("verify-incoming", payload, "--as", "vigil"))
    assert refused(cli("verify-incoming", payload, "--as", "vigil", "--json"))
