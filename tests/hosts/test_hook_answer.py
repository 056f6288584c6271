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

from tests.conftest import Run
from tests.hosts.conftest import Handoff, claude_deny, sample

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
    from eidolons.hosts.hook.fast import main

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
@pytest.mark.parametrize(
    "moment", ["stdout-write", "stdout-flush", "stderr-write", "stderr-flush", "building-the-deny"]
)
@pytest.mark.parametrize("deny", sorted(DENIES))
def test_the_alarm_firing_while_a_deny_is_answered_still_denies(
    handoff: Handoff, monkeypatch: pytest.MonkeyPatch, deny: str, moment: str
) -> None:
    """Claude Code's deny is written twice (the JSON on stdout, the reason on stderr): the
    alarm firing during either write leaves both whole."""
    stdin, extra, first = DENIES[deny](handoff)
    monkeypatch.setenv("EIDOLONS_HOOK_TIMEOUT", "30")  # armed, but only fire() fires
    out, err = Stream(), Stream()
    if moment == "building-the-deny":
        from eidolons.hosts.hook import decide

        real_init = decide.Decision.__init__

        def init(self: Any, allow: bool, *args: Any, **kwargs: Any) -> None:
            if not allow:
                fire()
            real_init(self, allow, *args, **kwargs)

        monkeypatch.setattr(decide.Decision, "__init__", init)
    else:
        stream, _, call = moment.partition("-")
        (out if stream == "stdout" else err).fire_on = call
    code, stdout, stderr = hook("claude-code", stdin, *extra, out=out, err=err)
    reason = claude_deny(Run(code, stdout, stderr))  # both written, whole, once
    if deny == "refusal" and moment == "building-the-deny":
        # the gate builds its refusal while deciding, under the budget: the budget's deny
        assert reason == "eidolons hook: denied (the hook's 30-second budget ran out)"
        return
    assert reason.splitlines()[0].startswith(first), reason
    assert "budget ran out" not in reason  # the answer is the decision's


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


# --- the answer's size: the host cuts hook output at 10,000 characters ---------------------

ESCAPED = "\x01" * 20_000  # each is six characters once JSON-escaped (\\u0001)


def answered(decision: Any) -> tuple[int, str, str]:
    from eidolons.hosts.hook.fast import answer

    out, err = Stream(), Stream()
    code = answer("claude-code", decision, out, err)
    return code, out.getvalue(), err.getvalue()


def test_a_deny_whose_reason_escapes_to_six_times_its_length_stays_one_whole_json_answer() -> None:
    from eidolons.hosts.hook.decide import deny
    from eidolons.hosts.hook.fast import MAX_ANSWER

    code, out, err = answered(deny(f"eidolons hook: {ESCAPED}: the reason"))
    assert code == 2 and len(out) <= MAX_ANSWER <= 9500
    specific = json.loads(out)["hookSpecificOutput"]
    assert specific["permissionDecision"] == "deny"
    assert specific["permissionDecisionReason"].startswith("eidolons hook: \x01")
    assert specific["permissionDecisionReason"].endswith(" [...]")
    assert len(specific["permissionDecisionReason"]) > 1000  # cut to fit, not emptied
    assert err.startswith("eidolons hook: \x01") and len(err) <= 9001


def test_a_verified_read_with_a_long_context_keeps_its_redirect_whole() -> None:
    from eidolons.hosts.hook.decide import Decision
    from eidolons.hosts.hook.fast import MAX_ANSWER

    redirect = {"file_path": "/p/.eidolons/verified/ab.md", "offset": 1}
    code, out, err = answered(Decision(True, context=ESCAPED, updated_input=redirect))
    assert (code, err) == (0, "") and len(out) <= MAX_ANSWER
    specific = json.loads(out)["hookSpecificOutput"]
    assert specific["permissionDecision"] == "allow"
    assert specific["updatedInput"] == redirect
    assert specific["additionalContext"].startswith("\x01" * 1000)


def test_a_write_named_with_characters_json_escapes_is_denied_in_one_bounded_answer(
    handoff: Handoff,
) -> None:
    """The reason names the path the agent chose: 20,000 control characters in it must
    neither push the answer past the host's cap (cut JSON is no deny) nor break it."""
    from eidolons.hosts.hook.fast import MAX_ANSWER

    target = f"{handoff.root}/.eidolons/{ESCAPED}/trust.json"
    doc = sample(VIGIL_READ, handoff.root, tool_name="Write")
    doc["tool_input"] = {"file_path": target, "content": "{}"}
    code, out, err = hook("claude-code", json.dumps(doc).encode(), "--root", str(handoff.root))
    assert code == 2 and len(out) <= MAX_ANSWER
    reason = json.loads(out)["hookSpecificOutput"]["permissionDecisionReason"]
    assert json.loads(out)["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert reason.startswith(f"eidolons hook: {handoff.root}/.eidolons/\x01")
    assert err.startswith(reason[: -len(" [...]")])


def test_a_verified_read_whose_redirect_cannot_fit_the_cap_is_denied(handoff: Handoff) -> None:
    """The Read's other arguments travel in ``updatedInput``: a ``pages`` string the model
    filled with 20,000 control characters would push the allow past the host's cap, and a
    cut answer is no redirect (the Read would go to the live file, not the gate's copy)."""
    from eidolons.hosts.hook.fast import MAX_ANSWER

    handoff.verify()
    doc = sample(VIGIL_READ, handoff.root)
    doc["tool_input"] = {**doc["tool_input"], "pages": ESCAPED}
    code, out, err = hook("claude-code", json.dumps(doc).encode(), "--root", str(handoff.root))
    reason = claude_deny(Run(code, out, err))
    assert len(out) <= MAX_ANSWER
    assert "updatedInput" not in out and "too long" in reason
