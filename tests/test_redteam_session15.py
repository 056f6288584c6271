"""Red team of what landed in session 15 (since 977e902): the payload index on the host
(ADR 0110), ``check``'s parallel default (ADR 0115), the JSON number rule (ADR 0128),
emit's order (ADR 0127), the CLI's broken-import path (ADR 0125), the on_pass error
(ADR 0126) and memory's speed work (ADRs 0120-0124).

The adversary is an agent in the pipeline: it writes any file of the project and runs
whatever its host lets it run (``eidolons`` included, with the resource limits and the
environment it likes), but it cannot write the host's config directory, nor set the
environment of the hook the host runs. Each test is an attack; a hole found was written
red first, then fixed (the commit says which)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from eidolons.knownhandoff import rules_out
from tests.conftest import Run, clean_env, emit_cmd, emit_payload, trace_files

Cli = Callable[..., Run]


def refused(r: Run) -> bool:
    return r.code == 3 and "REFUSE: UNVERIFIED" in r.err


def read_event(root: Path, path: Path, agent: str | None = "vigil") -> bytes:
    doc: dict[str, object] = {
        "session_id": "s",
        "transcript_path": str(root / "t.jsonl"),
        "cwd": str(root),
        "hook_event_name": "PreToolUse",
        "tool_name": "Read",
        "tool_input": {"file_path": str(path)},
        "tool_use_id": "toolu_1",
    }
    if agent is not None:
        doc.update(agent_id="ae03233dc7de3192d", agent_type=agent)
    return json.dumps(doc).encode()


def hook(root: Path, path: Path, agent: str | None = "vigil") -> tuple[int, str]:
    """The real hook entry point (what ``eidolons init`` registers), in-process, in the
    host's environment (the test process's: the agent's variables never reach it)."""
    from eidolons.hooks.fast import main

    err = io.StringIO()
    code = main(
        ["claude-code", "--root", str(root)],
        stdin=io.BytesIO(read_event(root, path, agent)),
        stdout=io.StringIO(),
        stderr=err,
    )
    return code, err.getvalue()


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


def host_index(root: Path) -> Path:
    from eidolons.payloadindex import index_path

    return Path(index_path(str(root)))


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
    from eidolons.payloadindex import HEAD_BYTES, read_head

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
    from eidolons.payloadindex import HEAD_BYTES, head, named_on_host, read_head
    from eidolons.tracestore import is_payload_event
    from eidolons.tracestore.jsonl import JsonlStore
    from eidolons.tracestore.payloadfill import refresh

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
    saved = {t: t.read_bytes() for t in trace_files(root)}
    found = read_head(old[:HEAD_BYTES])
    assert found is not None
    odd = head(found[0] + 1, 0)
    for cut in range(HEAD_BYTES, len(new) + 1, 5):
        torn = odd + new[HEAD_BYTES:cut] + old[cut:]
        index.write_bytes(torn)
        for key in old_keys:
            assert named_on_host(str(root / key), str(root)) is not None, (cut, key)
        # the next writer keeps every old entry, though the traces no longer name them
        for trace in saved:
            trace.write_bytes(b"")
        refresh(str(root), is_payload_event)
        for key in old_keys:
            assert named_on_host(str(root / key), str(root)) is not None, (cut, key)
        for trace, data in saved.items():
            trace.write_bytes(data)
        index.write_bytes(new)


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
