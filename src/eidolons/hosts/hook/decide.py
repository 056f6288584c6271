"""The hook's full decision for a call that touches something of ECL's (ADR 0015).

The shell is sealed by the host's sandbox, never by reading its commands. For the calling
agent R (none: the main loop):

1. A signing key is no agent's to read or write; the memory store and the gate's copies
   are not read directly.
2. No agent writes the gate's state, the host wiring or the gate's code. In a hand-off
   directory an agent only creates a new payload file (Write): no change in place, no
   envelope, receipt or signature, no payload beside an envelope.
3. R reads a hand-off only when the receiver gate passes for R (hosts that name no agent:
   for the addressee), else the deny is ``[R-verify-incoming] REFUSE: <CODE> from <sender>``;
   on Claude Code the Read is pointed at the gate's copy of the bytes it judged.
4. The main loop reads a hand-off only with an orchestrator ``verify_pass`` on record for
   those envelope bytes and a digest that matches now; one no gate judged yet goes
   through the orchestrator gate on this read. Envelopes stay readable.
5. Dispatch (``Agent``/``Task``) runs the orchestrator gate over the subagent's pending
   hand-offs (no verdict on record for their envelope bytes); a refusal denies it.
6. Grep of a hand-off, or of or above a hand-off directory (unless ``.eidolons/.ignore``
   hides it), is denied (a search reads the file after the gate's check, not the bytes it
   judged); so is a receiver's Glob of a hand-off directory.
7. Bash on Claude Code runs only while the sandbox seals the shell; of a plain
   ``eidolons`` command the state-writing ones are no agent's, the orchestrator's gate is
   the main loop's, and a subagent verifies ``--as`` and emits ``--from`` only itself.
8. The MCP ``emit`` sends as the calling subagent only; a bound server (``eidolons-<R>``)
   is called by subagent R only.
"""

from __future__ import annotations

import os

from eidolons.ecl.integrity import RefusalCode
from eidolons.hosts.hook.events import (
    DISPATCH,
    ENVELOPE_SUFFIX,
    HANDOFF,
    KEY,
    LIST,
    OTHER,
    PASS,
    READ,
    SEARCH,
    SHELL,
    STATE,
    STORE,
    WIRING,
    WRITE,
    Layout,
    ToolCall,
)
from eidolons.io.files import atomic_write, read_regular, read_text
from eidolons.io.paths import IGNORE_FILE as IGNORE_FILE  # spelled once (ADR 0001)
from eidolons.io.paths import IGNORE_LINES as IGNORE_LINES
from eidolons.io.paths import is_relative_to, realpath

TYPE_CHECKING = False  # as typing.TYPE_CHECKING: a Bash call's hook loads neither module
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

ORCHESTRATOR = "orchestrator"
INTEGRITY_MISMATCH = RefusalCode.INTEGRITY_MISMATCH


# ``eidolons`` commands (and actions) that write the gate's own state or the host wiring
STATE_COMMANDS = {
    "init": None,  # every action
    "hook": None,
    "mcp": None,
    "keys": None,  # but READ_ONLY_ACTIONS
    "trace": frozenset({"store", "import"}),
    "skill": frozenset({"install"}),
}
READ_ONLY_ACTIONS = {"keys": frozenset({"list", "show", "export"})}
ORCHESTRATOR_COMMANDS = frozenset({"verify-envelope", "run"})
# the commands a subagent runs only as itself: the option that names who it acts as
IDENTITY_OPTIONS = {"verify-incoming": "--as", "emit": "--from"}


class Decision:
    """Allow or deny, with the reason shown to the model (deny) and, on a verified read,
    context for the model and the tool input pointed at the gate's copy of the bytes it
    judged (``updated_input``)."""

    __slots__ = ("allow", "context", "reason", "updated_input")

    def __init__(
        self,
        allow: bool,
        reason: str = "",
        context: str | None = None,
        updated_input: dict[str, Any] | None = None,
    ) -> None:
        self.allow = allow
        self.reason = reason
        self.context = context
        self.updated_input = updated_input


ALLOW = Decision(True)


def deny(reason: str) -> Decision:
    return Decision(False, reason)


_KEPT = (
    "holds hand-off bytes the gate keeps (the memory store or its verified copies); read the "
    "hand-off itself, through the gate"
)
_WRITE_REASONS = {
    KEY: "the signing keys are out of every agent's reach",
    STATE: "the gate's state (trace, trust store, contracts, memory) is written only by "
    "eidolons itself",
    WIRING: "the hook wiring is not editable by agents",
}


class Decider:
    """Decides tool calls for one project. Loads the contract set at most once."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self._contracts: Any = None

    @property
    def root(self) -> Path:
        from pathlib import Path

        return Path(self.layout.root)

    def decide(self, call: ToolCall) -> Decision:
        kind = call.kind
        if kind == PASS:
            return ALLOW
        bound = bound_server(call.tool)
        if bound is not None and bound != call.receiver:
            return deny(
                f"eidolons hook: {call.tool} acts as {bound}; only subagent {bound} calls it"
            )
        if kind == DISPATCH:
            return self._dispatch(call)
        if kind == WRITE:
            return self._writes(call, call.paths)
        if kind == READ:
            return self._reads(call, call.paths)
        if kind == SEARCH or kind == LIST:
            return self._search(call)
        if kind == SHELL:
            return self._shell(call)
        if kind == OTHER:
            if call.tool in OWN_EMIT_TOOLS or (bound is not None and call.tool.endswith("__emit")):
                return self._own_emit(call)
            written = self._writes(call, call.paths)
            if not written.allow:
                return written
            return self._reads(call, call.paths)
        return deny(f"eidolons hook: unknown tool kind {kind!r}")

    def _reads(self, call: ToolCall, paths: list[str]) -> Decision:
        contexts = []
        redirect = None
        for path in paths:
            cls = self.layout.classify_read(path)
            if cls == KEY:
                return deny(f"eidolons hook: {path}: {_WRITE_REASONS[KEY]}")
            if cls == STORE:
                return deny(f"eidolons hook: {path} {_KEPT}")
            if cls == HANDOFF:
                decision = self.gate(call, path)
                if not decision.allow:
                    return decision
                if decision.context:
                    contexts.append(decision.context)
                redirect = decision.updated_input
        if contexts or redirect:
            return Decision(True, context="\n".join(contexts) or None, updated_input=redirect)
        return ALLOW

    def _writes(self, call: ToolCall, paths: list[str]) -> Decision:
        for path in paths:
            cls = self.layout.classify_write(path)
            if cls == HANDOFF:
                refused = _sealed_write(call.tool, path)
                if refused is not None:
                    return deny(f"eidolons hook: {path}: {refused}")
            elif cls is not None:
                return deny(f"eidolons hook: {path}: {_WRITE_REASONS[cls]}")
        return ALLOW

    def contracts(self) -> Any:
        if self._contracts is None:
            from eidolons.io.contracts import load_contracts

            # a set that fails to load is the typed fail-closed value: every hand-off refused
            self._contracts = load_contracts(self.root, [])
        return self._contracts

    def gate(self, call: ToolCall, path: str) -> Decision:
        redirect = call.tool_input if call.host == "claude-code" and call.tool == "Read" else None
        if call.receiver is not None or call.host in ADDRESSEE_HOSTS:
            # a host that names no agent: the read is judged as the envelope's addressee
            decision = self._receiver_read(call.receiver, path, redirect)
            if decision.allow and call.receiver and receiver_gate_tool(call.tool):
                # the MCP server judges the read again, as the caller the host names (and
                # records, and recalls memory, for that caller only)
                tool_input = {**(call.tool_input or {}), "receiver": call.receiver}
                return Decision(True, context=decision.context, updated_input=tool_input)
            return decision
        if receiver_gate_tool(call.tool):  # the server would judge and record as the one named
            return deny(
                "eidolons hook: the main loop receives no hand-off: dispatch its receiver "
                "(Agent), which reads it with read_verified"
            )
        return self._orchestrator_read(path, redirect)

    def _receiver_read(
        self, receiver: str | None, path: str, redirect: dict[str, Any] | None
    ) -> Decision:
        from pathlib import Path

        from eidolons.errors import UsageError
        from eidolons.gates.receiver import verify_incoming
        from eidolons.io.config import Limits, hmac_key

        try:
            result = verify_incoming(
                Path(path),
                receiver,
                root=self.root,
                contracts=self.contracts(),
                key=hmac_key(),
                limits=Limits.from_env(os.environ),
                require_envelope=True,
                want_payload=redirect is not None,
            )
        except UsageError as exc:  # --as names no receiver of the contracts: nothing recorded
            return deny(f"eidolons hook: --as {receiver}: {exc}")
        if result:
            env = result.envelope
            assert env is not None
            context = (
                f"ECL verify_pass on record: message_id {env.message_id}, "
                f"{env.integrity_method} {env.integrity_value}, "
                f"{env.sender.eidolon} -> {result.receiver} {env.performative} "
                f"{env.artifact_kind}"
            )
            if redirect is None:
                return Decision(True, context=context)
            assert result.payload is not None and result.payload_sha256 is not None
            return self._redirect(redirect, path, bytes(result.payload), context)
        lines = [result.refusal_line()]
        if result.failures:
            lines.append(f"reason: {result.failures[0].message}")
        if result.trace_error:
            lines.append(f"trace not written: {result.trace_error}")
        handback = result.extra.get("handback")
        if handback:
            lines.append(f"hand-back for the orchestrator: {handback}")
        lines.append("Do not process this payload; hand the refusal back to the orchestrator.")
        return deny("\n".join(lines))

    def _orchestrator_read(self, path: str, redirect: dict[str, Any] | None) -> Decision:
        from pathlib import Path

        from eidolons.hosts.hook.orchestrator import gate_one, orchestrator_read
        from eidolons.io.payload import AmbiguousEnvelope, find_envelope

        try:  # a hand-off no gate judged yet: the orchestrator's gate runs on this read
            envelope = None if path.endswith(ENVELOPE_SUFFIX) else find_envelope(Path(path))
        except AmbiguousEnvelope:
            envelope = None  # the check below refuses it with the reason
        if envelope is not None and self.layout.handoff_dir(realpath(envelope)):
            refused, _ = gate_one(self.layout.root, str(envelope))
            if refused:
                return deny("\n".join(refused))
        refusal, verified = orchestrator_read(Path(path), self.root)
        if refusal is None:
            if redirect is None or verified is None:
                return ALLOW  # an envelope: the main loop routes on it
            data = _read_verified(verified[1], verified[0])
            if data is None:
                refusal = (INTEGRITY_MISMATCH, "unknown", f"{path} changed while the gate read it")
            else:
                return self._redirect(redirect, path, data, None)
        code, sender, message = refusal
        from eidolons._text import printable

        return deny(
            f"[{ORCHESTRATOR}-verify-incoming] REFUSE: {code} from {printable(sender)}\n"
            f"reason: {message}\n"
            "Run `eidolons verify-envelope ENVELOPE --block` before reading a hand-off."
        )

    def _redirect(
        self, tool_input: dict[str, Any], path: str, data: bytes, context: str | None
    ) -> Decision:
        """Allow the Read, pointed at the gate's copy of ``data`` (what it judged)."""
        copy = verified_copy(self.layout.copies_dir, path, data)
        note = f"(the Read shows the gate's copy of the verified bytes, {copy})"
        return Decision(
            True,
            context=f"{context}\n{note}" if context else note,
            updated_input={**tool_input, "file_path": copy},
        )

    def _dispatch(self, call: ToolCall) -> Decision:
        """Rule 5: the orchestrator gate over the hand-offs addressed to the subagent."""
        if call.target is None:
            return ALLOW
        from eidolons.hosts.hook.orchestrator import gate_pending

        refusals, passed = gate_pending(self.layout, call.target)
        if refusals:
            return deny(
                "\n".join(refusals)
                + f"\nThe dispatch to {call.target} is refused: route the refusal to VIGIL "
                "or the human, not to the receiver."
            )
        if passed:
            return Decision(True, context="\n".join(passed))
        return ALLOW

    def _own_emit(self, call: ToolCall) -> Decision:
        """Rule 8: a subagent emits only as itself; the payload is judged as a write."""
        tool_input = call.tool_input or {}
        sender = tool_input.get("sender")
        name = sender.partition("@")[0] if isinstance(sender, str) else None
        if call.receiver is not None:
            if name != call.receiver:
                return deny(
                    f"eidolons hook: {call.receiver} emits only as itself "
                    f"(sender {call.receiver}), not as {sender!r}"
                )
        elif call.host in IDENTITY_HOSTS and name not in MAIN_LOOP_SENDERS:
            return deny(
                "eidolons hook: the main loop emits only as orchestrator or human, not as "
                f"{sender!r}: a subagent's hand-off is emitted by that subagent"
            )
        for path in call.paths:
            cls = self.layout.classify_read(path)
            if cls in (KEY, STORE):
                return deny(f"eidolons hook: {path}: {_WRITE_REASONS[KEY]}")
        return ALLOW

    def _protected_by_ignore(self) -> bool:
        try:
            text = read_text(os.path.join(self.layout.root, IGNORE_FILE))
        except (OSError, UnicodeDecodeError):
            return False
        lines = {line.strip() for line in (text or "").splitlines()}
        return all(line in lines for line in IGNORE_LINES)

    def _search(self, call: ToolCall) -> Decision:
        layout = self.layout
        for pattern in call.patterns:
            if ".eidolons" in pattern or any(
                os.path.basename(d) in pattern for d in layout.handoff_dirs
            ):
                if call.kind == SEARCH or call.receiver is not None:
                    return deny(
                        f"eidolons hook: {call.tool} pattern {pattern!r} names the hand-off "
                        "directory; read a hand-off through the gate"
                    )
        for path in call.paths:
            real = realpath(path)
            if os.path.isfile(real):
                if call.kind == SEARCH:
                    if layout.classify_read(path) == HANDOFF:  # no copy to point it at
                        return deny(
                            f"eidolons hook: {call.tool} of {path} would read a hand-off "
                            "after the gate's check, not the bytes it judged; read it with "
                            "Read, through the gate"
                        )
                    decision = self._reads(call, [path])
                    if not decision.allow:
                        return decision
                continue
            if any(is_relative_to(real, d) for d in layout.key_dirs):
                return deny(f"eidolons hook: {path}: {_WRITE_REASONS[KEY]}")
            if any(is_relative_to(real, d) for d in (layout.store_dir, layout.copies_dir)):
                return deny(f"eidolons hook: {path} {_KEPT}")
            if layout.handoff_dir(real):
                if call.kind == SEARCH or call.receiver is not None:
                    return deny(
                        f"eidolons hook: {call.tool} of {path} would show hand-offs without "
                        "the gate; read each hand-off with Read, through the gate"
                    )
                continue
            # ripgrep's .eidolons/.ignore hides the hand-offs from the rg-based Grep tools
            # (Claude Code, Cursor, Codex); Gemini CLI's tools do not read it
            honours_ignore = call.host != "gemini"
            if call.kind == SEARCH and self._above_keys(real):
                return deny(
                    f"eidolons hook: Grep of {path} would search the signing keys "
                    f"({_WRITE_REASONS[KEY]}), search a narrower path"
                )
            if call.kind == SEARCH and self._above_protected(real, honours_ignore=honours_ignore):
                return deny(
                    f"eidolons hook: Grep of {path} would search the hand-off directory "
                    f"({IGNORE_FILE} is missing; run `eidolons init`), search a narrower path"
                )
        return ALLOW

    def _above_keys(self, real: str) -> bool:
        """Whether a search of the directory ``real`` would reach a signing-key directory
        outside the project (the user's config directory, where the keys, trace heads and
        indexes are: ``~/.config`` or ``~`` searched): no ignore file of ours hides it."""
        return any(is_relative_to(d, real) and os.path.isdir(d) for d in self.layout.key_dirs[1:])

    def _above_protected(self, real: str, honours_ignore: bool = True) -> bool:
        layout = self.layout
        protected = [*layout.handoff_dirs, layout.store_dir, layout.copies_dir, *layout.key_dirs]
        above = [d for d in protected if is_relative_to(d, real) and os.path.isdir(d)]
        if not above:
            return False
        inside_state = all(is_relative_to(d, layout.state_dir) for d in above)
        return not (honours_ignore and inside_state and self._protected_by_ignore())

    def _shell(self, call: ToolCall) -> Decision:
        """Rule 7. The sandbox, not the hook, keeps a shell out of the hand-offs."""
        assert call.command is not None
        if call.host == "claude-code":
            from eidolons.hosts.wiring import sandbox_problems

            problems = sandbox_problems(self.layout.root, self.layout.handoff_dirs)
            if problems:
                return deny(
                    f"eidolons hook: {call.tool} is refused in this project: {problems[0]} "
                    "(the sandbox is what keeps a shell out of the hand-offs; run "
                    "`eidolons init --hosts claude-code`, then `eidolons doctor`)"
                )
        argv = plain_eidolons_command(call.command)
        if argv is not None:
            refused = _gate_command(argv, call.receiver)
            if refused is not None:
                return deny(f"eidolons hook: {refused}")
        return ALLOW


#: the hosts whose hook events name no agent: a read is judged as the envelope's addressee
ADDRESSEE_HOSTS = frozenset({"cursor", "gemini", "copilot"})
#: the hosts whose events name the calling subagent (none: the main loop)
IDENTITY_HOSTS = frozenset({"claude-code", "codex"})
#: who the main loop is when it hands work on
MAIN_LOOP_SENDERS = frozenset({"orchestrator", "human"})
#: the MCP server's sender tool, as each host names it
#: (exact: another server's tool named ``emit`` is judged by its paths like any tool)
OWN_EMIT_TOOLS = frozenset({"mcp__eidolons__emit"})
BOUND_PREFIX = "mcp__eidolons-"
#: the MCP server's tools that run the receiver gate for their ``receiver`` argument
RECEIVER_GATE_TOOLS = ("__read_verified", "__verify_incoming")


def receiver_gate_tool(tool: str) -> bool:
    """Whether ``tool`` is the eidolons MCP server's receiver gate (unbound or bound)."""
    return tool.startswith("mcp__eidolons") and tool.endswith(RECEIVER_GATE_TOOLS)


def bound_server(tool: str) -> str | None:
    """The agent an ``eidolons-<R>`` MCP server (``mcp serve --as R``) acts as, from the
    tool's name (``mcp__eidolons-apivr__emit``), or None for any other tool (rule 8)."""
    if not tool.startswith(BOUND_PREFIX):
        return None
    name, sep, _ = tool[len(BOUND_PREFIX) :].partition("__")
    return name if sep and name else None


_RESERVED_SUFFIXES = (ENVELOPE_SUFFIX, ".receipt.json", ".envelope.sig")
#: the tools that create a file and cannot change one (the Write tool may overwrite: the
#: path must not exist yet)
NEW_FILE_TOOLS = frozenset({"Write", "write_file", "create"})


def _sealed_write(tool: str, path: str) -> str | None:
    """Why ``tool`` may not write ``path`` in a hand-off directory (rule 2), or None."""
    from eidolons.io.paths import envelope_candidates

    name = os.path.basename(path)
    if name.endswith(_RESERVED_SUFFIXES):
        return (
            "envelopes, receipts and signatures in a hand-off directory are written only by "
            "the gate (emit)"
        )
    if tool not in NEW_FILE_TOOLS or os.path.lexists(path):
        return (
            "a hand-off is never changed in place; write a new payload file with Write and "
            "emit it (mcp__eidolons__emit)"
        )
    if any(os.path.lexists(p) for p in envelope_candidates(path)):
        return "an envelope already names this payload; write the new payload under a new name"
    return None


def verified_copy(directory: str, path: str, data: bytes) -> str:
    """The gate's copy of ``data`` (the bytes it judged for ``path``), written once under
    a name that is its digest, atomically; the host's Read is pointed at it."""
    import hashlib

    digest = hashlib.sha256(data).hexdigest()
    _, ext = os.path.splitext(os.path.basename(path))
    if not ext.isascii() or not ext[1:].isalnum() or len(ext) > 16:
        ext = ""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    final = os.path.join(directory, digest + ext)
    atomic_write(final, data, 0o444)
    return final


def _read_verified(path: str, sha256: str) -> bytes | None:
    """The bytes of ``path`` when their SHA-256 is ``sha256`` (what the gate verified),
    read once without following a last link; None when they differ or the file is no
    longer a regular file there (swapped since the gate read it)."""
    import hashlib

    from eidolons.io.config import Limits

    limit = Limits.from_env(os.environ).max_payload_bytes
    try:
        data = read_regular(path, limit)
    except OSError:
        return None
    if len(data) > limit or hashlib.sha256(data).hexdigest() != sha256:
        return None
    return data


def plain_eidolons_command(command: str) -> list[str] | None:
    """The arguments of ``command`` when it is one plain ``eidolons`` command (``eidolons
    ARGS`` or ``python -m eidolons ARGS``, no operator, no expansion), else None: the only
    shell command the hook decides (rule 7); any other runs in the sandbox."""
    import shlex

    if "\n" in command or "$" in command or "`" in command:
        return None
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:  # an unclosed quote: not a command the hook can decide
        return None
    if not words or any(w and all(c in "();<>|&" for c in w) for w in words):
        return None
    if os.path.basename(words[0]) == "eidolons":
        return words[1:]
    if (
        len(words) > 2
        and os.path.basename(words[0]).startswith("python")
        and words[1:3] == ["-m", "eidolons"]
    ):
        return words[3:]
    return None


def _gate_command(args: list[str], receiver: str | None) -> str | None:
    """Why an agent (``receiver``; None = the main loop) may not run ``eidolons ARGS``,
    or None (rule 7)."""
    words = [a for a in args if not a.startswith("-")]
    command = words[0] if words else ""
    shown = " ".join(words[:2])
    read_only = READ_ONLY_ACTIONS.get(command, frozenset())
    if command in STATE_COMMANDS and not (len(words) > 1 and words[1] in read_only):
        actions = STATE_COMMANDS[command]
        # any later word: an option's value may come before the action
        if actions is None or any(w in actions for w in words[1:]):
            return (
                f"`eidolons {shown}` writes the gate's state or the hook wiring; "
                "no agent runs it (run it yourself, outside the agent)"
            )
    if receiver is None:
        return None
    if command in ORCHESTRATOR_COMMANDS:
        return f"`eidolons {command}` is the orchestrator's gate; {receiver} does not run it"
    option = IDENTITY_OPTIONS.get(command)
    if option is not None:
        named = [
            v
            for i, a in enumerate(args)
            for v in ([args[i + 1]] if a == option and i + 1 < len(args) else [])
            + ([a.partition("=")[2]] if a.startswith(option + "=") else [])
        ]
        if not named or any(v.partition("@")[0] != receiver for v in named):
            return (
                f"{receiver} runs `eidolons {command}` only as itself ({option} {receiver}), "
                f"not {option} {' '.join(named) or '(none)'}"
            )
    return None
