"""What ``emit`` records agrees with what it put on disk (ADR 0006): the envelope is
linked into place first, then the ``emit`` event is appended; a link that fails leaves
no event naming an envelope that never appeared, and a trace that fails takes the
envelope back (a ``--force``-replaced one is restored byte for byte)."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eidolons.errors import TraceWriteError
from tests.conftest import Run, emit_cmd, read_trace, trace_files

Cli = Callable[..., Run]


def _emit_events(project: Path) -> list[dict[str, Any]]:
    return [e for t in trace_files(project) for e in read_trace(t) if e["event"] == "emit"]


def _payload(project: Path) -> Path:
    payload = project / "handoff" / "report.md"
    payload.parent.mkdir(parents=True, exist_ok=True)
    payload.write_text("# Report\n")
    return payload


@pytest.mark.parametrize("failure", ["EPERM", "EEXIST-race"])
def test_a_link_that_fails_records_nothing(
    failure: str, cli: Cli, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payload = _payload(project)
    envelope = payload.with_suffix(".envelope.json")

    def failing_link(src: Any, dst: Any, *args: Any, **kw: Any) -> None:
        if failure == "EEXIST-race":  # another writer's envelope appeared after the check
            Path(dst).write_text('{"theirs": true}\n')
            raise FileExistsError(errno.EEXIST, "File exists", str(dst))
        raise PermissionError(errno.EPERM, "Operation not permitted", str(dst))

    monkeypatch.setattr(os, "link", failing_link)
    r = cli(*emit_cmd(payload))
    assert r.code == 2, r.err
    assert r.err.count("\n") == 1 and "Traceback" not in r.err
    assert _emit_events(project) == []  # before: an emit event for an envelope never written
    left = {payload.name}
    if failure == "EEXIST-race":
        assert envelope.read_text() == '{"theirs": true}\n'  # theirs, untouched
        left.add(envelope.name)
    assert {p.name for p in payload.parent.iterdir()} == left  # no temporary left


def _failing_append(monkeypatch: pytest.MonkeyPatch) -> None:
    from eidolons.trace.log import JsonlStore

    def append(self: Any, *args: Any, **kw: Any) -> Any:
        raise TraceWriteError("trace not writable (test)")

    monkeypatch.setattr(JsonlStore, "append", append)


def test_a_trace_that_fails_takes_the_envelope_back(
    cli: Cli, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payload = _payload(project)
    _failing_append(monkeypatch)
    r = cli(*emit_cmd(payload))
    assert r.code == 2 and "trace not writable (test)" in r.err, r.err
    assert [p.name for p in payload.parent.iterdir()] == [payload.name]


def test_a_trace_that_fails_under_force_restores_the_old_envelope(
    cli: Cli, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payload = _payload(project)
    assert cli(*emit_cmd(payload)).code == 0
    envelope = payload.with_suffix(".envelope.json")
    before, inode = envelope.read_bytes(), envelope.stat().st_ino
    _failing_append(monkeypatch)
    r = cli(*emit_cmd(payload, "--force", objective="a new one"))
    assert r.code == 2, r.err
    assert envelope.read_bytes() == before and envelope.stat().st_ino == inode
    assert sorted(p.name for p in payload.parent.iterdir()) == sorted([payload.name, envelope.name])
    assert len(_emit_events(project)) == 1


def test_every_emit_event_names_an_envelope_on_disk(cli: Cli, project: Path) -> None:
    payload = _payload(project)
    r = cli(*emit_cmd(payload, "--json"))
    assert r.code == 0, r.err
    (event,) = _emit_events(project)
    assert event["message_id"] == r.json()["envelope"]["message_id"]
    assert payload.with_suffix(".envelope.json").is_file()
    r = cli(*emit_cmd(payload, "--force", "--json"))
    assert r.code == 0 and len(_emit_events(project)) == 2
    assert [p.name for p in payload.parent.iterdir() if p.name.startswith(".")] == []


@pytest.fixture
def signing(project: Path, tmp_path: Path) -> Any:
    from tests.test_sender_signatures import Pipeline

    p = Pipeline(project, tmp_path)
    assert p.cli("keys", "init", "--role", "sender:atlas", env=p.sender).code == 0
    return p


def test_a_trace_that_fails_takes_the_signature_back_too(
    signing: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--sign``: the signature sidecar is placed before the envelope; a failed record
    leaves neither (a first emit) or both as they were (``--force``): never a new
    signature beside the old envelope, which would make a good hand-off fail its check."""
    from tests.test_sender_signatures import sig_of

    payload, envelope, r = signing.emit("--sign")
    assert r.code == 0, r.err
    before = (envelope.read_bytes(), sig_of(envelope).read_bytes())
    _failing_append(monkeypatch)
    _, _, r = signing.emit("--sign", "--force")
    assert r.code == 2 and "trace not writable (test)" in r.err, r.err
    assert (envelope.read_bytes(), sig_of(envelope).read_bytes()) == before
    other = payload.with_name("other.md")
    other.write_text("# other\n")
    _, other_envelope, r = signing.emit("--sign", name="h/other.md")
    assert r.code == 2
    assert not other_envelope.exists() and not sig_of(other_envelope).exists()
    assert sorted(p.name for p in payload.parent.iterdir()) == sorted(
        [payload.name, envelope.name, sig_of(envelope).name, other.name]
    )


def test_an_emit_refused_because_the_envelope_exists_leaves_its_signature(
    signing: Any,
) -> None:
    """Without ``--force`` over a signed hand-off: "exists; use --force", and the old
    signature is still the one beside the old envelope (the signature is now placed
    before the envelope's link, which is where a race would refuse: it is taken back)."""
    from tests.test_sender_signatures import sig_of

    _, envelope, r = signing.emit("--sign")
    assert r.code == 0, r.err
    before = (envelope.read_bytes(), sig_of(envelope).read_bytes())
    _, _, r = signing.emit("--sign")
    assert r.code == 2 and "use --force" in r.err, r.err
    assert (envelope.read_bytes(), sig_of(envelope).read_bytes()) == before


def test_an_envelope_that_appears_before_the_link_leaves_the_old_signature(
    signing: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race the early "exists" check cannot see: another writer's signed envelope
    appears between that check and the link. Theirs stays whole, signature included."""
    from tests.test_sender_signatures import sig_of

    _, envelope, r = signing.emit("--sign", name="h/theirs.md")
    assert r.code == 0, r.err
    theirs = (envelope.read_bytes(), sig_of(envelope).read_bytes())
    envelope.rename(envelope.with_name("aside"))
    sig_of(envelope).rename(envelope.with_name("aside.sig"))
    real_link = os.link

    def racing(src: Any, dst: Any, *args: Any, **kw: Any) -> None:
        if Path(dst) == envelope:  # they put theirs back just before our link
            envelope.with_name("aside").rename(envelope)
        real_link(src, dst, *args, **kw)

    monkeypatch.setattr(os, "link", racing)
    sig_of(envelope).write_bytes(theirs[1])  # their signature was already back
    _, _, r = signing.emit("--sign", name="h/theirs.md")
    assert r.code == 2 and "use --force" in r.err, r.err
    assert (envelope.read_bytes(), sig_of(envelope).read_bytes()) == theirs
    assert _emit_events(signing.root)[-1]["message_id"] == json.loads(theirs[0])["message_id"]
