"""``eidolons hook claude-code``: golden stdin from a real Claude Code 2.1.328 (the samples),
exact stdout, stderr and exit code. Claude Code blocks on exit 2 and lets everything else
through, so every refusal here is exit 2, with the JSON deny on stdout (what the model
sees) and the reason on stderr; a verified Read is exit 0 with the Read pointed at the
gate's copy of the bytes it judged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eidolons.io.paths import IGNORE_LINES
from tests.conftest import clean_env
from tests.hosts.conftest import (
    PAYLOAD_TEXT,
    SECRET,
    Handoff,
    claude_deny,
    needs_samples,
    sample,
    verified_read,
)

pytestmark = needs_samples

VIGIL_READ = "hook_stdin_read_subagent_vigil"
MAIN_READ = "hook_stdin_read_main"
MAIN_BASH = "hook_stdin_bash_main"


def as_vigil(doc: dict[str, object]) -> dict[str, object]:
    return {**doc, "agent_id": "ae03233dc7de3192d", "agent_type": "vigil"}


def first_line(err: str) -> str:
    return err.splitlines()[0] if err else ""


# --- the receiver (subagent vigil) ---------------------------------------------------


def test_vigil_reads_a_verified_handoff_through_the_gates_copy(handoff: Handoff) -> None:
    handoff.verify()
    doc = sample(VIGIL_READ, handoff.root)
    r = handoff.hook("claude-code", doc)
    env = handoff.doc
    context = (
        f"ECL verify_pass on record: message_id {env['message_id']}, "
        f"sha256 {env['integrity']['value']}, atlas -> vigil PROPOSE scout-report"
    )
    lines = verified_read(r, handoff.root, doc["tool_input"], PAYLOAD_TEXT.encode())
    assert lines[:-1] == [context]


def test_a_payload_swapped_after_the_check_is_not_what_the_read_shows(handoff: Handoff) -> None:
    """The Read goes to the copy of the bytes the gate judged: the file rewritten after
    the check (the agent races the host) is never what the receiver reads."""
    handoff.verify()
    doc = sample(VIGIL_READ, handoff.root)
    r = handoff.hook("claude-code", doc)
    handoff.payload.write_text("rewritten after the check\n")
    verified_read(r, handoff.root, doc["tool_input"], PAYLOAD_TEXT.encode())


def test_vigil_is_refused_a_tampered_handoff(handoff: Handoff) -> None:
    handoff.verify()
    handoff.payload.write_text(handoff.payload.read_text() + "rewritten in transit\n")
    r = handoff.hook("claude-code", sample(VIGIL_READ, handoff.root))
    reason = claude_deny(r)
    assert first_line(reason) == "[vigil-verify-incoming] REFUSE: INTEGRITY_MISMATCH from atlas"
    assert SECRET not in r.out + r.err


def test_vigil_is_refused_an_unverified_handoff(handoff: Handoff) -> None:
    r = handoff.hook("claude-code", sample(VIGIL_READ, handoff.root))
    assert first_line(claude_deny(r)) == "[vigil-verify-incoming] REFUSE: UNVERIFIED from atlas"


def test_the_receiver_is_the_hosts_agent_type_not_the_envelopes_recipient(
    handoff: Handoff,
) -> None:
    handoff.verify()
    r = handoff.hook("claude-code", sample(VIGIL_READ, handoff.root, agent_type="general-purpose"))
    assert r.code == 2  # judged as general-purpose, which no contract knows: denied
    assert first_line(r.err).startswith(
        "eidolons hook: --as general-purpose: no contract names a receiver 'general-purpose'"
    )


def test_a_handoff_whose_envelope_was_deleted_is_refused(handoff: Handoff) -> None:
    handoff.move_into_handoff_dir()
    handoff.envelope.unlink()
    doc = sample(VIGIL_READ, handoff.root)
    doc["tool_input"] = {"file_path": str(handoff.payload)}
    r = handoff.hook("claude-code", doc)
    assert first_line(claude_deny(r)) == "[vigil-verify-incoming] REFUSE: UNVERIFIED from unknown"


@pytest.mark.parametrize("how", ["--root", "EIDOLONS_ROOT", "CLAUDE_PROJECT_DIR"])
def test_a_root_that_is_not_a_directory_denies(handoff: Handoff, how: str) -> None:
    """A stale root (the project moved after ``init`` wrote ``--root``) must not shift the
    protected directories somewhere empty: the hook denies, as the gates refuse it."""
    handoff.move_into_handoff_dir()
    handoff.envelope.unlink()
    doc = sample(VIGIL_READ, handoff.root)
    doc["tool_input"] = {"file_path": str(handoff.payload)}
    gone = str(handoff.root.parent / "moved-away")
    if how == "--root":
        r = handoff.hook("claude-code", doc, "--root", gone)
    else:
        r = handoff.hook("claude-code", doc, env={how: gone})
    reason = claude_deny(r)
    assert reason == f"eidolons hook: denied (usage: the project root {gone!r} is not a directory)"


def test_a_symlink_to_a_handoff_is_refused(handoff: Handoff) -> None:
    handoff.verify()
    link = handoff.root / "notes.md"
    link.symlink_to(handoff.payload)
    doc = sample(VIGIL_READ, handoff.root)
    doc["tool_input"] = {"file_path": str(link)}
    r = handoff.hook("claude-code", doc)
    assert r.code == 2 and first_line(r.err).startswith("[vigil-verify-incoming] REFUSE: ")


def test_a_handoff_directory_link_swapped_while_the_hook_resolves_it_is_no_internal_error(
    handoff: Handoff, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hand-off directory is a link, swapped for the directory it named between the
    ``lstat`` and the ``readlink`` of a path's resolution (``os.path.realpath`` raised
    there before Python 3.13): the Read is judged on what is there now."""
    import os

    handoff.move_into_handoff_dir()
    handoff.verify()
    handoffs = handoff.payload.parent
    aside = handoffs.with_name("handoffs-real")
    handoffs.rename(aside)
    handoffs.symlink_to(aside.name)
    real_readlink = os.readlink

    def swapped(what: str, *args: object, **kwargs: object) -> str:
        if what == str(handoffs) and handoffs.is_symlink():
            handoffs.unlink()
            aside.rename(handoffs)
        return real_readlink(what, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "readlink", swapped)
    doc = sample(VIGIL_READ, handoff.root)
    doc["tool_input"] = {"file_path": str(handoff.payload)}
    r = handoff.hook("claude-code", json.dumps(doc).encode())
    verified_read(r, handoff.root, doc["tool_input"], PAYLOAD_TEXT.encode())


def test_a_file_that_is_not_a_handoff_is_allowed_silently(handoff: Handoff) -> None:
    other = handoff.root / "src.py"
    other.write_text("print('hello')\n")
    doc = sample(VIGIL_READ, handoff.root)
    doc["tool_input"] = {"file_path": str(other)}
    r = handoff.hook("claude-code", doc)
    assert (r.code, r.out, r.err) == (0, "", "")


def test_the_refusal_hands_back_a_refuse_envelope(handoff: Handoff) -> None:
    handoff.payload.write_text("rewritten\n")
    r = handoff.hook("claude-code", sample(VIGIL_READ, handoff.root))
    line = next(x for x in r.err.splitlines() if x.startswith("hand-back for the orchestrator: "))
    path = Path(line.partition(": ")[2])
    assert path.is_file() and path.is_relative_to(handoff.root / ".eidolons" / "refusals")
    back = json.loads(path.read_text())
    assert back["performative"] == "REFUSE"
    assert back["from"]["eidolon"] == "vigil" and back["to"]["eidolon"] == "orchestrator"


# --- the main loop (the orchestrator) --------------------------------------------------


def test_main_loop_read_of_an_unverified_handoff_is_refused(handoff: Handoff) -> None:
    r = handoff.hook("claude-code", sample(MAIN_READ, handoff.root))
    reason = claude_deny(r)
    assert first_line(reason) == "[orchestrator-verify-incoming] REFUSE: UNVERIFIED from atlas"


def test_main_loop_read_of_a_verified_handoff_shows_the_gates_copy(handoff: Handoff) -> None:
    handoff.verify()
    doc = sample(MAIN_READ, handoff.root)
    r = handoff.hook("claude-code", doc)
    assert verified_read(r, handoff.root, doc["tool_input"], PAYLOAD_TEXT.encode()) == [
        "(the Read shows the gate's copy of the verified bytes, "
        f"{handoff.root.resolve()}/.eidolons/verified/{handoff.doc['integrity']['value']}.md)"
    ]


def test_main_loop_read_after_tampering_is_refused(handoff: Handoff) -> None:
    handoff.verify()
    handoff.payload.write_text("rewritten\n")
    r = handoff.hook("claude-code", sample(MAIN_READ, handoff.root))
    assert r.code == 2
    assert (
        first_line(r.err) == "[orchestrator-verify-incoming] REFUSE: INTEGRITY_MISMATCH from atlas"
    )


@pytest.mark.parametrize("swap", ["symlink", "fifo", "directory", "deleted"])
def test_main_loop_read_of_a_payload_swapped_after_the_gate_is_a_refusal(
    handoff: Handoff, monkeypatch: pytest.MonkeyPatch, swap: str
) -> None:
    """The payload is swapped (for a link, a FIFO, a directory, or nothing) after the gate
    passed it and before the hook reads the bytes it copies: a refusal, never an internal
    error."""
    import os

    from eidolons.hosts.hook import orchestrator

    handoff.verify()
    real = orchestrator.orchestrator_read

    def then_swapped(path: Path, root: Path) -> object:
        answer = real(path, root)
        handoff.payload.unlink()
        if swap == "symlink":
            handoff.payload.symlink_to(handoff.envelope)
        elif swap == "fifo":
            os.mkfifo(handoff.payload)
        elif swap == "directory":
            handoff.payload.mkdir()
        return answer

    monkeypatch.setattr(orchestrator, "orchestrator_read", then_swapped)
    reason = claude_deny(handoff.hook("claude-code", sample(MAIN_READ, handoff.root)))
    assert reason.splitlines()[:2] == [
        "[orchestrator-verify-incoming] REFUSE: INTEGRITY_MISMATCH from unknown",
        f"reason: {handoff.payload} changed while the gate read it",
    ]


def test_main_loop_may_read_an_envelope(handoff: Handoff) -> None:
    doc = sample(MAIN_READ, handoff.root)
    doc["tool_input"] = {"file_path": str(handoff.envelope)}
    r = handoff.hook("claude-code", doc)
    assert (r.code, r.out, r.err) == (0, "", "")


# --- shell, search and list --------------------------------------------------------------


def bash(handoff: Handoff, command: str, receiver: bool = True) -> dict[str, object]:
    doc = sample(MAIN_BASH, handoff.root)
    doc["tool_input"] = {"command": command, "description": "x"}
    return as_vigil(doc) if receiver else doc


@pytest.mark.parametrize("command", ["ls src", "npm test", "git status"])
def test_main_loop_ordinary_shell_in_a_sealed_sandbox_is_allowed(
    sealed: Handoff, command: str
) -> None:
    r = sealed.hook("claude-code", bash(sealed, command, receiver=False))
    assert (r.code, r.out, r.err) == (0, "", "")


def test_receiver_ordinary_shell_in_a_sealed_sandbox_is_allowed(sealed: Handoff) -> None:
    r = sealed.hook("claude-code", bash(sealed, "ls src && wc -l README.md"))
    assert (r.code, r.out, r.err) == (0, "", "")


def test_shell_running_the_gate_itself_is_allowed(sealed: Handoff) -> None:
    command = f"eidolons verify-incoming {sealed.payload} --as vigil --print-payload"
    r = sealed.hook("claude-code", bash(sealed, command))
    assert (r.code, r.out, r.err) == (0, "", "")


def grep(handoff: Handoff, path: str | None, receiver: bool = True) -> dict[str, object]:
    doc = sample(MAIN_READ, handoff.root, tool_name="Grep")
    doc["tool_input"] = {"pattern": "race", **({"path": path} if path else {})}
    return as_vigil(doc) if receiver else doc


def test_grep_of_the_project_is_refused_unless_ignore_hides_the_handoffs(
    handoff: Handoff,
) -> None:
    handoff.move_into_handoff_dir()
    r = handoff.hook("claude-code", grep(handoff, None))
    assert ".eidolons/.ignore" in claude_deny(r)
    ignore = handoff.root / ".eidolons" / ".ignore"
    # every line counts: without verified/ the gate's copies of hand-offs would show
    ignore.write_text("".join(f"{line}\n" for line in IGNORE_LINES if line != "verified/"))
    assert ".eidolons/.ignore" in claude_deny(handoff.hook("claude-code", grep(handoff, None)))
    ignore.write_text("".join(f"{line}\n" for line in IGNORE_LINES))
    r = handoff.hook("claude-code", grep(handoff, None))
    assert (r.code, r.out, r.err) == (0, "", "")


def test_grep_of_the_handoff_dir_is_refused_to_everyone(handoff: Handoff) -> None:
    handoff.move_into_handoff_dir()
    for receiver in (True, False):
        r = handoff.hook("claude-code", grep(handoff, ".eidolons/handoffs", receiver))
        assert r.code == 2


def test_grep_of_a_handoff_file_is_refused_to_everyone_even_verified(handoff: Handoff) -> None:
    """A search reads the file after the hook's check: no copy of the judged bytes to point
    it at, as a Read is pointed, so a swap in between would show other bytes."""
    handoff.verify()
    assert handoff.hook("claude-code", sample(VIGIL_READ, handoff.root)).code == 0  # a Read
    for receiver in (True, False):
        r = handoff.hook("claude-code", grep(handoff, str(handoff.payload), receiver))
        assert "read it with Read, through the gate" in claude_deny(r), receiver


def test_glob_of_the_handoff_dir_main_loop_yes_receiver_no(handoff: Handoff) -> None:
    handoff.move_into_handoff_dir()
    doc = sample(MAIN_READ, handoff.root, tool_name="Glob")
    doc["tool_input"] = {"pattern": "**/*.md", "path": str(handoff.payload.parent)}
    assert handoff.hook("claude-code", doc).code == 0
    assert handoff.hook("claude-code", as_vigil(doc)).code == 2


# --- keys, trace, trust store, wiring ----------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "rel"),
    [
        ("Write", ".eidolons/.trace/t.jsonl"),
        ("Edit", ".eidolons/trust.json"),
        ("Write", ".eidolons/keys/signing.key"),
        ("Write", ".eidolons/contracts/atlas-to-vigil.yaml"),
        ("Edit", ".claude/settings.json"),
        ("MultiEdit", ".eidolons/.ignore"),
    ],
)
def test_no_agent_writes_the_gates_state_or_wiring(handoff: Handoff, tool: str, rel: str) -> None:
    for receiver in (True, False):
        doc = sample(MAIN_READ, handoff.root, tool_name=tool)
        doc["tool_input"] = {"file_path": str(handoff.root / rel), "content": "x"}
        r = handoff.hook("claude-code", as_vigil(doc) if receiver else doc)
        assert claude_deny(r).startswith(f"eidolons hook: {handoff.root / rel}: "), (tool, rel)


def test_no_agent_reads_the_signing_keys(handoff: Handoff, tmp_path: Path) -> None:
    keys = handoff.root / ".eidolons" / "keys"
    keys.mkdir()
    (keys / "signing.key").write_text("k")
    for receiver in (True, False):
        doc = sample(MAIN_READ, handoff.root)
        doc["tool_input"] = {"file_path": str(keys / "signing.key")}
        r = handoff.hook("claude-code", as_vigil(doc) if receiver else doc)
        assert "signing keys" in claude_deny(r)


def test_writing_a_handoff_payload_is_allowed(handoff: Handoff) -> None:
    doc = sample(MAIN_READ, handoff.root, tool_name="Write")
    doc["tool_input"] = {
        "file_path": str(handoff.root / ".eidolons/handoffs/new.md"),
        "content": "x",
    }
    assert handoff.hook("claude-code", doc).code == 0


# --- fail closed -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"{",
        b"[]",
        b'{"a": 1, "a": 2}',
        b'{"x": NaN}',
        b"\xef\xbb\xbf{}",
        b'{"x": "\xff"}',
        b"{} {}",
        b'{"hook_event_name": "PreToolUse", "tool_name": "Read", "cwd": "/"}',
        b'{"hook_event_name": "PostToolUse", "tool_name": "Read", "tool_input": {}, "cwd": "/"}',
        b'{"hook_event_name": "PreToolUse", "tool_name": "Read", "tool_input": {"file_path": 3},'
        b' "cwd": "/"}',
        b'{"hook_event_name": "PreToolUse", "tool_name": "Read", "tool_input": {"file_path": "/x"},'
        b' "cwd": "relative"}',
        b'{"hook_event_name": "PreToolUse", "tool_name": "Read", "tool_input": {"file_path": "/x"},'
        b' "cwd": "/", "agent_type": 7}',
        b"[" * 100 + b"]" * 100,
        b'{"k": "' + b"x" * (1024 * 1024) + b'"}',
    ],
)
def test_malformed_input_denies(handoff: Handoff, raw: bytes) -> None:
    r = handoff.hook("claude-code", raw)
    assert claude_deny(r).startswith("eidolons hook: denied (malformed hook input: ")


def test_an_internal_error_denies(handoff: Handoff, monkeypatch: pytest.MonkeyPatch) -> None:
    from eidolons.hosts.hook import decide

    def boom(self: object, call: object) -> object:
        raise RuntimeError("bug")

    monkeypatch.setattr(decide.Decider, "decide", boom)
    r = handoff.hook("claude-code", sample(VIGIL_READ, handoff.root))
    assert claude_deny(r) == "eidolons hook: denied (internal error: RuntimeError: bug)"


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit, GeneratorExit])
def test_a_base_exception_denies(
    handoff: Handoff, monkeypatch: pytest.MonkeyPatch, exc: type[BaseException]
) -> None:
    """An exception outside ``Exception`` (Ctrl-C, a stray ``sys.exit``) must not escape:
    Claude Code takes any exit but 2 as a non-blocking error and runs the tool."""
    from eidolons.hosts.hook import decide

    def boom(self: object, call: object) -> object:
        raise exc()

    monkeypatch.setattr(decide.Decider, "decide", boom)
    r = handoff.hook("claude-code", sample(VIGIL_READ, handoff.root))
    assert claude_deny(r) == f"eidolons hook: denied (internal error: {exc.__name__}: )"


def test_running_out_of_time_denies(handoff: Handoff, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from eidolons.hosts.hook import decide

    def hang(self: object, call: object) -> object:
        threading.Event().wait(30)
        raise AssertionError("the budget did not fire")

    monkeypatch.setattr(decide.Decider, "decide", hang)
    env = clean_env(EIDOLONS_HOOK_TIMEOUT="0.05")
    r = handoff.hook("claude-code", sample(VIGIL_READ, handoff.root), env=env)
    assert "budget ran out" in claude_deny(r)


def test_usage_errors_deny(handoff: Handoff) -> None:
    r = handoff.hook("claude-code", "{}", "--bogus")
    assert "usage" in claude_deny(r)


# --- the MCP server's reader: identity comes from the host, not from the arguments -------


def mcp_read(handoff: Handoff, receiver_arg: str) -> dict[str, object]:
    doc = sample(VIGIL_READ, handoff.root, tool_name="mcp__eidolons__read_verified")
    doc["tool_input"] = {"artifact": str(handoff.payload), "receiver": receiver_arg}
    return doc


def test_mcp_read_verified_is_gated_for_the_hosts_receiver(handoff: Handoff) -> None:
    handoff.verify()
    r = handoff.hook("claude-code", mcp_read(handoff, "vigil"))
    assert r.code == 0 and "ECL verify_pass on record" in r.out


def test_mcp_read_verified_claiming_another_receiver_is_refused(handoff: Handoff) -> None:
    """Subagent gilgamesh asks an unbound server for vigil's hand-off as 'vigil': the hook
    gates the read as the host's agent_type, whatever the arguments say."""
    handoff.verify()
    doc = mcp_read(handoff, "vigil")
    doc["agent_type"] = "gilgamesh"
    r = handoff.hook("claude-code", doc)
    assert r.code == 2
    assert first_line(r.err) == "[gilgamesh-verify-incoming] REFUSE: UNDECLARED_EDGE from atlas"


@pytest.mark.parametrize("tool_name", ["read_verified", "verify_incoming"])
def test_the_main_loop_cannot_receive_as_a_subagent_through_the_mcp_gate(
    handoff: Handoff, tool_name: str
) -> None:
    """The main loop is no receiver: naming vigil to the server's receiver gate would have
    the server judge, record a receipt and ingest memory as vigil, which never read it."""
    handoff.verify()
    doc = sample(MAIN_READ, handoff.root, tool_name=f"mcp__eidolons__{tool_name}")
    doc["tool_input"] = {"artifact": str(handoff.payload), "receiver": "vigil"}
    reason = claude_deny(handoff.hook("claude-code", doc))
    assert reason.startswith("eidolons hook: the main loop receives no hand-off"), reason


@pytest.mark.parametrize("tool_name", ["read_verified", "verify_incoming"])
def test_the_mcp_receiver_gate_acts_as_the_hosts_receiver_not_the_one_named(
    handoff: Handoff, tool_name: str
) -> None:
    """Subagent vigil calls the server's receiver gate on its own hand-off naming apivr: the
    hook lets it through only with the server's receiver set to vigil, so the server never
    judges, records or recalls for an agent other than the caller."""
    handoff.verify()
    doc = mcp_read(handoff, "apivr")
    doc["tool_name"] = f"mcp__eidolons__{tool_name}"
    r = handoff.hook("claude-code", doc)
    assert r.code == 0, r
    specific = json.loads(r.out)["hookSpecificOutput"]
    assert specific["permissionDecision"] == "allow"
    assert specific["updatedInput"] == {"artifact": str(handoff.payload), "receiver": "vigil"}


@pytest.mark.parametrize("marker", [".git", ".eidolons", None])
def test_the_hook_finds_the_root_the_gates_find(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, marker: str | None
) -> None:
    from eidolons.hosts.hook.events import find_root as hook_root
    from eidolons.io.config import find_root as gates_root

    monkeypatch.delenv("EIDOLONS_ROOT", raising=False)
    project = tmp_path / "project"
    deep = project / "a" / "b"
    deep.mkdir(parents=True)
    if marker is not None:
        (project / marker).mkdir()
    expected = project if marker is not None else deep
    assert hook_root(str(deep)) == str(gates_root(cwd=deep)) == str(expected.resolve())


def test_a_trace_locked_by_another_process_denies_the_read_within_the_hooks_budget(
    handoff: Handoff,
) -> None:
    """The hook waits for the trace's lock at most the trace timeout, well inside its own
    budget, then denies: a pass that cannot be recorded is none."""
    from tests._locks import Clock, held
    from tests.conftest import trace_files

    handoff.verify()
    (trace,) = trace_files(handoff.root)
    with held(trace):
        clock = Clock()
        r = handoff.hook(
            "claude-code",
            sample(VIGIL_READ, handoff.root),
            env=clean_env(EIDOLONS_TRACE_TIMEOUT_S="0.2"),
        )
        took = clock.elapsed
    assert took < 4.0, took  # the lock's deadline, not the hook's budget or the holder's
    reason = claude_deny(r)
    assert first_line(reason) == "[vigil-verify-incoming] REFUSE: UNVERIFIED from atlas", reason
    assert SECRET not in r.out + r.err
