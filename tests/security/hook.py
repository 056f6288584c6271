"""Attacks on ``eidolons hook claude-code`` by an agent in the pipeline.

Each test is an attack that once got through: the hook must deny it (exit 2). The shell
runs in Claude Code's sandbox, which keeps it out of the hand-offs, the keys and the gate's
state (ADR 0015); of a Bash command the hook judges a plain ``eidolons`` command, in a
project whose sandbox is sealed (else every Bash call is denied)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eidolons.io.paths import IGNORE_LINES
from tests.conftest import clean_env
from tests.hosts.conftest import (
    PAYLOAD_TEXT,
    Handoff,
    claude_deny,
    needs_samples,
    sample,
    verified_read,
)

pytestmark = needs_samples


def bash(handoff: Handoff, command: str, agent: str | None = "vigil") -> dict[str, object]:
    doc = sample("hook_stdin_bash_main", handoff.root)
    doc["tool_input"] = {"command": command, "description": "x"}
    if agent is not None:
        doc.update(agent_id="ae03233dc7de3192d", agent_type=agent)
    return doc


# --- the gate's own commands, run by an agent through Bash -------------------------------


@pytest.mark.parametrize(
    "command",
    [
        # a key of the agent's own becomes the orchestrator's: it can then sign any pass
        "eidolons keys rotate",
        "eidolons keys add /tmp/mine.pub --role orchestrator",
        "eidolons keys revoke 65ae0f68519e0dfb",
        "eidolons keys --root /tmp/elsewhere rotate",
        "eidolons keys unpin",  # then a deleted trust store downgrades the project
        "eidolons keys pin",
        "eidolons keys register",  # a scratch copy of the project would sign with the key
        "eidolons keys require-signature 'atlas->vigil' --off",
        "python3 -m eidolons keys init --role sender:atlas",
        "/usr/local/bin/eidolons keys --json rotate",
        # the hook wiring and the trust store are init's
        "eidolons init --undo",
        "eidolons init --hosts claude-code --force",
        # the shared trace store
        "eidolons trace store init",
        "eidolons trace import t1",
        # an MCP server the agent drives itself, unbound: any receiver it likes
        "eidolons mcp serve",
        "eidolons skill install --all",
    ],
)
@pytest.mark.parametrize("agent", ["vigil", None])
def test_no_agent_runs_the_gates_state_commands(
    sealed: Handoff, command: str, agent: str | None
) -> None:
    r = sealed.hook("claude-code", bash(sealed, command, agent))
    assert "writes the gate's state or the hook wiring" in claude_deny(r), command


@pytest.mark.parametrize("command", ["eidolons keys list", "eidolons keys show --json"])
def test_the_keys_read_only_actions_stay_allowed(sealed: Handoff, command: str) -> None:
    r = sealed.hook("claude-code", bash(sealed, command))
    assert (r.code, r.out, r.err) == (0, "", "")


@pytest.mark.parametrize(
    "command",
    [
        "eidolons verify-envelope handoff.envelope.json --block",
        "eidolons run --verify handoff.envelope.json -- true",
    ],
)
def test_a_subagent_does_not_run_the_orchestrator_gate(sealed: Handoff, command: str) -> None:
    # the gate process can read the orchestrator's key even when the agent cannot: a
    # subagent that rewrote a payload would get it signed
    r = sealed.hook("claude-code", bash(sealed, command))
    assert "is the orchestrator's gate; vigil does not run it" in claude_deny(r)


def test_a_subagent_runs_the_receiver_gate_only_as_itself(sealed: Handoff) -> None:
    sealed.verify()
    for flag in ("--as vigil", "--as=vigil@1.9.0"):
        command = f"eidolons verify-incoming handoff.md {flag} --print-payload"
        r = sealed.hook("claude-code", bash(sealed, command, agent="general-purpose"))
        assert "general-purpose runs `eidolons verify-incoming` only as itself" in claude_deny(r)
        ok = sealed.hook("claude-code", bash(sealed, command, agent="vigil"))
        assert (ok.code, ok.out, ok.err) == (0, "", ""), ok
    both = "eidolons verify-incoming handoff.md --as vigil --as forge"
    assert "not --as vigil forge" in claude_deny(sealed.hook("claude-code", bash(sealed, both)))


def test_the_main_loop_still_runs_the_orchestrator_gate(sealed: Handoff) -> None:
    for command in (
        "eidolons verify-envelope handoff.envelope.json",
        "eidolons keys list",
        "eidolons check .",
        "eidolons verify-incoming handoff.md --as vigil",
    ):
        r = sealed.hook("claude-code", bash(sealed, command, None))
        assert (r.code, r.out, r.err) == (0, "", ""), command


# --- the main loop's read, in a signed project ---------------------------------------------


def test_main_loop_read_needs_a_signed_pass_when_the_project_has_a_trust_store(
    handoff: Handoff, tmp_path: Path
) -> None:
    """With a trust store, an unsigned verify_pass (minted by running the gate without the
    key, or hand-written) is no evidence: not for a receiver, not for the main loop."""
    orchestrator = clean_env(XDG_CONFIG_HOME=str(tmp_path / "orchestrator-config"))
    assert handoff.cli("keys", "init", env=orchestrator).code == 0
    agent = clean_env(XDG_CONFIG_HOME=str(tmp_path / "agent-config"))
    minted = handoff.cli("verify-envelope", handoff.envelope, env=agent)
    assert "no signed receipt" in minted.err  # the pass on record is unsigned
    doc = sample("hook_stdin_read_main", handoff.root)
    r = handoff.hook("claude-code", doc, env=orchestrator)
    assert r.code == 2, r
    assert r.err.splitlines()[0] == "[orchestrator-verify-incoming] REFUSE: UNVERIFIED from atlas"
    # the orchestrator's own, signed, pass opens it
    assert handoff.cli("verify-envelope", handoff.envelope, env=orchestrator).code == 0
    ok = handoff.hook("claude-code", doc, env=orchestrator)
    verified_read(ok, handoff.root, doc["tool_input"], PAYLOAD_TEXT.encode())


# --- a hand-off read under another name --------------------------------------------------


def read(handoff: Handoff, path: Path, agent: str | None = "vigil") -> dict[str, object]:
    doc = sample("hook_stdin_read_main", handoff.root)
    doc["tool_input"] = {"file_path": str(path)}
    if agent is not None:
        doc.update(agent_id="ae03233dc7de3192d", agent_type=agent)
    return doc


@pytest.mark.parametrize("agent", ["vigil", None])
def test_a_hard_link_to_a_handoff_is_not_a_way_around_the_gate(
    handoff: Handoff, agent: str | None
) -> None:
    handoff.move_into_handoff_dir()
    link = handoff.root / "notes.txt"
    link.hardlink_to(handoff.payload)
    r = handoff.hook("claude-code", read(handoff, link, agent))
    assert r.code == 2, r
    assert "-verify-incoming] REFUSE: UNVERIFIED" in r.err.splitlines()[0]


@pytest.mark.parametrize("agent", ["vigil", None])
def test_a_hard_link_to_a_handoff_is_found_while_another_entry_vanishes(
    handoff: Handoff, monkeypatch: pytest.MonkeyPatch, agent: str | None
) -> None:
    """Another writer deletes a file of the hand-off directory while the hook scans it for
    the link's other name: the scan cannot rule the link out, so the Read goes to the gate
    (it stopped at the vanished entry and let the rest of the directory go unseen)."""
    import os

    handoff.move_into_handoff_dir()
    link = handoff.root / "notes.txt"
    link.hardlink_to(handoff.payload)
    decoy = handoff.payload.with_name("a-decoy.md")
    decoy.write_text("x\n")
    real_scandir = os.scandir

    class Vanishing:
        """The listing as it was, the decoy deleted once listed (first, then the rest)."""

        def __init__(self, path: str) -> None:
            with real_scandir(path) as it:
                self.entries = sorted(it, key=lambda e: e.name != decoy.name)
            decoy.unlink(missing_ok=True)

        def __enter__(self) -> Vanishing:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def __iter__(self) -> object:
            return iter(self.entries)

    monkeypatch.setattr(
        os, "scandir", lambda p: Vanishing(p) if p == str(decoy.parent) else real_scandir(p)
    )
    r = handoff.hook("claude-code", read(handoff, link, agent))
    assert r.code == 2, r
    assert "-verify-incoming] REFUSE: UNVERIFIED" in r.err.splitlines()[0]


def test_a_configured_handoff_dir_is_protected_when_the_envelope_is_deleted(
    handoff: Handoff,
) -> None:
    (handoff.root / ".eidolons" / "config.toml").write_text('[handoffs]\ndirs = ["inbox"]\n')
    inbox = handoff.root / "inbox"
    inbox.mkdir()
    payload = inbox / "report.md"
    payload.write_text("# rewritten, envelope deleted\n")
    for agent in ("vigil", None):
        r = handoff.hook("claude-code", read(handoff, payload, agent))
        assert r.code == 2, r
        assert "-verify-incoming] REFUSE: UNVERIFIED from unknown" in r.err.splitlines()[0]


def test_a_payload_the_trace_names_is_refused_when_its_envelope_is_deleted(
    handoff: Handoff,
) -> None:
    handoff.envelope.unlink()
    handoff.payload.write_text("# rewritten after the envelope was deleted\n")
    for agent in ("vigil", None):
        r = handoff.hook("claude-code", read(handoff, handoff.payload, agent))
        assert r.code == 2, r


# --- the hook wiring outside the project -----------------------------------------------------


@pytest.mark.parametrize(
    "rel",
    [
        ".claude/settings.json",  # {"disableAllHooks": true} turns the project's hook off
        ".claude/settings.local.json",
        ".claude.json",
        ".codex/hooks.json",
        ".cursor/hooks.json",
        ".gemini/settings.json",
    ],
)
@pytest.mark.parametrize("agent", ["vigil", None])
def test_no_agent_writes_the_users_hook_settings(
    handoff: Handoff, tmp_path: Path, rel: str, agent: str | None
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    doc = read(handoff, home / rel, agent)
    doc["tool_name"] = "Write"
    doc["tool_input"] = {"file_path": str(home / rel), "content": '{"disableAllHooks": true}'}
    r = handoff.hook("claude-code", doc, env=clean_env(HOME=str(home)))
    assert "hook wiring" in claude_deny(r)


# --- other tools -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tool_input",
    [
        {"path": "handoff.md"},
        {"paths": ["README.md", "sub/../handoff.md"]},
        {"request": {"file": "handoff.md", "encoding": "utf-8"}},
    ],
)
def test_an_mcp_file_server_given_a_relative_name_is_gated(
    handoff: Handoff, tool_input: dict[str, object]
) -> None:
    (handoff.root / "sub").mkdir()
    doc = read(handoff, handoff.payload)
    doc["tool_name"] = "mcp__filesystem__read_text_file"
    doc["tool_input"] = tool_input
    r = handoff.hook("claude-code", doc)
    assert r.code == 2, r
    assert r.err.splitlines()[0] == "[vigil-verify-incoming] REFUSE: UNVERIFIED from atlas"


def test_a_subagent_emits_only_as_itself(sealed: Handoff) -> None:
    base = "eidolons emit handoff.md --to vigil --performative PROPOSE --kind k --objective o"
    for spoof in ("--from atlas", "--from=atlas@1.4.2", ""):
        r = sealed.hook("claude-code", bash(sealed, f"{base} {spoof} --hmac --force", "forge"))
        assert "forge runs `eidolons emit` only as itself" in claude_deny(r), spoof
    ok = sealed.hook("claude-code", bash(sealed, f"{base} --from forge --force", "forge"))
    assert (ok.code, ok.out, ok.err) == (0, "", ""), ok


def test_no_agent_rewrites_the_hooks_own_code(handoff: Handoff) -> None:
    import site

    import eidolons

    targets = [
        Path(eidolons.__file__).parent / "hooks" / "decide.py",
        Path(site.getsitepackages()[0]) / "zz-allow-everything.pth",
    ]
    for target in targets:
        for agent in ("vigil", None):
            doc = read(handoff, target, agent)
            doc["tool_name"] = "Write"
            doc["tool_input"] = {"file_path": str(target), "content": "import os\n"}
            assert "hook wiring" in claude_deny(handoff.hook("claude-code", doc)), target
    assert not targets[1].exists()


@pytest.mark.parametrize(
    "tool_input",
    [
        {"paths": ["**/*.md"]},
        {"paths": ["."], "include": ["**/*.md"]},
        {"paths": [".eidolons/handoffs/*.md"]},
        {"paths": [".eidolons"]},
    ],
)
def test_gemini_read_many_files_with_a_glob_or_a_directory_is_gated(
    handoff: Handoff, tool_input: dict[str, object]
) -> None:
    handoff.move_into_handoff_dir()
    # Gemini CLI does not read ripgrep's .ignore: it hides nothing from read_many_files
    (handoff.root / ".eidolons" / ".ignore").write_text("\n".join(IGNORE_LINES) + "\n")
    doc = {
        "session_id": "s-1",
        "transcript_path": "/tmp/t.json",
        "cwd": str(handoff.root),
        "hook_event_name": "BeforeTool",
        "timestamp": "2026-12-01T09:00:00Z",
        "tool_name": "read_many_files",
        "tool_input": tool_input,
        "mcp_context": None,
    }
    r = handoff.hook("gemini", doc, "--as", "vigil")
    assert r.code == 2, r
    ok = handoff.hook("gemini", {**doc, "tool_input": {"paths": ["README.md"]}}, "--as", "vigil")
    assert ok.code == 0, ok


@pytest.mark.parametrize(
    "rel", [".claude/skills/x/SKILL.md", ".claude/commands/x.md", ".claude/hooks/gate.sh"]
)
@pytest.mark.parametrize("agent", ["vigil", None])
def test_no_agent_writes_a_skill_or_command_that_can_carry_hooks(
    handoff: Handoff, tmp_path: Path, rel: str, agent: str | None
) -> None:
    """A skill's `hooks:` run outside the sandbox once it is invoked, where the signing key
    can be read: writing one is writing the hook wiring."""
    home = tmp_path / "home"
    home.mkdir()
    for target in (handoff.root / rel, home / rel):
        doc = read(handoff, target, agent)
        doc["tool_name"] = "Write"
        doc["tool_input"] = {"file_path": str(target), "content": "---\nhooks: {}\n---\n"}
        r = handoff.hook("claude-code", doc, env=clean_env(HOME=str(home)))
        assert r.code == 2 and "hook wiring" in r.err, (target, r)


def test_a_contract_set_that_does_not_load_denies_every_handoff(handoff: Handoff) -> None:
    handoff.verify()
    doc = read(handoff, handoff.payload)
    tool_input = {"file_path": str(handoff.payload)}
    verified_read(handoff.hook("claude-code", doc), handoff.root, tool_input, PAYLOAD_TEXT.encode())
    contracts = handoff.root / ".eidolons" / "contracts"
    contracts.mkdir(parents=True, exist_ok=True)
    (contracts / "atlas-to-vigil.yaml").write_text("{not: [valid\n", encoding="utf-8")
    r = handoff.hook("claude-code", read(handoff, handoff.payload))
    assert r.code == 2, r
    assert "[vigil-verify-incoming] REFUSE: " in r.err.splitlines()[0]
