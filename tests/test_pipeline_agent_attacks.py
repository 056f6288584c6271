"""Attacks by an agent in the pipeline on the payload index on the host
(ADR 0110), ``check``'s parallel default (ADR 0115), the JSON number rule (ADR 0128),
emit's order (ADR 0127), the CLI's broken-import path (ADR 0125), the on_pass error
(ADR 0126) and memory's speed work (ADRs 0120-0124).

The adversary is an agent in the pipeline: it writes any file of the project and runs
whatever its host lets it run (``eidolons`` included, with the resource limits and the
environment it likes), but it cannot write the host's config directory, nor set the
environment of the hook the host runs. Each test is an attack; a hole found was written
failing first, then fixed (the commit says which)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._attacks import Cli, assert_gated, event, hook, host_index, run_hook
from tests.conftest import clean_env, emit_cmd, emit_payload, trace_files
from tests.test_check_jobs import _python


def scrub_trace(project: Path, needle: bytes) -> None:
    """The agent removes every trace line naming ``needle`` (it may write the project)."""
    for trace in trace_files(project):
        kept = [x for x in trace.read_bytes().splitlines(keepends=True) if needle not in x]
        trace.write_bytes(b"".join(kept))


@pytest.fixture
def orphan(cli: Cli, project: Path) -> Path:
    """A hand-off emitted and verified by the orchestrator, then its envelope deleted and
    its payload rewritten by the agent."""
    payload, envelope, _ = emit_payload(cli, project, "notes/report.md")
    assert cli("verify-envelope", envelope, "--block").code == 0
    envelope.unlink()
    payload.write_text("# forged\n")
    (project / "src.py").write_text("x = 1\n")
    return payload


# --- the payload index on the host (ADR 0110) -----------------------------------------


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
    # HOLE (fixed): the index is rewritten in place, and a writer that stops half-way
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
    from eidolons.io.payloadindex import HEAD_BYTES, read_head

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
    from eidolons.io.payloadindex import HEAD_BYTES, head, named_on_host, read_head
    from eidolons.trace.log import JsonlStore
    from eidolons.trace.payloadfill import refresh
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
    # HOLE (fixed): the index's writer reads the trace files it does not cover within the
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
    from eidolons.io.payloadindex import MAX_INDEX_BYTES

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
    # copied traces, which name the payload (the scrub of a copy is ADR 0110's limit)
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(project, copy, symlinks=True)
    from eidolons.io.project import payload_index

    assert payload_index(str(copy.resolve())) is None  # cannot tell: the full rule
    assert_gated(lambda *a, **k: cli(*a, cwd=copy, **k), copy, copy / "notes" / "report.md")


def test_a_moved_project_keeps_its_index(
    cli: Cli, project: Path, orphan: Path, tmp_path: Path
) -> None:
    moved = tmp_path / "elsewhere"
    project.rename(moved)
    scrub_trace(moved, b"report.md")
    assert_gated(lambda *a, **k: cli(*a, cwd=moved, **k), moved, moved / "notes" / "report.md")


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


# --- check's parallel default (ADR 0115) ------------------------------------------------

DIE_IN_WORKER = """
import os, signal, sys
from eidolons.gates import checker
from eidolons.cli.main import main
PARENT = os.getpid()
check = checker._Job.check
def dying(self, path):
    if path.endswith("r0300.envelope.json") and os.getpid() != PARENT:
        os.kill(os.getpid(), signal.SIGKILL)
    return check(self, path)
checker._Job.check = dying
checker.auto_jobs = lambda: 2
sys.exit(main(["check", ".", *sys.argv[1:]]))
"""


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from eidolons.gates.checker import AUTO_MIN
    from tests.test_check_jobs import _many_envelopes

    root = tmp_path_factory.mktemp("many15")
    _many_envelopes(root, AUTO_MIN + 8)
    return root


@pytest.mark.parametrize("mode", [[], ["--exit-zero"], ["--json", "--exit-zero"]])
def test_a_worker_killed_mid_run_is_an_internal_error_never_a_pass(
    many: Path, mode: list[str]
) -> None:
    proc = _python(many, "-c", DIE_IN_WORKER, *mode)
    assert proc.returncode == 70, proc.stderr
    assert proc.stderr.startswith("eidolons: internal error: BrokenProcessPool")
    assert proc.stderr.count("\n") == 1
    assert "Result:" not in proc.stdout and '"exit_code"' not in proc.stdout


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """More envelopes than the default's fork threshold, most of them hostile: bad JSON,
    an overflowing number, a duplicate key, a FIFO, a link out of the root, a payload
    rewritten, a directory named like an envelope."""
    import shutil

    from eidolons.gates.checker import AUTO_MIN
    from tests.test_check_jobs import _many_envelopes

    root = tmp_path_factory.mktemp("hostile15")
    _many_envelopes(root, AUTO_MIN + 40)
    good = (root / "r0000.envelope.json").read_text()
    outside = tmp_path_factory.mktemp("outside15") / "x.envelope.json"
    outside.write_text(good)
    (root / "other.md").write_text("# other\n")
    for i in range(0, AUTO_MIN + 40, 7):
        path = root / f"r{i:04d}.envelope.json"
        kind = i % 6
        path.unlink()
        if kind == 0:
            path.write_text(good[: len(good) // 2])
        elif kind == 1:
            path.write_text(good.rstrip().rstrip("}") + ', "x": 1e999}')
        elif kind == 2:
            path.write_text(good.rstrip().rstrip("}") + ', "to": {}}')
        elif kind == 3:
            os.mkfifo(path)
        elif kind == 4:
            path.symlink_to(outside)
        else:
            path.write_text(good.replace('"r.md"', '"other.md"'))
    (root / "zdir.envelope.json").mkdir()
    shutil.copy(root / "r.md", root / "r-copy.md")
    return root


@pytest.mark.parametrize("mode", [[], ["--json", "--strict"]])
def test_the_default_s_findings_are_those_of_one_process_on_hostile_input(
    hostile: Path, mode: list[str]
) -> None:
    runs = []
    for jobs in ([], ["--jobs", "1"]):
        proc = _python(hostile, "-m", "eidolons", "check", ".", *jobs, *mode, text=False)
        runs.append((proc.returncode, proc.stdout, proc.stderr))
    assert runs[0][0] == 2, runs[0][2]
    assert runs[0] == runs[1]


# --- memory never changes a verdict (ADRs 0120-0124) ------------------------------------


@pytest.mark.parametrize("damage", ["garbage", "directory", "fifo", "wrong-schema", "link"])
@pytest.mark.parametrize("flag", ["--show-recall", "--json"])
def test_a_broken_memory_store_neither_passes_nor_fails_the_gate(
    cli: Cli, project: Path, tmp_path: Path, damage: str, flag: str
) -> None:
    payload, envelope, _ = emit_payload(cli, project, "notes/mem.md")
    assert cli("verify-envelope", envelope, "--block").code == 0
    tampered, tampered_env, _ = emit_payload(cli, project, "notes/bad.md")
    assert cli("verify-envelope", tampered_env, "--block").code == 0
    tampered.write_text("# rewritten after the gate\n")
    store = project / ".eidolons" / "memory" / "memory.sqlite3"
    store.parent.mkdir(parents=True, exist_ok=True)
    store.unlink(missing_ok=True)
    if damage == "garbage":
        store.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    elif damage == "directory":
        store.mkdir()
    elif damage == "fifo":
        os.mkfifo(store)
    elif damage == "wrong-schema":
        import sqlite3

        with sqlite3.connect(store) as db:
            db.execute("create table crystals(x)")
            db.execute("pragma user_version = 3")
    else:
        (tmp_path / "nowhere").mkdir()
        store.symlink_to(tmp_path / "nowhere" / "gone" / "db")
    ok = cli("verify-incoming", payload, "--as", "vigil", flag)
    assert ok.code == 0, ok.err
    assert "REFUSE" not in ok.err
    bad = cli("verify-incoming", tampered, "--as", "vigil", flag)
    assert bad.code == 3 and "REFUSE: " in bad.err, bad.err
    if flag == "--json":
        assert ok.json()["status"] == "pass" and bad.json()["status"] != "pass"


@pytest.mark.parametrize("scrub", [False, True])
def test_a_hand_off_outside_the_project_stays_known_once_its_envelope_is_gone(
    cli: Cli, project: Path, tmp_path: Path, scrub: bool
) -> None:
    # HOLE (fixed, ADR 0131): a payload outside the project root (the envelope beside it,
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


@pytest.mark.parametrize("planted", ["db", "dir", "wal", "journal", "lock"])
def test_the_memory_store_is_never_written_through_a_planted_link(
    cli: Cli, project: Path, tmp_path: Path, planted: str
) -> None:
    # HOLE (fixed, ADR 0132): the agent plants the store (or its directory, its WAL, its
    # journal, its creation lock) as a link to a file outside the project; the gate's
    # ingest after a pass (the MCP server's runs outside the agent's sandbox) created or
    # overwrote that file with an SQLite store holding hand-off text
    payload, envelope, _ = emit_payload(cli, project, "notes/mem.md")
    assert cli("verify-envelope", envelope, "--block").code == 0
    store = project / ".eidolons" / "memory"
    victim = tmp_path / "outside" / "victim"
    victim.parent.mkdir()
    if planted == "dir":
        victim.mkdir()
        store.symlink_to(victim, target_is_directory=True)
    else:
        store.mkdir(parents=True)
        name = {"db": "", "wal": "-wal", "journal": "-journal", "lock": ""}[planted]
        if planted == "lock":
            (store / ".create.lock").symlink_to(victim)
        else:
            (store / f"memory.sqlite3{name}").symlink_to(victim)
    r = cli("verify-incoming", payload, "--as", "vigil", "--show-recall")
    assert r.code == 0, r.err  # memory never changes the verdict
    assert not victim.exists() or (victim.is_dir() and not any(victim.iterdir()))
    r = cli("memory", "ingest", envelope, "--as", "vigil")
    assert not victim.exists() or (victim.is_dir() and not any(victim.iterdir()))


@pytest.mark.parametrize("agent", ["vigil", None])
def test_a_search_above_the_host_config_directory_is_denied(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, agent: str | None
) -> None:
    # HOLE (fixed, ADR 0133): the hook denied a search of the config directory itself,
    # but not of its parent (~/.config, or ~): ripgrep (the Grep tool) there read the
    # signing keys, the trace heads and the indexes (a shell's grep -r is the sandbox's:
    # the config directory is under its denyRead, ADR 0140)
    config = tmp_path / "home" / ".config"
    keys = config / "eidolons" / "keys"
    keys.mkdir(parents=True)
    (keys / "orchestrator.key").write_text("-----BEGIN PRIVATE KEY-----\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    grep = event(project, "Grep", {"pattern": "PRIVATE", "path": str(config)}, agent)
    code, err = run_hook(project, grep)
    assert code == 2, err
    assert "would search the signing keys" in err


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
    from eidolons.io.payloadindex import HEAD_BYTES, entry, root_line

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


def test_emit_that_cannot_record_leaves_no_new_envelope(cli: Cli, project: Path) -> None:
    # ADR 0127: the envelope is placed before its event; when the trace cannot be
    # written (here the agent made the trace directory a file), emit fails and the
    # envelope it would have replaced (--force) is back, byte for byte
    payload, envelope, _ = emit_payload(cli, project, "notes/placed.md")
    before = envelope.read_bytes()
    trace_dir = project / ".eidolons" / ".trace"
    trace_dir.rename(project / "moved-trace")
    trace_dir.write_text("not a directory\n")
    payload.write_text("# rewritten\n\n## Decision target\ny\n")
    r = cli(*emit_cmd(payload, "--force", sender="atlas", to="vigil"))
    assert r.code != 0 and "Traceback" not in r.err
    assert envelope.read_bytes() == before
    trace_dir.unlink()
    fresh = project / "notes" / "fresh.md"
    fresh.write_text("# fresh\n\n## Decision target\nx\n")
    trace_dir.symlink_to(project / "moved-trace", target_is_directory=True)
    r = cli(*emit_cmd(fresh, sender="atlas", to="vigil"))
    assert r.code != 0 and "Traceback" not in r.err
    assert not (project / "notes" / "fresh.envelope.json").exists()


def test_the_interpreter_and_launcher_the_hook_runs_are_not_writable_by_agents(
    project: Path,
) -> None:
    # HOLE (fixed, ADR 0134): the hook is registered as this interpreter by absolute path
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
