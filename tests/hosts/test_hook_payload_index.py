"""The payload index (ADR 0018; on the host since ADR 0018): written by the gates with each
emit or verification event, read by the hook's fast path so that a payload the trace names
is gated even when its envelope was deleted."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from eidolons.io.paths import entry, index_path, payload_index
from tests.hosts.conftest import Handoff, needs_samples, sample

pytestmark = needs_samples


def host_index(handoff: Handoff) -> Path:
    return Path(index_path(str(handoff.root)))


def read(handoff: Handoff, path: Path, agent: str | None = "vigil") -> dict[str, object]:
    doc = sample("hook_stdin_read_main", handoff.root)
    doc["tool_input"] = {"file_path": str(path)}
    if agent is not None:
        doc.update(agent_id="ae03233dc7de3192d", agent_type=agent)
    return doc


def hook_in_process(handoff: Handoff, doc: dict[str, object]) -> tuple[int, str]:
    from eidolons.hosts.hook.fast import main

    err = io.StringIO()
    code = main(
        ["claude-code", "--root", str(handoff.root)],
        stdin=io.BytesIO(json.dumps(doc).encode()),
        stdout=io.StringIO(),
        stderr=err,
    )
    return code, err.getvalue()


def forbid_full_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    import eidolons.gates.trigger

    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("the full find_handoff rule ran on the fast path")

    monkeypatch.setattr(eidolons.gates.trigger, "find_handoff", boom)


def test_emit_writes_the_payload_path_to_the_index(handoff: Handoff) -> None:
    assert payload_index(str(handoff.root.resolve())) == b"\n" + entry("handoff.md")


def test_verify_adds_to_the_index_and_a_new_index_is_filled_from_the_traces(
    handoff: Handoff,
) -> None:
    host_index(handoff).unlink()
    assert payload_index(str(handoff.root.resolve())) is None  # traces, no index
    handoff.verify()
    # the emit event already on disk (read in), and the verify_pass: one entry per path
    assert payload_index(str(handoff.root.resolve())) == b"\n" + entry("handoff.md")


def test_a_path_in_the_index_is_refused_once_its_envelope_is_deleted(handoff: Handoff) -> None:
    handoff.envelope.unlink()
    handoff.payload.write_text("# rewritten\n")
    for agent in ("vigil", None):
        r = handoff.hook("claude-code", read(handoff, handoff.payload, agent))
        assert r.code == 2, r
        assert "-verify-incoming] REFUSE: UNVERIFIED from " in r.err.splitlines()[0]


def test_an_unrelated_file_is_allowed_without_the_full_rule(
    handoff: Handoff, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = handoff.root / "src.py"
    source.write_text("print('hello')\n")
    forbid_full_rule(monkeypatch)
    for agent in ("vigil", None):
        assert hook_in_process(handoff, read(handoff, source, agent)) == (0, "")


def test_no_index_and_no_trace_allows_an_unrelated_file_fast(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "fresh"
    (root / ".eidolons").mkdir(parents=True)
    (root / "src.py").write_text("x = 1\n")
    forbid_full_rule(monkeypatch)
    bare = Handoff(root, root / "src.py", root / "none", {})
    assert hook_in_process(bare, read(bare, root / "src.py")) == (0, "")


@pytest.mark.parametrize("damage", ["missing", "headerless", "directory", "oversized"])
def test_an_index_that_cannot_tell_falls_back_to_the_full_rule(
    handoff: Handoff, damage: str
) -> None:
    index = host_index(handoff)
    index.unlink()
    if damage == "headerless":
        index.write_bytes(entry("other.md"))
    elif damage == "directory":
        index.mkdir()
    elif damage == "oversized":
        from eidolons.io.paths import HEADER, MAX_INDEX_BYTES

        with index.open("wb") as fh:
            fh.write(HEADER)
            fh.truncate(MAX_INDEX_BYTES + 1)
    handoff.envelope.unlink()
    source = handoff.root / "src.py"
    source.write_text("print('hello')\n")
    for agent in ("vigil", None):
        r = handoff.hook("claude-code", read(handoff, handoff.payload, agent))
        assert r.code == 2, (damage, r)
        assert "-verify-incoming] REFUSE: UNVERIFIED from " in r.err.splitlines()[0]
        ok = handoff.hook("claude-code", read(handoff, source, agent))
        assert (ok.code, ok.err) == (0, ""), (damage, ok)


def test_an_index_that_cannot_be_written_leaves_the_append_and_the_full_rule(
    handoff: Handoff,
) -> None:
    # ADR 0018: the index says "not named" only for the traces it covers, so an append
    # whose index cannot be written stands (the line is the record) and the hook, finding
    # the trace not covered, takes the full rule (this test asserted the opposite, a
    # refused append, while the index was trusted for any trace it had not seen)
    index = host_index(handoff)
    index.unlink()
    index.mkdir()
    traces = sorted((handoff.root / ".eidolons" / ".trace").glob("*.jsonl"))
    before = [t.read_bytes() for t in traces]
    r = handoff.cli("verify-envelope", handoff.envelope, "--block")
    assert r.code == 0, r
    assert [t.read_bytes() for t in traces] != before  # the verdict is recorded
    assert payload_index(str(handoff.root.resolve())) is None  # the index cannot tell
    handoff.envelope.unlink()
    r = handoff.hook("claude-code", read(handoff, handoff.payload))
    assert r.code == 2 and "-verify-incoming] REFUSE: UNVERIFIED from " in r.err, r
