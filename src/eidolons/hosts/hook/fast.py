"""``eidolons hook HOST [EVENT] [--root DIR] [--as RECEIVER]``: one hook event in, one
decision out, in the host's dialect (ADR 0015).

A call that touches nothing of ECL's imports only ``os``, ``sys`` and ``_json``. Answers:

- claude-code: allow = exit 0, silent; a verified read = exit 0 and JSON ``allow`` with
  ``updatedInput`` pointing at the gate's copy; deny = exit 2, JSON ``deny`` on stdout and
  the reason on stderr; under the host's 10,000-character cap.
- codex, gemini: allow = exit 0; deny = exit 2, the reason on stderr.
- cursor: exit 0, ``{"permission":"allow"}`` or ``deny`` with the messages.
- copilot: allow = exit 0; deny = exit 0 with ``permissionDecision: deny``.

Fail closed: bad input, a usage error, an internal error or the time budget
(``EIDOLONS_HOOK_TIMEOUT``, default 10 s) deny. The budget is stopped before the answer,
which is written last; an answer that cannot be written is exit 2.
"""

from __future__ import annotations

import os
import sys

HOSTS = ("claude-code", "codex", "cursor", "gemini", "copilot")
EVENTS = ("pre-tool-use", "before-read-file", "before-tool")
DEFAULT_BUDGET = 10.0
MAX_REASON = 9000  # hosts cap hook output at 10,000 characters
MAX_ANSWER = 9500  # the whole JSON answer, escapes included: truncated JSON is an allow

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, BinaryIO, TextIO

    from eidolons.hosts.hook.decide import Decision


# What the host runs (``eidolons init`` registers it): this interpreter, isolated (``-I``:
# no PYTHONPATH, no user site, no current directory on sys.path), straight into the CLI's
# hook dispatch. Not the console script: setuptools' shim imports ``re`` (half an
# interpreter start) and ``-m`` costs ``runpy``. Its first statement makes anything that
# escapes (``eidolons.cli.main`` itself cannot be imported: a broken install) the deny every
# dialect blocks on, exit 2 and the reason on stderr, never Python's exit 1, which Codex,
# Gemini and a Claude Code without ``onFailure: "block"`` take as "run the tool" (ADR
# 0125; ``os`` and ``sys`` are loaded before any ``-c`` code runs).
BOOTSTRAP = (
    "import os, sys; sys.excepthook = lambda t, v, b: (sys.stderr.write("
    "'eidolons hook: denied (internal error: %s: %s)\\n' % (t.__name__, v)), "
    "sys.stderr.flush(), os._exit(2)); "
    "from eidolons.cli.main import main; sys.exit(main(['hook', *sys.argv[1:]]))"
)
#: what earlier versions registered: still recognised as ours, so ``init`` replaces it
LEGACY_BOOTSTRAPS = (
    "import sys; from eidolons.cli.main import main; sys.exit(main(['hook', *sys.argv[1:]]))",
)


def command_argv(host: str, root: str, python: str | None = None) -> list[str]:
    """The hook command for ``host`` in the project at ``root``, as an argv."""
    return [python or sys.executable, "-I", "-c", BOOTSTRAP, host, "--root", root]


class HookTimeout(Exception):
    pass


class _Usage(Exception):
    pass


def parse_args(argv: list[str]) -> tuple[str, str | None, str | None]:
    """HOST [EVENT] [--root DIR] [--as RECEIVER] (by hand: argparse is not on this path)."""
    host = None
    values: dict[str, str | None] = {"--root": None, "--as": None}
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if arg in values:
            if i + 1 >= len(argv) or not argv[i + 1]:
                raise _Usage(f"{arg} needs a value")
            values[arg] = argv[i + 1]
            i += 1
        elif eq and name in values:
            values[name] = value
        elif host is None and arg in HOSTS:
            host = arg
        elif host is None or arg not in EVENTS:  # an EVENT after HOST is ignored
            raise _Usage(f"unexpected argument {arg!r}")
        i += 1
    if host is None:
        raise _Usage(f"HOST must be one of {', '.join(HOSTS)}")
    return host, values["--root"], values["--as"]


def _budget() -> float:
    raw = os.environ.get("EIDOLONS_HOOK_TIMEOUT")
    if not raw:
        return DEFAULT_BUDGET
    try:
        value = float(raw)
    except ValueError:
        raise _Usage(f"EIDOLONS_HOOK_TIMEOUT={raw!r} is not a number") from None
    if not 0 < value <= 600:
        raise _Usage("EIDOLONS_HOOK_TIMEOUT must be between 0 and 600 seconds")
    return value


class _Alarm:
    """The time budget: SIGALRM after ``seconds``. :meth:`stop` first marks it disarmed (one
    attribute store: a signal delivered after it is ignored), then cancels the timer and
    puts the previous handler back; so once stopped, nothing the alarm does can interrupt
    the answer."""

    __slots__ = ("armed", "installed", "previous")

    def __init__(self) -> None:
        self.armed = False
        self.installed = False
        self.previous: Any = None

    def start(self, seconds: float) -> None:
        # the C module: ``signal`` builds enums (imports enum, 5 ms)
        import _signal as signal  # type: ignore[import-not-found]

        def expired(signum: int, frame: Any) -> None:
            if self.armed:
                raise HookTimeout(f"the hook's {seconds:g}-second budget ran out")

        try:
            self.previous = signal.signal(signal.SIGALRM, expired)
        except ValueError:  # not the main thread: the host's own timeout still applies
            return
        self.installed = self.armed = True
        signal.setitimer(signal.ITIMER_REAL, seconds)

    def stop(self) -> None:
        self.armed = False  # first: from here on a late SIGALRM is a no-op
        if not self.installed:
            return
        import _signal as signal

        signal.setitimer(signal.ITIMER_REAL, 0)
        if self.previous is not None:  # None: not set from Python; ours stays, a no-op now
            signal.signal(signal.SIGALRM, self.previous)
        self.installed = False


def main(
    argv: list[str],
    stdin: BinaryIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Decide under the time budget, stop the budget, then answer: the answer is the last
    thing the hook does, and nothing (a late alarm, a failed write) turns it into exit 1."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    host = argv[0] if argv and argv[0] in HOSTS else "claude-code"
    alarm = _Alarm()
    decision: Decision | _Denied | None
    try:
        try:
            host, root_arg, as_arg = parse_args(argv)
            alarm.start(_budget())
            decision = _decide(host, root_arg, as_arg, stdin)
        finally:
            alarm.stop()
    except BaseException as exc:  # Ctrl-C, a stray sys.exit: any exit but 2 runs the tool
        alarm.stop()  # the alarm may have fired in the finally, before it stopped
        decision = _failure(exc)
    return answer(host, decision, out, err)


def _decide(
    host: str, root_arg: str | None, as_arg: str | None, stdin: BinaryIO | None
) -> Decision | None:
    from eidolons.hosts.hook.events import MAX_EVENT_BYTES, PARSERS, Layout, find_root, loads_event

    stream = stdin if stdin is not None else sys.stdin.buffer
    call = PARSERS[host](loads_event(stream.read(MAX_EVENT_BYTES + 1)))
    if as_arg is not None:
        if call.receiver is not None and call.receiver != as_arg:
            return _deny(f"the host says {call.receiver}, --as says {as_arg}")
        call.receiver = as_arg
    root = root_arg or os.environ.get("EIDOLONS_ROOT") or _host_project_dir(host)
    if root and not os.path.isdir(root):  # a stale root would protect an empty tree
        raise _Usage(f"the project root {root!r} is not a directory")
    root = root if root else find_root(call.cwd)
    layout = Layout(root, configured_handoff_dirs(root))
    if quick_allow(call, layout):
        return None
    from eidolons.hosts.hook.decide import Decider

    return Decider(layout).decide(call)


def _failure(exc: BaseException) -> Decision | _Denied:
    """The deny for what stopped the decision; never raises (a deny that cannot be built
    in full is still a deny)."""
    try:
        if isinstance(exc, _Usage):
            return _deny(f"usage: {exc}")
        if isinstance(exc, HookTimeout):
            return _deny(str(exc))
        from eidolons.hosts.hook.events import HookInputError

        if isinstance(exc, HookInputError):
            return _deny(f"malformed hook input: {exc}")
        return _deny(f"internal error: {exc.__class__.__name__}: {exc}")
    except BaseException:
        return _Denied(f"eidolons hook: denied (internal error: {exc.__class__.__name__})")


def _host_project_dir(host: str) -> str | None:
    if host == "claude-code":
        return os.environ.get("CLAUDE_PROJECT_DIR") or None
    if host == "cursor":
        return os.environ.get("CURSOR_PROJECT_DIR") or os.environ.get("CLAUDE_PROJECT_DIR") or None
    return None


def configured_handoff_dirs(root: str) -> tuple[str, ...]:
    """The hand-off directories configuration adds (:func:`eidolons.io.config.handoff_dirs`,
    the one rule), looked up only when there is configuration to read."""
    from eidolons.io.paths import CONFIG_FILE, HANDOFF_DIRS_ENV  # loaded with events

    config = os.path.join(root, CONFIG_FILE)
    if not os.environ.get(HANDOFF_DIRS_ENV) and not os.path.lexists(config):
        return ()
    from pathlib import Path

    from eidolons.io.config import handoff_dirs

    return tuple(str(d) for d in handoff_dirs(Path(root))[1:])


def quick_allow(call: Any, layout: Any) -> bool:
    """True when the call touches no hand-off, key, store or gate state: allow at once."""
    from eidolons.hosts.hook.events import PASS, READ, WRITE

    if call.kind == PASS:
        return True
    if call.kind == READ:
        return all(layout.classify_read(p) is None for p in call.paths)
    if call.kind == WRITE:
        return all(layout.classify_write(p) is None for p in call.paths)
    return False


def _deny(reason: str) -> Decision:
    from eidolons.hosts.hook.decide import Decision

    return Decision(False, f"eidolons hook: denied ({reason})")


class _Denied:
    """A deny built without :mod:`eidolons.hosts.hook.decide` (when even that failed)."""

    __slots__ = ("reason",)
    allow = False
    context = None

    def __init__(self, reason: str) -> None:
        self.reason = reason


def answer(host: str, decision: Decision | _Denied | None, out: TextIO, err: TextIO) -> int:
    """Write the host's answer; return the exit code. ``None`` is a plain allow. The write
    is the last thing done: an answer that cannot be written (a closed or broken pipe) is
    exit 2, which every host takes as a block (Cursor's ``failClosed`` and Copilot block a
    failing hook), never an exception."""
    extra = ""  # said on stderr beside a JSON answer, if it can be
    if decision is None or decision.allow:
        code, stream = 0, out
        context = decision.context if decision is not None else None
        updated = getattr(decision, "updated_input", None)
        if host == "cursor":
            text = '{"permission":"allow"}\n'
        elif host == "claude-code" and (context or updated):
            specific: dict[str, Any] = {"hookEventName": "PreToolUse"}
            if updated:
                specific["permissionDecision"] = "allow"
                specific["updatedInput"] = updated
            text = _bounded(specific, "additionalContext", context or "")
            if len(text) > MAX_ANSWER:  # the redirect alone is too long: cut JSON is no answer
                reason = "eidolons hook: denied (the tool input is too long to answer with)"
                return answer(host, _Denied(reason), out, err)
        else:
            return 0  # nothing to say
    else:
        reason = decision.reason[:MAX_REASON]
        if host == "cursor":
            code, stream, extra = 0, out, reason + "\n"
            text = _dumps({"permission": "deny", "user_message": reason, "agent_message": reason})
        elif host == "copilot":
            code, stream = 0, out
            text = _dumps({"permissionDecision": "deny", "permissionDecisionReason": reason})
        elif host == "claude-code":
            # exit 2 blocks whatever stdout holds; the JSON's reason is what the model sees
            code, stream, extra = 2, out, reason + "\n"
            specific = {"hookEventName": "PreToolUse", "permissionDecision": "deny"}
            text = _bounded(specific, "permissionDecisionReason", reason)
        else:
            code, stream, text = 2, err, reason + "\n"
    if extra:
        try:
            err.write(extra)
            err.flush()
        except BaseException:
            pass  # beside the answer only: the JSON on stdout is what the host reads
    try:
        stream.write(text)
        stream.flush()
    except BaseException:
        return 2
    return code


def _bounded(specific: dict[str, Any], field: str, text: str) -> str:
    """``{"hookSpecificOutput": specific + {field: text}}`` as JSON of at most
    :data:`MAX_ANSWER` characters: ``text`` is cut until the escaped whole fits (an
    attacker-chosen name can escape to six characters a character)."""
    keep = len(text)
    while True:
        doc = dict(specific)
        if text:
            doc[field] = text[:keep] if keep == len(text) else text[:keep] + " [...]"
        line = _dumps({"hookSpecificOutput": doc})
        if len(line) <= MAX_ANSWER or keep == 0:
            return line
        # cut by the excess (plain text) or in proportion (escapes: up to six characters
        # a character), whichever keeps more; by one at least, so the loop ends
        excess = len(line) - MAX_ANSWER
        keep = max(0, min(keep - 1, max(keep - excess, keep * MAX_ANSWER // len(line)) - 16))


def _dumps(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=True, separators=(",", ":")) + "\n"
