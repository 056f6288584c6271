"""Attacks on the host
payload index written in place, tail only (ADR 0110's amendment) and ``check``'s
parallel default under a hostile environment (ADR 0115). (The hook's reading of shell
commands, ADR 0134 part 2 and ADR 0137, is gone: Claude Code's sandbox holds the shell,
ADR 0140.)

The adversary is an agent in the pipeline: it writes any file of the project and runs
whatever its host lets it run, but it cannot write the host's config directory nor set
the hook's environment. Each test is an attack; a hole found was written failing first, then
fixed (the test says ``HOLE (fixed, ADR ...)``); the others are guards."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from eidolons.trace.log import JsonlStore
from tests.conftest import clean_env
from tests.test_check_jobs import _python

# --- (a) the payload index's tail-only writer (ADR 0110 amendment) ---------------------


def _emit_line(key: str) -> bytes:
    event = {"event": "emit", "message_id": f"m-{key}", "payload_path": key}
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"


def _named(root: Path, key: str) -> bool | None:
    """What the allowing direction (the hook's fast path, the early SKIP) says of
    ``key``: True named, False not named, None cannot tell (the full rule decides)."""
    from eidolons.io.payloadindex import covered_entries, names
    from eidolons.io.project import trace_states

    states = trace_states(str(root), None)
    if states is None:
        return None
    found = covered_entries(str(root), states)
    return None if found is None else names(found, str(root / key), str(root))


def _store(root: Path) -> JsonlStore:
    (root / ".eidolons").mkdir(parents=True, exist_ok=True)
    return JsonlStore(root)


def _entry_lines(root: Path) -> list[bytes]:
    from eidolons.io.payloadindex import index_path, recovered_entries

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
    # HOLE (fixed, ADR 0138): the writer read a changed trace file on from where the
    # index stopped when it was the same inode, not shorter, and its 64 bytes before that
    # point were unchanged. A line the index never read (appended by another tool) moved
    # by the agent, in place, before that point (its own padding line cut to make room,
    # the last 64 bytes kept) was then never read: the next append covered the file with
    # an index that did not name the payload the trace names, and the hook and the early
    # SKIP allowed it
    from eidolons.io.project import rules_out

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
    from eidolons.trace import payloadfill

    root = (tmp_path / "p").resolve()
    store = _store(root)
    for _ in range(20):
        store.append("t", {"event": "note", "n": "x" * 200})
    size = (root / ".eidolons" / ".trace" / "t.jsonl").stat().st_size
    starts: list[int] = []
    real = payloadfill._scan

    def scan(fd: int, start: int, end: int, *rest: object) -> int:
        starts.append(start)
        return real(fd, start, end, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(payloadfill, "_scan", scan)
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
    from eidolons.io.payloadindex import named_on_host
    from eidolons.trace import payloadfill
    from eidolons.trace.store import is_payload_event

    root = (tmp_path / "p").resolve()
    store = _store(root)
    keys = [f"old/{i}.md" for i in range(6)]
    for key in keys:
        store.append("t", {"event": "emit", "message_id": key, "payload_path": key})
    trace_dir = root / ".eidolons" / ".trace"
    (trace_dir / "gone.jsonl").write_bytes(_emit_line("gone.md"))
    payloadfill.refresh(str(root), is_payload_event)
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
        payloadfill.refresh(str(root), is_payload_event)
    monkeypatch.undo()
    for key in [*keys, "gone.md"]:
        assert named_on_host(str(root / key), str(root)) is not None, key
        assert _named(root, key) is not False, key
    assert _named(root, "new.md") is not False
    payloadfill.refresh(str(root), is_payload_event)
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
    from eidolons.io import payloadindex
    from eidolons.io.payloadindex import named_on_host
    from eidolons.trace import payloadfill

    limit = 4096
    monkeypatch.setattr(payloadindex, "MAX_EVIDENCE_BYTES", limit)
    monkeypatch.setattr(payloadfill, "MAX_EVIDENCE_BYTES", limit)
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


# --- (b) check's parallel default in a hostile environment (ADR 0115) -----------------

_SIGNAL_PARENT = """
import os, signal, sys
from eidolons.gates import checker
from eidolons.cli.main import main
PARENT = os.getpid()
check = checker._Job.check
def signalling(self, path):
    if path.endswith("r0300.envelope.json") and os.getpid() != PARENT:
        os.kill(PARENT, int(sys.argv[1]))
    return check(self, path)
checker._Job.check = signalling
checker.auto_jobs = lambda: 2
sys.exit(main(["check", "."]))
"""

_FORK_FAILS = """
import errno, os, sys
from eidolons.gates import checker
from eidolons.cli.main import main
real, forks = os.fork, []
def fork():
    forks.append(1)
    if len(forks) > int(sys.argv[1]):  # RLIMIT_NPROC reached (root is not bound by it)
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
    return real()
os.fork = fork
checker.auto_jobs = lambda: 3
sys.exit(main(["check", ".", *sys.argv[2:]]))
"""


@pytest.fixture(scope="module")
def envelopes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from eidolons.gates.checker import AUTO_MIN
    from tests.test_check_jobs import _many_envelopes

    root = tmp_path_factory.mktemp("many15b")
    _many_envelopes(root, AUTO_MIN + 8)
    return root


@pytest.fixture(scope="module")
def one_process(envelopes: Path) -> subprocess.CompletedProcess[bytes]:
    return _python(envelopes, "-m", "eidolons", "check", ".", "--jobs", "1", text=False)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_a_signal_that_kills_the_parent_mid_run_takes_its_workers_with_it(
    envelopes: Path, sig: int
) -> None:
    # HOLE (fixed, ADR 0139): killed by a signal it does not handle, the parent of a
    # parallel run left its workers waiting forever on the task queue (they hold its
    # write end), holding the run's output pipe open: `check . | head`, a CI step or the
    # host's tool call reading its output hung, and the workers stayed
    proc = subprocess.Popen(
        [sys.executable, "-c", _SIGNAL_PARENT, str(int(sig))],
        cwd=envelopes,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("the run's output never ended: its workers outlived the parent")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == -sig  # as `--jobs 1` killed so: never a pass
    assert b"Result:" not in out


@pytest.mark.parametrize("forks", [0, 1, 2])
def test_workers_that_cannot_all_be_forked_give_the_one_process_findings(
    envelopes: Path, one_process: subprocess.CompletedProcess[bytes], forks: int
) -> None:
    # a process limit reached after `forks` workers: the run is checked in this process,
    # its output and exit code those of `--jobs 1`
    proc = _python(envelopes, "-c", _FORK_FAILS, str(forks), text=False)
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        one_process.returncode,
        one_process.stdout,
        one_process.stderr,
    )


@pytest.mark.parametrize(
    "how", ["stdin-closed", "stderr-closed", "stdout-closed", "stdout-full", "head-1", "json-head"]
)
def test_the_default_in_a_hostile_shell_is_the_one_process_run(envelopes: Path, how: str) -> None:
    # a closed stdin, stdout or stderr, a full disk, a reader that stops after one line
    # (SIGPIPE is ignored by Python: BrokenPipeError): the same exit code and output as
    # `--jobs 1` (a usage line, a one-line internal error), no hang
    fmt = " --json" if how == "json-head" else ""
    redirect = {
        "stdin-closed": " <&-",
        "stderr-closed": " 2>&-",
        "stdout-closed": " >&-",
        "stdout-full": " >/dev/full",
    }.get(how, "")
    pipe = {"head-1": " | head -1", "json-head": " | head -1"}.get(
        how, "" if redirect[:2] == " >" else " | cat"
    )
    runs = []
    for jobs in ("", " --jobs 1"):
        command = (
            f'"{sys.executable}" -m eidolons check .{fmt}{jobs}{redirect}{pipe}; '
            'echo "rc=${PIPESTATUS[0]}"'
        )
        proc = subprocess.run(
            ["bash", "-c", command],
            cwd=envelopes,
            env=clean_env(),
            capture_output=True,
            timeout=60,
        )
        runs.append((proc.stdout, proc.stderr))
    assert runs[0] == runs[1]
    assert b"Traceback" not in runs[0][1] and runs[0][1].count(b"\n") <= 1
    # a run whose output was lost is never a pass
    assert (b"rc=0\n" in runs[0][0]) == (how in ("stdin-closed", "stderr-closed")), runs[0]
