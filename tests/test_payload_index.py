"""The host's payload index (ADR 0018): what it covers is what the full search reads, read
by the same rule whether it is read at once or a piece at a time; writers in several
processes never leave it claiming a trace it has not read; the hook reads it without
``hashlib``, ``pathlib`` or the trace store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from eidolons.io import config as state
from eidolons.io import paths as knownhandoff
from eidolons.io.paths import entry, index_path, payload_index, trace_states
from eidolons.trace import store as tracestore
from eidolons.trace.indexes import refresh
from eidolons.trace.log import MAX_LINE_BYTES, JsonlStore, payload_search_lines
from eidolons.trace.store import first_payload_event, is_payload_event


def emit_line(path: str, **extra: Any) -> bytes:
    event = {"event": "emit", "message_id": "m", "thread_id": "t", "payload_path": path}
    return json.dumps({**event, **extra}, separators=(",", ":")).encode()


def full_search_names(root: Path, key: str) -> bool:
    return first_payload_event(payload_search_lines(root), [key]) is not None


def entries(root: Path) -> bytes | None:
    return payload_index(str(root.resolve()))


def test_the_state_paths_are_spelled_once() -> None:
    assert knownhandoff.TRACE_DSN_ENV == tracestore.DSN_ENV
    assert knownhandoff.TRACE_DIR == state.TRACE_DIR


def test_read_piece_by_piece_it_names_what_the_full_search_finds(tmp_path: Path) -> None:
    root = tmp_path / "p"
    trace = root / ".eidolons" / ".trace" / "t.jsonl"
    trace.parent.mkdir(parents=True)
    pieces = [
        emit_line("a.md") + b"\n",
        # an overlong line: the search reads it in pieces of MAX_LINE_BYTES + 1, and the
        # piece after the first is judged on its own; here it is an event naming c.md
        b"x" * (MAX_LINE_BYTES + 1) + emit_line("c.md") + b"\n",
        emit_line("spaced.md").replace(b'"payload_path":', b'"payload_path": ') + b"\n",
        b"not json\n",
        emit_line("torn.md"),  # a torn last line: read as a line by the search
        b"\n" + emit_line("after-torn.md") + b"\n",
        emit_line("last.md") + b"\n",
    ]
    keys = ["a.md", "c.md", "spaced.md", "torn.md", "after-torn.md", "last.md", "nope.md"]
    root_s = str(root.resolve())
    with trace.open("ab") as fh:
        for piece in pieces:
            fh.write(piece)
            fh.flush()
            refresh(root_s, is_payload_event)  # a piece at a time, as appends come
            named = entries(root)
            assert named is not None  # it covers the trace as it is now
            for key in keys:
                if full_search_names(root, key):  # never "not named" for a named path
                    assert b"\n" + entry(key) in named, key
    whole = tmp_path / "whole"
    (whole / ".eidolons" / ".trace").mkdir(parents=True)
    (whole / ".eidolons" / ".trace" / "t.jsonl").write_bytes(trace.read_bytes())
    refresh(str(whole.resolve()), is_payload_event)
    assert entries(whole) == entries(root)  # at once or piece by piece: the same entries


def test_a_rewrite_before_where_it_stopped_is_read_again(tmp_path: Path) -> None:
    root = tmp_path / "p"
    trace = root / ".eidolons" / ".trace" / "t.jsonl"
    trace.parent.mkdir(parents=True)
    trace.write_bytes(emit_line("a.md") + b"\n")
    refresh(str(root.resolve()), is_payload_event)
    # the same file, rewritten in place and grown: the bytes before the point it stopped
    # changed, so it is read from the start
    with trace.open("r+b") as fh:
        fh.write(emit_line("b.md") + b"\n" + emit_line("c.md") + b"\n")
    assert entries(root) is None  # not covered as it is now
    refresh(str(root.resolve()), is_payload_event)
    named = entries(root)
    assert named is not None
    assert all(b"\n" + entry(k) in named for k in ("a.md", "b.md", "c.md"))


def test_states_are_what_the_full_search_reads(tmp_path: Path) -> None:
    root = tmp_path / "p"
    assert trace_states(str(root), None) == []
    trace_dir = root / ".eidolons" / ".trace"
    trace_dir.mkdir(parents=True)
    (trace_dir / "a.jsonl").write_bytes(b"x\n")
    (trace_dir / "notes.txt").write_bytes(b"ignored\n")
    ((name, _, _, size, _),) = trace_states(str(root), None) or [("", 0, 0, 0, 0)]
    assert (name, size) == ("a.jsonl", 2)
    assert trace_states(str(root), 1) is None  # past the bound
    os.symlink(trace_dir / "a.jsonl", trace_dir / "b.jsonl")
    assert trace_states(str(root), None) is None  # a link: the search refuses it


def _writer(root: str, thread: str, count: int) -> None:
    store = JsonlStore(Path(root))
    for i in range(count):
        event = {
            "event": "emit",
            "message_id": f"{thread}-{i}",
            "thread_id": thread,
            "payload_path": f"{thread}/{i}.md",
        }
        store.append(thread, event)


def test_writers_in_several_processes_leave_an_exact_index(tmp_path: Path) -> None:
    import multiprocessing as mp

    root = tmp_path / "p"
    (root / ".eidolons").mkdir(parents=True)
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(root), t, 25)) for t in ("ta", "tb", "tc")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    named = entries(root)
    assert named is not None  # the last writer saw every trace as it is
    for thread in ("ta", "tb", "tc"):
        for i in range(25):
            assert b"\n" + entry(f"{thread}/{i}.md") in named


def test_the_index_file_is_private(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / ".eidolons").mkdir(parents=True)
    JsonlStore(root).append("t", {"event": "emit", "message_id": "m", "payload_path": "x.md"})
    path = Path(index_path(str(root)))
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o077 == 0


FAST = (
    "import sys; from eidolons.cli.main import main; code = main(['hook', *sys.argv[1:]]); "
    "print(' '.join(sorted(sys.modules)), file=sys.stderr); sys.exit(code)"
)


@pytest.mark.parametrize("covered", [True, False])
def test_the_hook_reads_the_index_without_the_heavy_modules(tmp_path: Path, covered: bool) -> None:
    root = tmp_path / "p"
    (root / ".eidolons").mkdir(parents=True)
    (root / "src.py").write_text("x = 1\n")
    JsonlStore(root).append("t", {"event": "emit", "message_id": "m", "payload_path": "x.md"})
    if not covered:  # another tool's append: the hook takes the full rule
        with (root / ".eidolons" / ".trace" / "t.jsonl").open("ab") as fh:
            fh.write(emit_line("y.md") + b"\n")
    doc = {
        "session_id": "s",
        "cwd": str(root),
        "hook_event_name": "PreToolUse",
        "tool_name": "Read",
        "tool_input": {"file_path": str(root / "src.py")},
        "tool_use_id": "t",
    }
    proc = subprocess.run(
        [sys.executable, "-I", "-c", FAST, "claude-code", "--root", str(root)],
        input=json.dumps(doc),
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("EIDOLONS_")},
    )
    *lines, modules = proc.stderr.rstrip("\n").split("\n")
    assert proc.returncode == 0, lines
    loaded = set(modules.split())
    heavy = {"hashlib", "_hashlib", "pathlib", "json", "eidolons.trace.log", "eidolons.trace.store"}
    if covered:
        assert sorted((heavy | {"eidolons.io.config"}) & loaded) == []
    else:
        assert "eidolons.io.config" in loaded  # the full rule ran, and allowed the source file


def test_an_index_left_half_written_cannot_tell(tmp_path: Path) -> None:
    from eidolons.io.paths import HEAD_BYTES, head, read_head

    root = tmp_path / "p"
    (root / ".eidolons").mkdir(parents=True)
    JsonlStore(root).append("t", {"event": "emit", "message_id": "m", "payload_path": "x.md"})
    path = Path(index_path(str(root)))
    found = read_head(path.read_bytes()[:HEAD_BYTES])
    assert found is not None and found[0] % 2 == 0
    with path.open("r+b") as fh:  # a writer that died after its first header write
        fh.write(head(found[0] + 1, 0))
    assert entries(root) is None
    JsonlStore(root).append("t", {"event": "emit", "message_id": "n", "payload_path": "y.md"})
    named = entries(root)  # the next writer read every trace again
    assert named is not None and b"\n" + entry("x.md") in named and b"\n" + entry("y.md") in named
    again = read_head(path.read_bytes()[:HEAD_BYTES])
    assert again is not None and again[0] > found[0] + 1 and again[0] % 2 == 0


def test_a_reader_during_rewrites_sees_whole_indexes_only(tmp_path: Path) -> None:
    import multiprocessing as mp

    root = tmp_path / "p"
    (root / ".eidolons").mkdir(parents=True)
    JsonlStore(root).append("ta", {"event": "emit", "message_id": "m", "payload_path": "0.md"})
    ctx = mp.get_context("fork")
    proc = ctx.Process(target=_writer, args=(str(root), "ta", 60))
    proc.start()
    seen: list[int] = []
    while proc.is_alive() or not seen:
        named = entries(root)
        if named is None:
            continue  # being rewritten, or the trace just grew: the full rule
        lines = named[1:].splitlines()
        assert all(x.startswith(b'"') and x.endswith(b'"') for x in lines), named
        seen.append(len(lines))
    proc.join(60)
    assert proc.exitcode == 0
    assert seen == sorted(seen)  # entries are never lost from one whole index to the next
    final = entries(root)
    assert final is not None and len(final[1:].splitlines()) == 61


def test_an_append_writes_the_index_tail_only_and_leaves_it_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append to a large index rewrites what follows its entries (the new entries and
    the coverage), not the entries it has: an append costs what it reads, not what the
    index holds. The result is the index a fresh fill of the same traces makes, and a file
    read again from its start (rewritten before where the index stopped: every key found
    again, past the few the writer looks up in the block itself) adds no entry twice."""

    root = tmp_path / "p"
    trace = root / ".eidolons" / ".trace" / "t.jsonl"
    trace.parent.mkdir(parents=True)
    trace.write_bytes(b"".join(emit_line(f"out/{i:05d}.md") + b"\n" for i in range(5000)))
    root_s = str(root.resolve())
    refresh(root_s, is_payload_event)
    writes: list[int] = []
    real_pwrite = os.pwrite

    def pwrite(fd: int, data: bytes, offset: int) -> int:
        writes.append(len(data))
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr("eidolons.trace.indexes.os.pwrite", pwrite)
    for i in range(5000, 5003):
        with trace.open("ab") as fh:
            fh.write(emit_line(f"out/{i:05d}.md") + b"\n" + emit_line("out/00007.md") + b"\n")
        refresh(root_s, is_payload_event)
    monkeypatch.undo()
    assert len(writes) == 9 and max(writes) < 1024, writes  # two headers and a tail each
    named = entries(root)
    assert named is not None and named.count(b"\n" + entry("out/00007.md")) == 1
    whole = tmp_path / "whole"
    (whole / ".eidolons" / ".trace").mkdir(parents=True)
    (whole / ".eidolons" / ".trace" / "t.jsonl").write_bytes(trace.read_bytes())
    refresh(str(whole.resolve()), is_payload_event)
    assert entries(whole) == named  # appended to or filled at once: the same entries
    data = trace.read_bytes()
    cut = data.rindex(b"00007")  # same size, the last line changed: read from the start
    trace.write_bytes(data[:cut] + b"00009" + data[cut + 5 :])
    writes.clear()
    monkeypatch.setattr("eidolons.trace.indexes.os.pwrite", pwrite)
    refresh(root_s, is_payload_event)
    monkeypatch.undo()
    assert max(writes) < 1024, writes  # nothing new: the entries stay as they are
    again = entries(root)
    assert again is not None and sorted(again.splitlines()) == sorted(named.splitlines())
