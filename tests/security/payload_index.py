"""Attacks on the payload index (ADR 0018): the hook and the receiver's early SKIP trust
the index in the allowing direction ("no trace names this path"), so an index an agent can
write, one that does not cover every trace on disk, or one a writer left half-written,
would let a receiver read a hand-off's bytes directly once its envelope is deleted. Each
case must deny, refuse, or take the full rule (which denies)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eidolons.io.paths import rules_out
from eidolons.trace.log import JsonlStore
from tests.conftest import clean_env, emit_cmd, emit_payload, trace_files
from tests.security._probes import (
    Cli,
    assert_gated,
    denied,
    hook,
    host_index,
    read_event,
    scrub_trace,
)

LEGACY = Path(".eidolons") / "payloads.idx"


LEGACY_HEADER = b"eidolons-payload-index v1\n"


def test_the_index_is_not_in_the_project(cli: Cli, project: Path, orphan: Path) -> None:
    assert not (project / LEGACY).exists()
    index = host_index(project)
    assert index.is_file()
    from eidolons.io.paths import config_dir

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
        from eidolons.io.paths import MAX_INDEX_BYTES

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
    from eidolons.io.paths import payload_index

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
    # the attack of ADR 0018's context, through the command `eidolons init` registers
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


def _limited_emit(project: Path, name: str, fsize: int) -> subprocess.CompletedProcess[bytes]:
    """The agent runs ``eidolons emit`` (its own hand-off, as itself) under a file-size
    limit it chose (``prlimit --fsize``, ``ulimit -f`` with SIGXFSZ ignored): a write past
    the limit fails with EFBIG, so a writer stops half-way, deterministically."""
    import resource
    import signal

    def limit() -> None:  # pragma: no cover - runs in the child
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    payload = project / name
    payload.parent.mkdir(parents=True, exist_ok=True)
    payload.write_text("# mine\n\n## Decision target\nx\n")
    argv = [str(a) for a in emit_cmd(payload, sender="atlas", to="vigil")]
    return subprocess.run(
        [sys.executable, "-m", "eidolons", *argv],
        cwd=project,
        env=clean_env(),
        capture_output=True,
        timeout=60,
        preexec_fn=limit,
    )


def test_a_writer_stopped_half_way_does_not_lose_the_index_s_evidence(
    cli: Cli, project: Path, orphan: Path
) -> None:
    # the index is rewritten in place, and a writer that stops half-way
    # leaves an odd generation; readers then ignored the whole file, and the next writer
    # rebuilt it from the traces alone. The agent removes the payload's lines from the
    # trace, pads the trace directory (the index grows past its trace files), and runs
    # its own `eidolons emit` under a file-size limit that lets the trace line through
    # but stops the index's rewrite: the evidence that a trace named the payload was
    # gone, and the hook allowed a Read of the orphaned hand-off's bytes.
    scrub_trace(project, b"report.md")
    for i in range(24):
        (project / ".eidolons" / ".trace" / f"pad-{i:02d}.jsonl").write_bytes(b"")
    emit_payload(cli, project, "mine/first.md")  # the index reads the padding
    index = host_index(project)
    size = index.stat().st_size
    assert size > 3000
    proc = _limited_emit(project, "mine/second.md", size - 600)
    assert proc.returncode == 0, proc.stderr  # the line is the record: the append stands
    from eidolons.io.paths import HEAD_BYTES, read_head

    found = read_head(index.read_bytes()[:HEAD_BYTES])
    assert found is not None and found[0] % 2 == 1  # the rewrite stopped half-way
    assert_gated(cli, project, orphan)
    emit_payload(cli, project, "mine/third.md")  # the next writer, without the limit
    assert_gated(cli, project, orphan)
    assert hook(project, project / "src.py") == (0, "")


def test_every_cut_of_an_in_place_rewrite_keeps_the_entries(tmp_path: Path) -> None:
    # the same attack at every point a rewrite can stop: the file is the odd header, the
    # new body up to the cut, the old body after it. Neither the full rule's evidence
    # (named_on_host) nor the next writer may lose an entry the old index had.
    from eidolons.io.paths import HEAD_BYTES, head, named_on_host, read_head
    from eidolons.trace.indexes import refresh
    from eidolons.trace.log import JsonlStore
    from eidolons.trace.store import is_payload_event

    root = tmp_path / "p"
    (root / ".eidolons").mkdir(parents=True)
    store = JsonlStore(root)
    old_keys = [f"old/{i}-{'x' * i}.md" for i in range(12)]
    for i, key in enumerate(old_keys):
        store.append(f"t{i}", {"event": "emit", "message_id": f"m{i}", "payload_path": key})
    index = host_index(root)
    old = index.read_bytes()
    # a new trace file naming new.md: the rewrite's body (more cover lines, one entry)
    (root / ".eidolons" / ".trace" / "new.jsonl").write_bytes(
        b'{"event":"emit","message_id":"n","payload_path":"new.md"}\n'
    )
    refresh(str(root), is_payload_event)
    new = index.read_bytes()
    trace_dir = root / ".eidolons" / ".trace"
    found = read_head(old[:HEAD_BYTES])
    assert found is not None
    odd = head(found[0] + 1, 0)
    cuts = sorted({*range(HEAD_BYTES, len(new) + 1, 41), *(i + 1 for i in range(len(new) - 1)
                   if new[i:i + 1] == b"\n" and i > len(old) - 400)})  # fmt: skip
    assert len(cuts) > 30
    for cut in cuts:
        torn = odd + new[HEAD_BYTES:cut] + old[cut:]
        with index.open("r+b") as fh:  # in place, as the writer left it
            fh.write(torn)
            fh.truncate()
        for key in old_keys:
            assert named_on_host(str(root / key), str(root)) is not None, (cut, key)
        # the next writer keeps every old entry, though no trace names them any more
        trace_dir.rename(root / "away")
        trace_dir.mkdir()
        refresh(str(root), is_payload_event)
        for key in old_keys:
            assert named_on_host(str(root / key), str(root)) is not None, (cut, key)
        trace_dir.rmdir()
        (root / "away").rename(trace_dir)


def test_an_append_records_its_own_payload_even_past_the_scan_bound(
    cli: Cli, project: Path, tmp_path: Path
) -> None:
    # the index's writer reads the trace files it does not cover within the
    # trace scan bound, and leaves a file it cannot read within it uncovered and unread,
    # the payload the append just wrote included. The agent pads a trace file with lines
    # just before a hand-off is emitted (here under a small bound), so that the emit's own
    # trace file is past what is left of the bound: its payload never reached the index,
    # and once the agent scrubbed the trace and deleted the envelope, nothing named it.
    junk = b'{"event":"note","n":"' + b"j" * 200 + b'"}\n'
    pad = project / ".eidolons" / ".trace" / "0000.jsonl"
    pad.parent.mkdir(parents=True, exist_ok=True)

    def more_padding() -> None:  # before each append, what is left of the bound is gone
        with pad.open("ab") as fh:
            fh.write(junk * 18)

    env = clean_env(EIDOLONS_MAX_TRACE_SCAN_BYTES="4096")
    more_padding()
    payload, envelope, _ = emit_payload(cli, project, "notes/bound.md", env=env)
    more_padding()
    assert cli("verify-envelope", envelope, "--block", env=env).code == 0
    envelope.unlink()
    (project / ".eidolons" / ".trace" / "0000.jsonl").unlink()
    scrub_trace(project, b"bound.md")
    (project / "src.py").write_text("x = 1\n")
    assert_gated(cli, project, payload)
    assert hook(project, project / "src.py") == (0, "")


def test_a_full_index_still_records_new_evidence(cli: Cli, project: Path) -> None:
    # the agent forges emit lines naming junk paths until the index would pass
    # MAX_INDEX_BYTES: the writer then stopped rewriting it, so a hand-off emitted after
    # that was named only by the trace, and a scrub of the trace un-protected it
    from eidolons.io.paths import MAX_INDEX_BYTES

    trace = project / ".eidolons" / ".trace" / "forged.jsonl"
    trace.parent.mkdir(parents=True, exist_ok=True)
    name = "j" * 3000
    count = MAX_INDEX_BYTES // 3000 + 8
    with trace.open("wb") as fh:
        for i in range(count):
            event = {"event": "emit", "message_id": f"f{i}", "payload_path": f"{name}/{i}"}
            fh.write(json.dumps(event, separators=(",", ":")).encode() + b"\n")
    payload, envelope, _ = emit_payload(cli, project, "notes/late.md")
    assert cli("verify-envelope", envelope, "--block").code == 0
    envelope.unlink()
    trace.unlink()
    scrub_trace(project, b"late.md")
    assert_gated(cli, project, payload)


@pytest.mark.parametrize("how", ["renamed-away", "renamed-within", "hard-linked"])
def test_trace_files_renamed_or_linked_do_not_unprotect(
    cli: Cli, project: Path, orphan: Path, how: str
) -> None:
    trace = trace_files(project)[0]
    if how == "renamed-away":  # not *.jsonl: the full search no longer reads it
        trace.rename(trace.with_suffix(".old"))
    elif how == "renamed-within":  # another name, the same inode, the lines scrubbed
        other = trace.with_name("renamed.jsonl")
        trace.rename(other)
        scrub_trace(project, b"report.md")
    else:  # a second name for the same file: the index's ctime no longer matches
        os.link(trace, trace.with_name("linked.jsonl"))
    assert_gated(cli, project, orphan)
    if how == "hard-linked":
        assert hook(project, project / "src.py") == (0, "")


def test_a_copied_project_is_judged_by_its_own_traces(
    cli: Cli, project: Path, orphan: Path, tmp_path: Path
) -> None:
    # a copy has another root inode, so no index of this host: the full rule reads the
    # copied traces, which name the payload (the scrub of a copy is ADR 0018's limit)
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(project, copy, symlinks=True)
    from eidolons.io.paths import payload_index

    assert payload_index(str(copy.resolve())) is None  # cannot tell: the full rule
    assert_gated(lambda *a, **k: cli(*a, cwd=copy, **k), copy, copy / "notes" / "report.md")


def test_a_moved_project_keeps_its_index(
    cli: Cli, project: Path, orphan: Path, tmp_path: Path
) -> None:
    moved = tmp_path / "elsewhere"
    project.rename(moved)
    scrub_trace(moved, b"report.md")
    assert_gated(lambda *a, **k: cli(*a, cwd=moved, **k), moved, moved / "notes" / "report.md")


@pytest.mark.parametrize("scrub", [False, True])
def test_a_hand_off_outside_the_project_stays_known_once_its_envelope_is_gone(
    cli: Cli, project: Path, tmp_path: Path, scrub: bool
) -> None:
    # ADR 0018: a payload outside the project root (the envelope beside it,
    # its boundary its own directory: ADR 0002) was emitted and verified with no
    # payload_path at all, so once the agent deleted its envelope no rule knew it: the
    # hook allowed a Read of its bytes and verify-incoming skipped it
    shared = tmp_path / "shared"
    shared.mkdir()
    payload = shared / "report.md"
    payload.write_text("# Report\n\n## Decision target\nx\n")
    assert cli(*emit_cmd(payload, sender="atlas", to="vigil")).code == 0
    envelope = shared / "report.envelope.json"
    assert cli("verify-envelope", envelope, "--block").code == 0
    envelope.unlink()
    payload.write_text("# forged\n")
    if scrub:  # the index names it still
        scrub_trace(project, b"report.md")
    (project / "src.py").write_text("x = 1\n")
    assert_gated(cli, project, payload)
    link = tmp_path / "via-link"
    link.symlink_to(shared, target_is_directory=True)
    assert_gated(cli, project, link / "report.md")
    assert hook(project, project / "src.py") == (0, "")
    other = shared / "unrelated.md"
    other.write_text("# not a hand-off\n")
    assert hook(project, other) == (0, "")


@pytest.mark.parametrize("kind", ["fifo", "directory", "dangling-link"])
def test_a_trace_file_that_is_not_a_file_fails_closed_without_hanging(
    cli: Cli, project: Path, orphan: Path, kind: str
) -> None:
    # the agent scrubs the trace and adds a *.jsonl that is a FIFO (a reader would block),
    # a directory or a dangling link: the index cannot cover it, and the full rule must
    # neither hang nor read it as "nothing named"
    scrub_trace(project, b"report.md")
    odd = project / ".eidolons" / ".trace" / "zz.jsonl"
    if kind == "fifo":
        os.mkfifo(odd)
    elif kind == "directory":
        odd.mkdir()
    else:
        odd.symlink_to(project / "nowhere.jsonl")
    assert_gated(cli, project, orphan)


def test_an_index_of_the_earlier_format_keeps_its_evidence(
    cli: Cli, project: Path, orphan: Path
) -> None:
    # an index written by the v2 writer (coverage lines before the entries): the fast
    # path does not read it (another header), the evidence direction and the next writer
    # read its entries back, so upgrading never forgets a payload a trace named
    from eidolons.io.paths import HEAD_BYTES, entry, root_line

    index = host_index(project)
    st = os.stat(project)
    traces = trace_files(project)
    cover = b"".join(
        b"trace %d %d %d %d %d %s %s\n"
        % (s.st_dev, s.st_ino, s.st_size, s.st_ctime_ns, s.st_size, b"0" * 64,
           json.dumps(t.name).encode())
        for t in traces
        for s in [t.stat()]
    )  # fmt: skip
    body = root_line(st) + cover + b"entries\n" + entry("notes/report.md")
    header = (b"eidolons-payload-index v2 4 %d" % len(body)).ljust(HEAD_BYTES - 1) + b"\n"
    index.write_bytes(header + body)
    scrub_trace(project, b"report.md")
    assert_gated(cli, project, orphan)
    emit_payload(cli, project, "notes/after.md")  # the v3 writer rewrites it
    assert host_index(project).read_bytes().startswith(b"eidolons-payload-index v3 ")
    assert_gated(cli, project, orphan)
    assert hook(project, project / "src.py") == (0, "")


def _emit_line(key: str) -> bytes:
    event = {"event": "emit", "message_id": f"m-{key}", "payload_path": key}
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"


def _named(root: Path, key: str) -> bool | None:
    """What the allowing direction (the hook's fast path, the early SKIP) says of
    ``key``: True named, False not named, None cannot tell (the full rule decides)."""
    from eidolons.io.paths import covered_entries, names, trace_states

    states = trace_states(str(root), None)
    if states is None:
        return None
    found = covered_entries(str(root), states)
    return None if found is None else names(found, str(root / key), str(root))


def _store(root: Path) -> JsonlStore:
    (root / ".eidolons").mkdir(parents=True, exist_ok=True)
    return JsonlStore(root)


def _entry_lines(root: Path) -> list[bytes]:
    from eidolons.io.paths import index_path, recovered_entries

    data = Path(index_path(str(root))).read_bytes()
    found = [
        line
        for line in data.splitlines(keepends=True)
        if line in recovered_entries(data, os.stat(root))
    ]
    return found


@pytest.mark.parametrize("append_to", ["same-file", "other-file"])
def test_a_line_moved_before_where_the_index_stopped_is_still_read(
    tmp_path: Path, append_to: str
) -> None:
    # ADR 0018: the writer read a changed trace file on from where the
    # index stopped when it was the same inode, not shorter, and its 64 bytes before that
    # point were unchanged. A line the index never read (appended by another tool) moved
    # by the agent, in place, before that point (its own padding line cut to make room,
    # the last 64 bytes kept) was then never read: the next append covered the file with
    # an index that did not name the payload the trace names, and the hook and the early
    # SKIP allowed it
    from eidolons.io.paths import rules_out

    root = (tmp_path / "p").resolve()
    store = _store(root)
    pad = {"event": "note", "n": "x" * 300}
    for _ in range(4):
        store.append("t", pad)
    trace = root / ".eidolons" / ".trace" / "t.jsonl"
    line = _emit_line("notes/p.md")
    data = trace.read_bytes()
    first = data.splitlines(keepends=True)[0]
    filler = json.loads(first)
    filler["n"] = filler["n"][: len(filler["n"]) - len(line)]
    moved = json.dumps(filler, separators=(",", ":")).encode() + b"\n"
    assert len(line) + len(moved) == len(first)
    with trace.open("r+b") as fh:  # same inode, same size, same last bytes
        fh.write(line + moved + data[len(first) :])
    assert _named(root, "notes/p.md") is None  # not covered: the full rule names it
    assert not rules_out(str(root / "notes/p.md"), str(root))
    store.append("t" if append_to == "same-file" else "u", {"event": "note"})
    assert _named(root, "notes/p.md") is not False
    assert not rules_out(str(root / "notes/p.md"), str(root))


def test_an_append_still_reads_only_what_follows_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the fix reads again only a file changed by something else than this append: the
    # store's own append reads its line, not the file (the amendment's point)
    from eidolons.trace import indexes

    root = (tmp_path / "p").resolve()
    store = _store(root)
    for _ in range(20):
        store.append("t", {"event": "note", "n": "x" * 200})
    size = (root / ".eidolons" / ".trace" / "t.jsonl").stat().st_size
    starts: list[int] = []
    real = indexes._scan

    def scan(fd: int, start: int, end: int, *rest: object) -> int:
        starts.append(start)
        return real(fd, start, end, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(indexes, "_scan", scan)
    store.append("t", {"event": "emit", "message_id": "m", "payload_path": "a.md"})
    assert starts == [size]
    assert _named(root, "a.md") is True


@pytest.mark.parametrize("fail_at", [1, 2, 3])
def test_a_writer_killed_between_its_writes_loses_and_duplicates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_at: int
) -> None:
    # the writer dies after its odd header (1), after the tail (2), or after the
    # truncation, before the even header (3): readers take the full rule, the evidence
    # direction still names every entry, the next writer loses and duplicates none
    from eidolons.io.paths import named_on_host
    from eidolons.trace import indexes
    from eidolons.trace.store import is_payload_event

    root = (tmp_path / "p").resolve()
    store = _store(root)
    keys = [f"old/{i}.md" for i in range(6)]
    for key in keys:
        store.append("t", {"event": "emit", "message_id": key, "payload_path": key})
    trace_dir = root / ".eidolons" / ".trace"
    (trace_dir / "gone.jsonl").write_bytes(_emit_line("gone.md"))
    indexes.refresh(str(root), is_payload_event)
    (trace_dir / "gone.jsonl").unlink()  # the coverage shrinks too
    (trace_dir / "t.jsonl").open("ab").write(_emit_line("new.md"))
    calls = {"n": 0}
    real_pwrite, real_truncate = os.pwrite, os.ftruncate

    def pwrite(fd: int, data: bytes, offset: int) -> int:
        calls["n"] += 1
        if calls["n"] > (1 if fail_at == 1 else 2):
            raise OSError(28, "killed")
        return real_pwrite(fd, data, offset)

    def ftruncate(fd: int, length: int) -> None:
        if fail_at == 2:
            raise OSError(28, "killed")
        real_truncate(fd, length)

    monkeypatch.setattr(os, "pwrite", pwrite)
    monkeypatch.setattr(os, "ftruncate", ftruncate)
    with pytest.raises(OSError):
        indexes.refresh(str(root), is_payload_event)
    monkeypatch.undo()
    for key in [*keys, "gone.md"]:
        assert named_on_host(str(root / key), str(root)) is not None, key
        assert _named(root, key) is not False, key
    assert _named(root, "new.md") is not False
    indexes.refresh(str(root), is_payload_event)
    for key in [*keys, "gone.md", "new.md"]:
        assert _named(root, key) is True, key
    lines = _entry_lines(root)
    assert len(lines) == len(set(lines)) == len(keys) + 2


_WRITER = """
import sys
from pathlib import Path
from eidolons.trace.log import JsonlStore
root, who = Path(sys.argv[1]), sys.argv[2]
store = JsonlStore(root)
for i in range(25):
    key = f"{who}/{i}.md"
    store.append(f"{who}-{i % 2}", {"event": "emit", "message_id": key, "payload_path": key})
"""


def test_concurrent_writers_in_several_processes_lose_no_entry(tmp_path: Path) -> None:
    root = (tmp_path / "p").resolve()
    _store(root)
    env = clean_env()
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(root), f"w{n}"], env=env)
        for n in range(3)
    ]
    for proc in procs:
        assert proc.wait(timeout=60) == 0
    keys = [f"w{n}/{i}.md" for n in range(3) for i in range(25)]
    for key in keys:
        assert _named(root, key) is True, key
    lines = _entry_lines(root)
    assert len(lines) == len(set(lines)) == len(keys)


def test_an_index_crossing_the_evidence_limit_keeps_every_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an index written near MAX_EVIDENCE_BYTES (here made small) by tail appends: the
    # append that crosses it is written, then the index is frozen and names every path;
    # the allowing direction never says "not named" for a key a trace named
    from eidolons.io import paths as payloadindex
    from eidolons.io.paths import named_on_host
    from eidolons.trace import indexes

    limit = 4096
    monkeypatch.setattr(payloadindex, "MAX_EVIDENCE_BYTES", limit)
    monkeypatch.setattr(indexes, "MAX_EVIDENCE_BYTES", limit)
    monkeypatch.setattr(payloadindex, "MAX_INDEX_BYTES", limit)
    root = (tmp_path / "p").resolve()
    store = _store(root)
    keys = [f"k/{i:03d}-{'y' * 60}.md" for i in range(80)]
    for key in keys:
        store.append("t", {"event": "emit", "message_id": key, "payload_path": key})
    index = Path(payloadindex.index_path(str(root)))
    assert index.stat().st_size > limit
    for key in keys:
        assert _named(root, key) is not False, key
        assert named_on_host(str(root / key), str(root)) is not None, key
    assert named_on_host(str(root / "never.md"), str(root)) is not None  # frozen: all
