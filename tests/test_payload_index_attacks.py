"""Attacks on the payload index (ADR 0110): the hook and the receiver's early SKIP trust
the index in the allowing direction ("no trace names this path"), so an index an agent can
write, or one that does not cover every trace on disk, would let a receiver read a
hand-off's bytes directly once its envelope is deleted. Each case must deny, refuse, or take
the full rule (which denies)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from eidolons.io.project import rules_out
from tests._attacks import Cli, assert_gated, denied, hook, host_index, read_event
from tests.conftest import emit_cmd, emit_payload, trace_files

LEGACY = Path(".eidolons") / "payloads.idx"
LEGACY_HEADER = b"eidolons-payload-index v1\n"


@pytest.fixture
def orphan(cli: Cli, project: Path) -> Path:
    """A hand-off emitted and verified, its envelope then deleted by the agent, its
    payload rewritten: the trace names it, so every gate must refuse it."""
    payload, envelope, _ = emit_payload(cli, project, "notes/report.md")
    assert cli("verify-envelope", envelope, "--block").code == 0
    envelope.unlink()
    payload.write_text("# forged\n")
    (project / "src.py").write_text("x = 1\n")
    return payload


def test_the_index_is_not_in_the_project(cli: Cli, project: Path, orphan: Path) -> None:
    assert not (project / LEGACY).exists()
    index = host_index(project)
    assert index.is_file()
    from eidolons.io.project import config_dir

    assert str(index).startswith(config_dir() + os.sep)
    assert_gated(cli, project, orphan)
    assert (hook(project, project / "src.py")) == (0, "")  # an unrelated file: allowed


def _plant(index: Path, kind: str, data: bytes, target: Path, huge: int) -> None:
    """Put at ``index`` what the agent may: a link to ``target`` holding ``data``
    (``symlink``), a FIFO (``fifo``), or ``data`` padded to ``huge`` bytes (``huge``)."""
    if kind == "symlink":
        target.write_bytes(data)
        index.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(index)
    else:
        assert kind == "huge"
        with index.open("wb") as fh:
            fh.write(data)
            fh.truncate(huge)


@pytest.mark.parametrize(
    "legacy",
    [LEGACY_HEADER, LEGACY_HEADER + b'"other.md"\n', b"", "symlink", "fifo", "huge"],
    ids=["header-only", "entries-removed", "headerless", "symlink", "fifo", "huge"],
)
def test_an_index_the_agent_writes_in_the_project_is_never_trusted(
    cli: Cli, project: Path, orphan: Path, tmp_path: Path, legacy: bytes | str
) -> None:
    # the agent writes .eidolons/payloads.idx (header only, its entries removed, ...)
    # and deletes the envelope: the hook must not allow a Read of the payload's bytes
    index = project / LEGACY
    index.unlink(missing_ok=True)  # whatever this tool left there (nothing, since 0110)
    if isinstance(legacy, bytes):
        index.write_bytes(legacy)
    else:
        _plant(index, legacy, LEGACY_HEADER, tmp_path / "fake.idx", 64 * 1024 * 1024)
    assert_gated(cli, project, orphan)


@pytest.mark.parametrize("damage", ["deleted", "symlink", "fifo", "huge", "truncated", "foreign"])
def test_a_host_index_that_cannot_tell_takes_the_full_rule(
    cli: Cli, project: Path, orphan: Path, tmp_path: Path, damage: str
) -> None:
    index = host_index(project)
    data = index.read_bytes()
    index.unlink()
    if damage in ("symlink", "fifo", "huge"):
        from eidolons.io.payloadindex import MAX_INDEX_BYTES

        _plant(index, damage, data, tmp_path / "elsewhere.idx", MAX_INDEX_BYTES + 1)
    elif damage == "truncated":
        index.write_bytes(data[: data.index(b"\nentries\n") + 1])
    elif damage == "foreign":  # another project's index copied over this one's
        other = tmp_path / "other"
        (other / ".eidolons").mkdir(parents=True)
        (other / "x.md").write_text("# x\n\n## Decision target\nx\n")
        assert cli(*emit_cmd(other / "x.md", "--root", other)).code == 0
        index.write_bytes(host_index(other).read_bytes())
    assert_gated(cli, project, orphan)
    assert hook(project, project / "src.py") == (0, "")  # the full rule: not a hand-off


def _foreign_line(name: str) -> bytes:
    """An emit event as an upstream bash tool writes it: plain JSON, no chain."""
    event = {
        "event": "emit",
        "from": "atlas@1.4.2",
        "to": "vigil@1.9.0",
        "message_id": "m-upstream",
        "thread_id": "t-upstream",
        "payload_path": name,
    }
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"


@pytest.mark.parametrize("where", ["same-file", "new-file"])
def test_a_trace_line_appended_by_another_tool_is_seen(
    cli: Cli, project: Path, orphan: Path, where: str
) -> None:
    # another tool appends a line naming a payload to the JSONL trace (a plain append,
    # not through the store): the index made before it must not say "not named"
    other = project / "upstream.md"
    other.write_text("# upstream's hand-off, its envelope gone\n")
    if where == "same-file":
        with trace_files(project)[0].open("ab") as fh:
            fh.write(_foreign_line("upstream.md"))
    else:
        (project / ".eidolons" / ".trace" / "upstream.jsonl").write_bytes(
            _foreign_line("upstream.md")
        )
    assert_gated(cli, project, other)
    assert_gated(cli, project, orphan)


def test_an_index_made_after_another_tool_s_append_names_it(
    cli: Cli, project: Path, orphan: Path
) -> None:
    # the next append through the store brings the index up to the other tool's line
    other = project / "upstream.md"
    other.write_text("# upstream\n")
    with trace_files(project)[0].open("ab") as fh:
        fh.write(_foreign_line("upstream.md"))
    emit_payload(cli, project, "notes/third.md")
    from eidolons.io.project import payload_index

    covered = payload_index(str(project.resolve()))
    assert covered is not None  # the index covers every trace again
    assert_gated(cli, project, other)
    assert hook(project, project / "src.py") == (0, "")


def test_a_rewritten_trace_does_not_unprotect_a_hand_off(
    cli: Cli, project: Path, orphan: Path
) -> None:
    # the agent removes the lines naming the payload from the trace (and could recompute
    # the chain): the host index still names it, so the gate refuses and the hook denies
    for trace in trace_files(project):
        kept = [x for x in trace.read_bytes().splitlines(keepends=True) if b"report.md" not in x]
        trace.write_bytes(b"".join(kept))
    from eidolons.gates.trigger import find_handoff

    found = find_handoff(orphan, project.resolve())
    assert found is not None and "payload index" in found[0]
    assert_gated(cli, project, orphan)


def test_deleted_traces_do_not_unprotect_a_hand_off(cli: Cli, project: Path, orphan: Path) -> None:
    for trace in trace_files(project):
        trace.unlink()
    assert_gated(cli, project, orphan)
    assert hook(project, project / "src.py") == (0, "")


def test_a_replaced_state_directory_does_not_unprotect_a_hand_off(
    cli: Cli, project: Path, orphan: Path, tmp_path: Path
) -> None:
    (project / ".eidolons").rename(tmp_path / "old-state")
    (project / ".eidolons").mkdir()
    assert_gated(cli, project, orphan)


@pytest.mark.parametrize("store", ["file", "env"])
def test_a_postgres_store_is_never_answered_by_the_index(
    cli: Cli, project: Path, orphan: Path, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the index covers the JSONL traces only: with a PostgreSQL store configured, the
    # events live elsewhere, so the hook takes the full rule (which here cannot reach the
    # store, and so cannot rule anything out)
    if store == "file":
        (project / ".eidolons" / "trace-store.json").write_text("{}")
    else:
        monkeypatch.setenv("EIDOLONS_TRACE_DSN", "postgresql://127.0.0.1:1/none")
    source = project / "src.py"
    assert not rules_out(str(source), str(project.resolve()))
    assert denied(project, source)


def test_an_append_whose_index_cannot_be_written_still_records(
    cli: Cli, project: Path, orphan: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the host index is a hint for the allowing direction: a host whose index cannot be
    # written (here its directory is a file) records the line all the same, and the hook
    # and the early SKIP, finding no index that covers the trace, take the full rule
    config = tmp_path / "other-host"
    (config / "eidolons").mkdir(parents=True)
    (config / "eidolons" / "payloads").write_text("not a directory\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    fourth, envelope, _ = emit_payload(cli, project, "notes/fourth.md")
    assert cli("verify-envelope", envelope, "--block").code == 0
    envelope.unlink()
    assert_gated(cli, project, fourth)
    assert_gated(cli, project, orphan)
    assert hook(project, project / "src.py") == (0, "")


def test_the_hook_denies_agents_the_host_index(project: Path, orphan: Path) -> None:
    from eidolons.hosts.hook.events import KEY, Layout

    layout = Layout(str(project.resolve()), ())
    index = str(host_index(project))
    assert layout.classify_write(index) == KEY
    assert layout.classify_read(index) == KEY


def test_the_hook_denies_the_host_index_with_an_explicit_key_dir(
    project: Path, orphan: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # EIDOLONS_KEY_DIR moves the keys; the host's indexes and heads stay in the config
    # directory, which must stay out of agents' reach
    monkeypatch.setenv("EIDOLONS_KEY_DIR", str(tmp_path / "keys"))
    from eidolons.hosts.hook.events import KEY, Layout

    layout = Layout(str(project.resolve()), ())
    assert layout.classify_write(str(host_index(project))) == KEY


def test_the_fast_path_stays_fast(
    project: Path, orphan: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an unrelated file in a project whose index covers its traces: no full rule
    import eidolons.gates.trigger

    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("the full find_handoff rule ran on the fast path")

    monkeypatch.setattr(eidolons.gates.trigger, "find_handoff", boom)
    assert hook(project, project / "src.py") == (0, "")
    assert rules_out(str(project / "src.py"), str(project.resolve()))


def test_the_registered_hook_command_denies_the_header_only_attack(
    cli: Cli, project: Path, orphan: Path
) -> None:
    # the attack of ADR 0110's context, through the command `eidolons init` registers
    # (a real process: `python -I -c BOOTSTRAP claude-code --root ROOT`)
    import subprocess

    from eidolons.hosts.hook.fast import command_argv

    (project / LEGACY).write_bytes(LEGACY_HEADER)
    proc = subprocess.run(
        command_argv("claude-code", str(project)),
        input=read_event(project, orphan),
        capture_output=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("EIDOLONS_")},
    )
    assert proc.returncode == 2, proc.stderr
    assert b"-verify-incoming] REFUSE: UNVERIFIED from " in proc.stderr


@pytest.mark.parametrize("trace_dir", ["file", "symlink"])
def test_a_trace_file_s_own_payload_is_named_when_the_trace_directory_cannot_be_read(
    cli: Cli, project: Path, tmp_path: Path, trace_dir: str
) -> None:
    # the agent puts something the full search cannot read where the trace directory is
    # (a file, a link elsewhere), then the orchestrator emits with --trace FILE outside
    # it: the full search never reads FILE, so the host's index is the only record that
    # a trace named the payload; it must hold the payload's key, or the envelope deleted,
    # the receiver reads the bytes directly
    trace = project / ".eidolons" / ".trace"
    if trace.exists():
        for f in trace.iterdir():
            f.unlink()
        trace.rmdir()
    if trace_dir == "file":
        trace.write_text("")
    else:
        (tmp_path / "away").mkdir()
        trace.symlink_to(tmp_path / "away")
    elsewhere = tmp_path / "elsewhere.jsonl"
    body = "# Report\n\n## Decision target\nx\n"
    payload, envelope, _ = emit_payload(
        cli, project, "notes/report.md", body, "--trace", str(elsewhere)
    )
    assert b'"payload_path":"notes/report.md"' in elsewhere.read_bytes()
    envelope.unlink()
    payload.write_text("# forged\n")
    assert_gated(cli, project, payload)
