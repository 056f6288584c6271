"""The MCP server's ``emit`` in a sealed project (ADR 0015) copies a draft into the hand-off
directory: it copies exactly the file it judged to lie outside the sealed directories.

The server runs outside the sandbox, where the hand-offs, the memory store and the keys are
readable; the draft's path is the caller's, and the sandboxed shell can write the project:
it can make the draft a link and swap it, again and again, between a plain file and a
hand-off (a link's target is only a name; the shell need not see it). Whatever the swap, no
copy holds a hand-off's bytes, and a draft that is no regular file (a FIFO) is an error
reply at once, never a server that waits for ever."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from eidolons.hosts.mcp.tools import Toolbox
from tests.conftest import emit_payload, run_cli

SECRET = "SEALED-HANDOFF-BYTES-4e1d"
DRAFT = "# Prompt\n\nplain draft\n"
ATTEMPTS = 300


@pytest.fixture
def sealed_root(tmp_path: Path) -> Path:
    """A project set up by ``init --hosts claude-code`` with one hand-off (atlas -> vigil)
    in ``.eidolons/handoffs/``, verified by nobody."""
    root = tmp_path / "proj"
    root.mkdir()
    assert run_cli("init", "--hosts", "claude-code", cwd=root).code == 0
    cli = lambda *a, **kw: run_cli(*a, cwd=root, **kw)  # noqa: E731
    emit_payload(cli, root, "drafts/secret.md", f"# Scout report\n\n## Decision target\n{SECRET}\n")
    assert SECRET in (root / ".eidolons" / "handoffs" / "secret.md").read_text()
    (root / "drafts" / "secret.md").unlink()
    return root


def emit(box: Toolbox, draft: Path) -> tuple[bool, str, str | None]:
    reply = box.emit(
        str(draft), to="vigil", performative="REQUEST", kind="prompt", objective="o", sender="human"
    )
    placed = None if reply.is_error else (reply.structured or {}).get("payload_path")
    return reply.is_error, reply.text, placed


@pytest.mark.parametrize("swapped_in", ["handoff", "outside"])
def test_emit_never_copies_a_file_swapped_in_for_the_draft(
    sealed_root: Path, swapped_in: str
) -> None:
    """The draft's name swapped for a hand-off, or for a file outside the project (which
    the server would refuse as a draft: ``/proc/self/environ``, a key elsewhere)."""
    root = sealed_root
    handoffs = root / ".eidolons" / "handoffs"
    evil = handoffs / "secret.md"
    if swapped_in == "outside":
        evil = root.parent / "outside.md"
        evil.write_text(f"{SECRET}\n")
    plain = root / "plain.md"
    plain.write_text(DRAFT)
    draft = root / "draft.md"
    box = Toolbox(root, memory=False, log=lambda line: None)
    stop = threading.Event()
    swaps = [0]

    def swapper() -> None:  # the shell's part: the draft's name, now a plain file, now a hand-off
        tmp = root / ".draft-swap"
        while not stop.is_set():
            for target in (evil, plain):
                tmp.unlink(missing_ok=True)
                tmp.symlink_to(target)
                os.replace(tmp, draft)
            swaps[0] += 1

    thread = threading.Thread(target=swapper, daemon=True)
    thread.start()
    try:
        outcomes = [emit(box, draft) for _ in range(ATTEMPTS)]
    finally:
        stop.set()
        thread.join()
    assert swaps[0] > 0
    placed = [p for failed, _, p in outcomes if not failed and p is not None]
    # the draft changed all through the emits: the plain one was copied into the hand-offs,
    # the swapped one refused
    assert placed, outcomes[:5]
    assert any(failed for failed, _, _ in outcomes), outcomes[:5]
    leaked = [p for p in placed if SECRET in Path(p).read_text()]
    assert not leaked, leaked
    copies = [p for p in handoffs.iterdir() if p.name != "secret.md" and p.suffix == ".md"]
    assert all(p.read_text() == DRAFT for p in copies), [p.read_text() for p in copies]


def test_emit_of_a_fifo_is_an_error_reply_not_a_wait(sealed_root: Path) -> None:
    os.mkfifo(sealed_root / "pipe.md")
    box = Toolbox(sealed_root, memory=False, log=lambda line: None)
    done: list[tuple[bool, str, str | None]] = []
    thread = threading.Thread(target=lambda: done.append(emit(box, sealed_root / "pipe.md")))
    thread.daemon = True
    thread.start()
    thread.join(10)  # a bound on a hang, not a wait for an event: the reply comes at once
    if thread.is_alive():  # unblock the server's open so the test process can end
        os.close(os.open(sealed_root / "pipe.md", os.O_WRONLY | os.O_NONBLOCK))
        thread.join()
        pytest.fail("emit of a FIFO waited for a writer")
    failed, text, _ = done[0]
    assert failed and "not a regular file" in text, text


@pytest.mark.parametrize("suffix", [".receipt.json", ".envelope.sig", ".envelope.json"])
def test_emit_never_places_a_file_named_as_the_gates_own(sealed_root: Path, suffix: str) -> None:
    """A draft named as a hand-off's receipt, sender signature or envelope is placed under
    another name, or refused: in the hand-off directory only the gate writes those."""
    draft = sealed_root / f"secret{suffix}"
    draft.write_text(DRAFT)
    gates = sealed_root / ".eidolons" / "handoffs" / f"secret{suffix}"
    before = gates.read_bytes() if gates.exists() else None
    box = Toolbox(sealed_root, memory=False, log=lambda line: None)
    failed, text, placed = emit(box, draft)
    assert failed or placed is not None, text
    assert placed is None or not Path(placed).name.endswith(suffix), placed
    assert (gates.read_bytes() if gates.exists() else None) == before


def test_emit_of_a_link_to_a_handoff_writes_no_envelope_outside_the_handoffs(
    sealed_root: Path,
) -> None:
    """A link in the project to a hand-off is no draft: emit refuses it, and writes no
    envelope beside the link (outside the sealed directories, where the shell writes)."""
    link = sealed_root / "link.md"
    link.symlink_to(sealed_root / ".eidolons" / "handoffs" / "secret.md")
    box = Toolbox(sealed_root, memory=False, log=lambda line: None)
    failed, text, _ = emit(box, link)
    assert failed, text
    assert not (sealed_root / "link.envelope.json").exists()
