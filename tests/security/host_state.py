"""The host's state out of an agent's reach: the host's config directory (its keys, heads
and indexes), the state and trace directories made links, an agent's own config
directory or root, and the interpreter and launcher the hook runs. None of them moves
or opens a gate."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.conftest import clean_env, emit_payload
from tests.security._probes import Cli, assert_gated, event, hook, run_hook


@pytest.mark.parametrize("what", ["trace-dir", "state-dir"])
def test_a_trace_or_state_directory_made_a_link_takes_the_full_rule(
    cli: Cli, project: Path, orphan: Path, tmp_path: Path, what: str
) -> None:
    # the agent swaps the trace directory (or all of .eidolons/) for a link to a copy it
    # scrubbed: the index cannot cover traces behind a link, and the full rule does not
    # read through it (nor forget what the index names)
    state = project / ".eidolons"
    moved = tmp_path / "moved"
    target = state / ".trace" if what == "trace-dir" else state
    target.rename(moved)
    for trace in moved.rglob("*.jsonl"):
        trace.write_bytes(b"")
    target.symlink_to(moved, target_is_directory=True)
    assert_gated(cli, project, orphan)


def test_the_agent_s_own_config_directory_changes_nothing_for_the_hook(
    cli: Cli, project: Path, tmp_path: Path
) -> None:
    # the agent emits (and has verified) with XDG_CONFIG_HOME of its own, where it can
    # write a header-only index: the host's hook reads the host's directory, which does
    # not cover the line, so it takes the full rule
    fake = tmp_path / "agent-config"
    env = clean_env(XDG_CONFIG_HOME=str(fake))
    payload, envelope, _ = emit_payload(cli, project, "notes/agent.md", env=env)
    assert cli("verify-envelope", envelope, "--block", env=env).code == 0
    for index in (fake / "eidolons" / "payloads").glob("*.idx"):
        index.write_bytes(index.read_bytes().split(b"\nentries\n")[0] + b"\nentries\ncovers\n")
    envelope.unlink()
    (project / "src.py").write_text("x = 1\n")
    assert_gated(cli, project, payload)
    assert hook(project, project / "src.py") == (0, "")


def test_an_agent_s_eidolons_root_does_not_move_the_hook(
    cli: Cli, project: Path, orphan: Path, tmp_path: Path
) -> None:
    # the registered hook names its root (--root): a root the agent sets for its own
    # processes is not the hook's, and a verify-incoming the agent runs against an empty
    # root only skips for that agent (it shows no bytes)
    empty = tmp_path / "empty"
    (empty / ".eidolons").mkdir(parents=True)
    r = cli("verify-incoming", orphan, "--as", "vigil", env=clean_env(EIDOLONS_ROOT=str(empty)))
    assert r.code in (0, 3)
    assert_gated(cli, project, orphan)


@pytest.mark.parametrize("agent", ["vigil", None])
def test_a_search_above_the_host_config_directory_is_denied(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, agent: str | None
) -> None:
    # ADR 0015: the hook denied a search of the config directory itself,
    # but not of its parent (~/.config, or ~): ripgrep (the Grep tool) there read the
    # signing keys, the trace heads and the indexes (a shell's grep -r is the sandbox's:
    # the config directory is under its denyRead, ADR 0015)
    config = tmp_path / "home" / ".config"
    keys = config / "eidolons" / "keys"
    keys.mkdir(parents=True)
    (keys / "orchestrator.key").write_text("-----BEGIN PRIVATE KEY-----\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    grep = event(project, "Grep", {"pattern": "PRIVATE", "path": str(config)}, agent)
    code, err = run_hook(project, grep)
    assert code == 2, err
    assert "would search the signing keys" in err


def test_the_interpreter_and_launcher_the_hook_runs_are_not_writable_by_agents(
    project: Path,
) -> None:
    # ADR 0015: the hook is registered as this interpreter by absolute path
    # (`python -I -c BOOTSTRAP`), and the orchestrator's shell runs the `eidolons`
    # launcher beside it; with the virtual environment inside the project (a common
    # layout), an agent's Write of `.venv/bin/python` or `.venv/bin/eidolons` replaced
    # the gate with a script of its own (the hook denied writes to the package and to
    # site-packages only)
    from eidolons.hosts.hook.events import WIRING, Layout

    layout = Layout(str(project.resolve()), ())
    bindir = os.path.dirname(os.path.abspath(sys.executable))
    for target in (sys.executable, os.path.join(bindir, "eidolons"), os.path.join(bindir, "x")):
        assert layout.classify_write(target) == WIRING, target


def test_a_refusal_hand_back_is_never_written_through_a_planted_link(
    cli: Cli, project: Path, tmp_path: Path
) -> None:
    """The refusals directory made a link to a directory outside the project: the gate
    that refuses (the MCP server's and the hook's run outside the agent's sandbox) writes
    its hand-back nowhere through it, and the refusal stands."""
    payload, _, env = emit_payload(cli, project)  # no orchestrator pass: refused
    outside = tmp_path / "outside"
    outside.mkdir()
    (project / ".eidolons" / "refusals").symlink_to(outside, target_is_directory=True)
    r = cli("verify-incoming", payload, "--as", "vigil")
    assert r.code == 3 and "REFUSE: UNVERIFIED from atlas" in r.err, r.err
    assert list(outside.iterdir()) == []
    # nor is a file the agent put there, under the name a hand-back would have, named as one
    forged = outside / f"vigil-{env['message_id']}-unverified.envelope.json"
    forged.write_text("{}\n")
    r = cli("verify-incoming", payload, "--as", "vigil", "--json")
    assert r.code == 3 and r.json()["status"] == "refused", r.out
    assert r.json().get("handback") is None, r.out  # no hand-back: none was written


@pytest.mark.parametrize("planted", ["fifo", "huge", "link"])
def test_a_planted_configuration_neither_hangs_nor_passes_a_sealed_gate(
    cli: Cli, project: Path, tmp_path: Path, planted: str
) -> None:
    """In a sealed project the receiver gate reads ``.eidolons/config.toml`` (its extra
    hand-off directories). A FIFO there, a file of gigabytes (a sparse hole) or a link out
    of the project: the file is read only if it is a regular file and no link, never
    blocking, bounded; the gate answers at once, a usage error, never a pass."""
    import subprocess

    payload, _, _ = emit_payload(cli, project)
    (project / ".eidolons" / "sealed").touch()
    config = project / ".eidolons" / "config.toml"
    if planted == "fifo":
        os.mkfifo(config)
    elif planted == "huge":
        with config.open("wb") as fh:
            fh.truncate(4 * 1024**3)
    else:
        (tmp_path / "elsewhere.toml").write_text('[handoffs]\ndirs = ["/"]\n')
        config.symlink_to(tmp_path / "elsewhere.toml")
    # a process of its own, its memory capped: a gate that blocks on the file or reads it
    # whole fails this test (its timeout, a MemoryError), never hangs it or the machine
    main = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)); "
        "from eidolons.cli.main import main; sys.exit(main(sys.argv[1:]))"
    )
    argv = [sys.executable, "-c", main, "verify-incoming", str(payload), "--as", "vigil"]
    proc = subprocess.run(
        argv, cwd=project, env=clean_env(), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2, proc.stderr  # the configuration is unusable: never a pass
    assert "config.toml" in proc.stderr and "internal error" not in proc.stderr, proc.stderr
