"""The real Claude Code host for the end-to-end tests: a project set up by ``eidolons
init --hosts claude-code``, the host's environment for it, and the scripted sessions the
fake model plays (:mod:`tests.hosts.fake_anthropic`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DISK_TMPDIR, REPO, clean_env, emit_payload, project_venv, run_cli
from tests.hosts.fake_anthropic import FakeAnthropic

CLAUDE = Path(
    os.environ.get("EIDOLONS_CLAUDE_BIN")
    or REPO / ".cache" / "claude-code" / "node_modules" / ".bin" / "claude"
)
SECRET = "PAYLOAD-SECRET-7f3a"
ATTACK = "ATTACKER-BYTES-91c2"
BODY = f"# Scout report\n\n## Decision target\nWhere does install.sh race? {SECRET}\n"
#: the tools of the attacking subagent vigil: every file tool, the shell, the gate's reader
VIGIL_TOOLS = "Read, Grep, Glob, Bash, Write, Edit, mcp__eidolons__read_verified"
TOOLS = (
    "Read,Write,Edit,Bash,Agent,Grep,Glob,WebFetch,"
    "mcp__eidolons__emit,mcp__eidolons__read_verified,mcp__eidolons-apivr__emit"
)


def claude_or_skip() -> Path:
    missing = [n for n in ("bwrap", "socat") if shutil.which(n) is None]
    ok = CLAUDE.is_file() and os.access(CLAUDE, os.X_OK) and not missing
    if ok:
        return CLAUDE
    reason = (
        f"Claude Code not installed at {CLAUDE} "
        "(npm install --prefix .cache/claude-code @anthropic-ai/claude-code@2.1.328)"
        if missing == []
        else f"the sandbox needs {' and '.join(missing)} (apt-get install bubblewrap socat)"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def agent_file(name: str, tools: str) -> str:
    return (
        f"---\nname: {name}\ndescription: {name}, an Eidolon of the pipeline.\n"
        f"tools: {tools}\n---\nYou are {name}.\n"
    )


class Project:
    """One project set up by ``eidolons init``, and the host's environment for it."""

    def __init__(
        self,
        base: Path,
        name: str,
        agents: dict[str, str],
        fake: FakeAnthropic,
        venv_inside: bool = False,
    ) -> None:
        """``venv_inside``: the gate runs from a venv inside the project, set up by that
        venv's own ``eidolons init`` (its code is then the shell's to reach, but for init)."""
        self.root = base / name / "proj"
        self.home = base / name / "home"
        (self.root / ".claude" / "agents").mkdir(parents=True)
        (self.home / ".config").mkdir(parents=True)
        for agent, tools in agents.items():
            (self.root / ".claude" / "agents" / f"{agent}.md").write_text(agent_file(agent, tools))
        python = project_venv(self.root) if venv_inside else Path(sys.executable)
        venv_bin = os.path.dirname(os.path.abspath(python))
        self.env = clean_env(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            ANTHROPIC_BASE_URL=fake.url,
            ANTHROPIC_API_KEY="sk-ant-test-not-a-key",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            ENABLE_TOOL_SEARCH="false",
            PATH=f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
            TMPDIR=DISK_TMPDIR,  # the sandbox mounts a /dev of its own
        )
        for var in ("CLAUDE_PROJECT_DIR", "CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "ECL_HMAC_KEY"):
            self.env.pop(var, None)
        if venv_inside:
            init = [str(python), "-m", "eidolons", "init", "--hosts", "claude-code"]
            done = subprocess.run(init, cwd=self.root, env=self.env, capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
        else:
            r = run_cli("init", "--hosts", "claude-code", cwd=self.root, env=self.env)
            assert r.code == 0, r.err

    def cli(self, *args: Any) -> Any:
        return run_cli(*args, cwd=self.root, env=self.env)

    def handoff(self, name: str, body: str = BODY, verify: bool = True, **kw: Any) -> Path:
        payload, envelope, _ = emit_payload(self.cli, self.root, f"handoffs-src/{name}", body, **kw)
        placed = self.root / ".eidolons" / "handoffs" / name
        assert placed.is_file() and not payload.with_name(envelope.name).exists()
        payload.unlink()  # the sender's own draft: emit copied it into the hand-offs
        if verify:
            assert self.cli("verify-envelope", envelope, "--block").code == 0
        return placed

    def session(self, directive: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                str(CLAUDE),
                "-p",
                f"ECLTEST {directive}",
                "--allowedTools",
                TOOLS,
                "--output-format",
                "text",
            ],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def seq(*steps: str) -> str:
    return "seq " + json.dumps(list(steps))


def tool(name: str, **tool_input: Any) -> str:
    return f"tool {name} {json.dumps(tool_input)}"


def one_shell(commands: list[str], out: str) -> str:
    """One Bash step that runs each of ``commands`` in its own subshell, in order, and keeps
    what each printed, under its number, in the file ``out`` of the project (the host
    shortens a long output; the file holds all the shell saw), then shows that file."""
    script = "\n".join(f"echo '=== {i}'; ( {c}\n) 2>&1" for i, c in enumerate(commands))
    return f"bash {{ {script}\n}} > {out} 2>&1; cat {out}"


def frames(shown: str, commands: list[str]) -> dict[str, str]:
    """What each command of a :func:`one_shell` step printed, from its file; every command
    must have run."""
    parts = shown.split("=== ")
    found = {int(p.split("\n", 1)[0]): p.partition("\n")[2] for p in parts[1:]}
    assert sorted(found) == list(range(len(commands))), shown[:2000]
    return {c: found[i] for i, c in enumerate(commands)}


def verified(path: str | Path) -> str:
    """The step that reads a hand-off through the gate's MCP reader, ``read_verified``."""
    return tool("mcp__eidolons__read_verified", artifact=str(path))


def result(scene: dict[str, Any], step: str, session: str) -> dict[str, Any]:
    proc = scene["runs"][session]
    assert step in scene["results"], (
        step,
        proc.returncode,
        proc.stdout[-500:],
        proc.stderr[-2000:],
    )
    found: dict[str, Any] = scene["results"][step]
    return found
