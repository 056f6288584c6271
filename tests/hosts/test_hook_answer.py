"""The hook's answer is the last thing it does, and nothing turns a deny into exit 1.

Claude Code treats exit 1 as a non-blocking error (the tool runs); only exit 2 blocks.
The time budget (SIGALRM) firing while a deny is being written, or a stream that cannot be
written, must still end in the deny: the alarm is disarmed before any answer, and a
failed write is a block (exit 2), never an exception out of the hook.
"""

from __future__ import annotations

import io
import json
import signal
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.hosts.conftest import Handoff, sample

VIGIL_READ = "hook_stdin_read_subagent_vigil"
REFUSE = "[vigil-verify-incoming] REFUSE: INTEGRITY_MISMATCH from atlas"


@pytest.fixture
def quiet_alarm() -> Iterator[None]:
    """A SIGALRM the hook no longer listens for must not kill the test process (its
    default action): the hook restores this handler when it disarms."""
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: None)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def fire() -> None:
    """What the budget's timer does when it runs out: SIGALRM, now."""
    signal.raise_signal(signal.SIGALRM)


class Stream(io.StringIO):
    """A host's pipe: the alarm fires on the first ``write`` or ``flush`` (``fire_on``),
    or the pipe is closed (``closed_pipe``)."""

    def __init__(self, fire_on: str | None = None, closed_pipe: bool = False) -> None:
        super().__init__()
        self.fire_on, self.closed_pipe = fire_on, closed_pipe

    def _maybe(self, what: str) -> None:
        if self.closed_pipe:
            raise BrokenPipeError(32, "Broken pipe")
        if self.fire_on == what:
            self.fire_on = None
            fire()

    def write(self, s: str) -> int:
        self._maybe("write")
        return super().write(s)

    def flush(self) -> None:
        self._maybe("flush")
        super().flush()


def hook(
    host: str, stdin: bytes, *extra: str, out: Stream | None = None, err: Stream | None = None
) -> tuple[int, str, str]:
    from eidolons.hooks.fast import main

    out, err = out or Stream(), err or Stream()
    code = main([host, *extra], stdin=io.BytesIO(stdin), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def tampered(handoff: Handoff) -> bytes:
    handoff.verify()
    handoff.payload.write_text("rewritten in transit\n")
    return json.dumps(sample(VIGIL_READ, handoff.root)).encode()


DENIES: dict[str, Callable[[Handoff], tuple[bytes, tuple[str, ...], str]]] = {
    # (stdin, extra argv, what the one stderr line starts with)
    "refusal": lambda h: (tampered(h), ("--root", str(h.root)), REFUSE),
    "malformed-input": lambda h: (b"not json", (), "eidolons hook: denied (malformed hook input"),
    "bad-root": lambda h: (
        json.dumps(sample(VIGIL_READ, h.root)).encode(),
        ("--root", str(h.root / "gone")),
        "eidolons hook: denied (usage: the project root",
    ),
}


@pytest.mark.usefixtures("quiet_alarm")
@pytest.mark.parametrize("moment", ["write", "flush", "building-the-deny"])
@pytest.mark.parametrize("deny", sorted(DENIES))
def test_the_alarm_firing_while_a_deny_is_answered_still_denies(
    handoff: Handoff, monkeypatch: pytest.MonkeyPatch, deny: str, moment: str
) -> None:
    stdin, extra, first = DENIES[deny](handoff)
    monkeypatch.setenv("EIDOLONS_HOOK_TIMEOUT", "30")  # armed, but only fire() fires
    if moment == "building-the-deny":
        from eidolons.hooks import decide

        real_init = decide.Decision.__init__

        def init(self: Any, allow: bool, *args: Any, **kwargs: Any) -> None:
            if not allow:
                fire()
            real_init(self, allow, *args, **kwargs)

        monkeypatch.setattr(decide.Decision, "__init__", init)
        err = Stream()
    else:
        err = Stream(fire_on=moment)
    code, out, text = hook("claude-code", stdin, *extra, err=err)
    assert code == 2, text
    assert out == ""
    if deny == "refusal" and moment == "building-the-deny":
        # the gate builds its refusal while deciding, under the budget: the budget's deny
        assert text == "eidolons hook: denied (the hook's 30-second budget ran out)\n"
        return
    assert text.splitlines()[0].startswith(first), text
    assert "budget ran out" not in text  # the answer is the decision's, whole, once


@pytest.mark.usefixtures("quiet_alarm")
def test_the_alarm_firing_after_an_allow_is_written_adds_nothing(
    handoff: Handoff, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cursor reads one JSON answer: an allow followed by a deny would be two."""
    (handoff.root / "a.py").write_text("x = 1\n")
    doc = {
        "conversation_id": "c-1",
        "generation_id": "g-1",
        "hook_event_name": "beforeReadFile",
        "workspace_roots": [str(handoff.root)],
        "file_path": str(handoff.root / "a.py"),
        "content": "x = 1\n",
        "attachments": [],
    }
    monkeypatch.setenv("EIDOLONS_HOOK_TIMEOUT", "30")
    code, out, err = hook("cursor", json.dumps(doc).encode(), out=Stream(fire_on="flush"))
    assert (code, out, err) == (0, '{"permission":"allow"}\n', "")


@pytest.mark.parametrize("host", ["claude-code", "codex", "gemini", "cursor", "copilot"])
def test_an_answer_that_cannot_be_written_blocks(handoff: Handoff, host: str) -> None:
    """A closed pipe (stdout for the JSON dialects, stderr for the exit-2 ones) is exit 2:
    every host blocks on it (Claude Code, Codex, Gemini: exit 2; Cursor's ``failClosed``
    and Copilot: a failing hook is a deny); never an exception, never exit 0 with the
    deny unsaid."""
    closed = Stream(closed_pipe=True)
    assert hook(host, b"not json", out=closed, err=closed)[0] == 2
    assert hook(host, b"not json", out=Stream(closed_pipe=True))[0] == 2
    # only stderr closed: the JSON dialects' deny is on stdout (exit 0), the others' is not
    code, out, _ = hook(host, b"not json", err=Stream(closed_pipe=True))
    if host in ("cursor", "copilot"):
        assert (
            code == 0
            and "deny"
            in json.loads(out)[("permission" if host == "cursor" else "permissionDecision")]
        )
    else:
        assert code == 2
