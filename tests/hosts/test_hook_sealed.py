"""On Claude Code a Bash call runs only while the project's sandbox seals the shell (ADR
0140): ``.claude/settings.json`` with ``.claude/settings.local.json``, merged as Claude Code
merges them, must enable the sandbox in strict mode (``allowUnsandboxedCommands: false``)
and keep every hand-off directory under a ``denyRead`` path that no ``allowRead`` path
re-opens. Otherwise every Bash call is denied, with the reason; while it is sealed the hook
leaves the shell to the sandbox (it masks the hand-offs) and judges only a plain
``eidolons`` command."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import run_cli
from tests.hosts.conftest import (
    SEALED,
    Handoff,
    claude_deny,
    needs_samples,
    sample,
    write_sandbox,
)

pytestmark = needs_samples

REFUSED = "eidolons hook: Bash is refused in this project: "
ADVICE = (
    " (the sandbox is what keeps a shell out of the hand-offs; run "
    "`eidolons init --hosts claude-code`, then `eidolons doctor`)"
)
NOT_ENABLED = "the Claude Code sandbox is not enabled (sandbox.enabled)"
UNSANDBOXED = "the sandbox lets a command run outside it (sandbox.allowUnsandboxedCommands)"


def bash(handoff: Handoff, command: str, agent: str | None = "vigil") -> dict[str, object]:
    doc = sample("hook_stdin_bash_main", handoff.root)
    doc["tool_input"] = {"command": command, "description": "x"}
    if agent is not None:
        doc.update(agent_id="ae03233dc7de3192d", agent_type=agent)
    return doc


def with_fs(**filesystem: list[str]) -> dict[str, Any]:
    return {**SEALED, "filesystem": filesystem}


def handoffs(handoff: Handoff) -> str:
    return str(handoff.root.resolve() / ".eidolons" / "handoffs")


HIDDEN = "the sandbox does not hide {handoffs} from the shell (denyRead)"
REOPENED = "an allowRead path re-opens {handoffs} to the shell"
# (the shared file's sandbox, the local file's, the problem named); None: a shared file
# without a sandbox, no local file
UNSEALED: dict[str, tuple[dict[str, Any] | None, dict[str, Any] | None, str]] = {
    "no-sandbox-settings": (None, None, NOT_ENABLED),
    "disabled": ({**SEALED, "enabled": False}, None, NOT_ENABLED),
    "enabled-as-a-string": ({**SEALED, "enabled": "true"}, None, NOT_ENABLED),
    "unsandboxed-commands-allowed": (
        {**SEALED, "allowUnsandboxedCommands": True},
        None,
        UNSANDBOXED,
    ),
    "unsandboxed-commands-unsaid": (
        {k: v for k, v in SEALED.items() if k != "allowUnsandboxedCommands"},
        None,
        UNSANDBOXED,
    ),
    "no-deny-read": (with_fs(), None, HIDDEN),
    # a name that only begins like the hand-off directory hides nothing of it
    "deny-read-of-other-directories": (
        with_fs(denyRead=["./.eidolons/memory", "./.eidolons/handoffs-old"]),
        None,
        HIDDEN,
    ),
    "allow-read-of-a-subdirectory": (
        with_fs(denyRead=["./.eidolons/handoffs"], allowRead=["./.eidolons/handoffs/inbox"]),
        None,
        REOPENED,
    ),
    "allow-read-of-the-project": (
        with_fs(denyRead=["./.eidolons/handoffs"], allowRead=["."]),
        None,
        REOPENED,
    ),
    "local-settings-disable-it": (SEALED, {"enabled": False}, NOT_ENABLED),
    "local-settings-allow-unsandboxed": (SEALED, {"allowUnsandboxedCommands": True}, UNSANDBOXED),
    "local-settings-re-open-it": (SEALED, {"filesystem": {"allowRead": ["./.eidolons"]}}, REOPENED),
}


@pytest.mark.parametrize("agent", ["vigil", None])
@pytest.mark.parametrize("case", sorted(UNSEALED))
def test_bash_is_denied_while_the_sandbox_does_not_seal_the_shell(
    handoff: Handoff, case: str, agent: str | None
) -> None:
    shared, local, problem = UNSEALED[case]
    write_sandbox(handoff.root, shared, local)
    r = handoff.hook("claude-code", bash(handoff, "ls", agent))
    assert claude_deny(r) == REFUSED + problem.format(handoffs=handoffs(handoff)) + ADVICE


@pytest.mark.parametrize("agent", ["vigil", None])
def test_bash_is_denied_in_a_project_without_claude_settings(
    handoff: Handoff, agent: str | None
) -> None:
    assert not (handoff.root / ".claude").exists()
    r = handoff.hook("claude-code", bash(handoff, "ls", agent))
    assert claude_deny(r) == REFUSED + NOT_ENABLED + ADVICE


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{not json", ".claude/settings.json cannot be read (JSONDecodeError)"),
        ("[]", ".claude/settings.json is not a JSON object"),
    ],
)
def test_bash_is_denied_when_the_settings_cannot_be_read(
    handoff: Handoff, text: str, problem: str
) -> None:
    handoff.seal()
    (handoff.root / ".claude" / "settings.json").write_text(text)
    assert (
        claude_deny(handoff.hook("claude-code", bash(handoff, "ls"))) == REFUSED + problem + ADVICE
    )


@pytest.mark.parametrize(
    "deny_read",
    [
        ["./.eidolons/handoffs"],
        ["./.eidolons/handoffs/**"],
        ["./.eidolons"],
        [".eidolons/handoffs/"],
        ["{root}/.eidolons/handoffs"],
    ],
)
@pytest.mark.parametrize("agent", ["vigil", None])
def test_a_sealed_sandbox_leaves_the_shell_to_the_sandbox(
    handoff: Handoff, deny_read: list[str], agent: str | None
) -> None:
    """The hook allows what it no longer reads: the sandbox masks the hand-off directory
    from this very command (a tampered hand-off there is the sandbox's to hide)."""
    handoff.move_into_handoff_dir()
    handoff.payload.write_text("rewritten in transit\n")
    handoff.seal(with_fs(denyRead=[d.format(root=handoff.root) for d in deny_read]))
    for command in ("cat .eidolons/handoffs/handoff.md", "grep -r race .", "ls -R ."):
        r = handoff.hook("claude-code", bash(handoff, command, agent))
        assert (r.code, r.out, r.err) == (0, "", ""), command


def test_the_local_settings_add_to_the_shared_deny_read(handoff: Handoff) -> None:
    """A configured hand-off directory is sealed too: the shared settings hide
    ``.eidolons/handoffs``, the local ones ``inbox``; both lists count."""
    (handoff.root / ".eidolons" / "config.toml").write_text('[handoffs]\ndirs = ["inbox"]\n')
    (handoff.root / "inbox").mkdir()
    handoff.seal()
    inbox = handoff.root.resolve() / "inbox"
    r = handoff.hook("claude-code", bash(handoff, "ls"))
    assert (
        claude_deny(r)
        == f"{REFUSED}the sandbox does not hide {inbox} from the shell (denyRead){ADVICE}"
    )
    handoff.seal(SEALED, {"filesystem": {"denyRead": ["./inbox"]}})
    r = handoff.hook("claude-code", bash(handoff, "ls"))
    assert (r.code, r.out, r.err) == (0, "", "")


def test_the_sandbox_eidolons_init_writes_seals_the_shell(handoff: Handoff) -> None:
    """What ``init`` writes and what the hook asks of it are the same rule: Bash runs in
    a project set up by ``eidolons init --hosts claude-code`` and nothing else."""
    from eidolons.hosts.hook.events import Layout
    from eidolons.hosts.wiring import sandbox_problems

    root = handoff.root
    assert claude_deny(handoff.hook("claude-code", bash(handoff, "ls"))).startswith(REFUSED)
    r = run_cli("init", "--hosts", "claude-code", cwd=root)
    assert r.code == 0, r.err
    assert sandbox_problems(str(root.resolve()), Layout(str(root)).handoff_dirs) == []
    for agent in ("vigil", None):
        r = handoff.hook("claude-code", bash(handoff, "ls", agent))
        assert (r.code, r.out, r.err) == (0, "", ""), agent
