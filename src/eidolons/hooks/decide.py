"""The hook's full decision for a tool call that touches something of ECL's.

Rules (ADR 0040), for the calling agent R (the host's identity; none = the main loop):

1. A signing key: never readable, never writable, by any agent (reads of the memory
   store, which holds hand-off bytes, are denied too).
2. A write (Write, Edit, a patch, or a shell command naming the path) to the gate's
   state (``.eidolons/`` outside the hand-off directories: trace, trust store, contracts,
   memory, keys) or to the hook wiring is denied for every agent.
3. A hand-off (a file in a hand-off directory, an envelope, or a file with a sibling
   envelope) read by a receiver R: allowed only when the receiver gate
   (:func:`eidolons.gates.receiver.verify_incoming`, in-process) passes for R; else
   denied with ``[R-verify-incoming] REFUSE: <CODE> from <sender>``. A file in a hand-off
   directory without an envelope (deleted) is refused ``UNVERIFIED``.
4. The same read by the main loop: allowed only with an orchestrator ``verify_pass`` on
   record for these exact envelope bytes and a digest recomputed now that matches; else
   denied with ``[orchestrator-verify-incoming] REFUSE: <CODE> from <sender>``. Envelopes
   themselves are readable by the main loop (it routes on them).
5. Grep of a hand-off directory (or of a directory above one, unless ripgrep's
   ``.eidolons/.ignore`` written by ``eidolons init`` hides it) is denied: it would show
   the bytes of every payload at once. Glob (names only) of a hand-off directory is denied
   to receivers.
6. Shell: the words a command names are judged as above (any hand-off named is gated as
   a read); naming the hand-off directory itself, or a hand-off's name that does not
   resolve, is denied; for a receiver, a command this module cannot read
   (:mod:`eidolons.hooks.shell`) is denied. ``eidolons`` itself, run by an agent: the
   commands that write the gate's state or wiring (:data:`STATE_COMMANDS`: keys, init,
   the trace store, an MCP server of its own) are denied to every agent (rule 2: the gate
   process can write what the agent cannot); the orchestrator's gate (``verify-envelope``,
   ``run``) is the main loop's only (the gate process reads the signing key a subagent
   cannot, and would sign the subagent's rewrite); a subagent runs ``verify-incoming``
   only ``--as`` itself and ``emit`` only ``--from`` itself (with ``--hmac`` the shell's
   key would tag its envelope as another sender's).
7. Anything else is allowed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from eidolons.hooks.events import (
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
from eidolons.knownhandoff import IGNORE_FILE as IGNORE_FILE  # spelled once (ADR 0129)
from eidolons.knownhandoff import IGNORE_LINES as IGNORE_LINES

ORCHESTRATOR = "orchestrator"


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
    context for the model. ``handback``: the refusal hand-back written for the
    orchestrator (section 7 of issue 10), when there is one."""

    __slots__ = ("allow", "context", "handback", "reason")

    def __init__(
        self,
        allow: bool,
        reason: str = "",
        context: str | None = None,
        handback: str | None = None,
    ) -> None:
        self.allow = allow
        self.reason = reason
        self.context = context
        self.handback = handback

    def __repr__(self) -> str:
        return f"Decision(allow={self.allow}, reason={self.reason!r})"


ALLOW = Decision(True)


def deny(reason: str, handback: str | None = None) -> Decision:
    return Decision(False, reason, handback=handback)


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
        self.root = Path(layout.root)
        self._contracts: Any = None

    # --- entry ----------------------------------------------------------------------

    def decide(self, call: ToolCall) -> Decision:
        kind = call.kind
        if kind == PASS:
            return ALLOW
        if kind == WRITE:
            return self._writes(call.paths)
        if kind == READ:
            return self._reads(call, call.paths)
        if kind == SEARCH or kind == LIST:
            return self._search(call)
        if kind == SHELL:
            return self._shell(call)
        if kind == OTHER:
            written = self._writes(call.paths)
            if not written.allow:
                return written
            return self._reads(call, call.paths)
        return deny(f"eidolons hook: unknown tool kind {kind!r}")

    # --- reads ----------------------------------------------------------------------

    def _reads(self, call: ToolCall, paths: list[str]) -> Decision:
        contexts = []
        for path in paths:
            cls = self.layout.classify_read(path)
            if cls == KEY:
                return deny(f"eidolons hook: {path}: {_WRITE_REASONS[KEY]}")
            if cls == STORE:
                return deny(
                    f"eidolons hook: {path} is the memory store (it holds hand-off bytes); "
                    "use `eidolons memory recall`"
                )
            if cls == HANDOFF:
                decision = self.gate(call.receiver, path)
                if not decision.allow:
                    return decision
                if decision.context:
                    contexts.append(decision.context)
        if contexts:
            return Decision(True, context="\n".join(contexts))
        return ALLOW

    def _writes(self, paths: list[str]) -> Decision:
        for path in paths:
            cls = self.layout.classify_write(path)
            if cls is not None:
                return deny(f"eidolons hook: {path}: {_WRITE_REASONS[cls]}")
        return ALLOW

    def contracts(self) -> Any:
        if self._contracts is None:
            from eidolons.contract import load_contracts

            # a set that fails to load is the typed fail-closed value: every hand-off refused
            self._contracts = load_contracts(self.root, [])
        return self._contracts

    def gate(self, receiver: str | None, path: str) -> Decision:
        if receiver is None:
            return self._orchestrator_read(path)
        return self._receiver_read(receiver, path)

    def _receiver_read(self, receiver: str, path: str) -> Decision:
        from eidolons.config import Limits, hmac_key
        from eidolons.gates.receiver import verify_incoming

        result = verify_incoming(
            Path(path),
            receiver,
            root=self.root,
            contracts=self.contracts(),
            key=hmac_key(),
            limits=Limits.from_env(os.environ),
            require_envelope=True,
        )
        if result:
            env = result.envelope
            assert env is not None
            return Decision(
                True,
                context=(
                    f"ECL verify_pass on record: message_id {env.message_id}, "
                    f"{env.integrity_method} {env.integrity_value}, "
                    f"{env.sender.eidolon} -> {receiver} {env.performative} {env.artifact_kind}"
                ),
            )
        lines = [result.refusal_line()]
        if result.failures:
            lines.append(f"reason: {result.failures[0].message}")
        if result.trace_error:
            lines.append(f"trace not written: {result.trace_error}")
        handback = result.extra.get("handback")
        if handback:
            lines.append(f"hand-back for the orchestrator: {handback}")
        lines.append("Do not process this payload; hand the refusal back to the orchestrator.")
        return deny("\n".join(lines), handback=handback)

    def _orchestrator_read(self, path: str) -> Decision:
        from eidolons.hooks.orchestrator_read import check_orchestrator_read

        refusal = check_orchestrator_read(Path(path), self.root)
        if refusal is None:
            return ALLOW
        code, sender, message = refusal
        from eidolons._text import printable

        return deny(
            f"[{ORCHESTRATOR}-verify-incoming] REFUSE: {code} from {printable(sender)}\n"
            f"reason: {message}\n"
            "Run `eidolons verify-envelope ENVELOPE --block` before reading a hand-off."
        )

    # --- search and list ------------------------------------------------------------

    def _protected_by_ignore(self) -> bool:
        try:
            with open(os.path.join(self.layout.root, IGNORE_FILE), encoding="utf-8") as fh:
                lines = {line.strip() for line in fh}
        except OSError:
            return False
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
            real = os.path.realpath(path)
            if os.path.isfile(real):
                if call.kind == SEARCH:
                    decision = self._reads(call, [path])
                    if not decision.allow:
                        return decision
                continue
            inside = [d for d in (*layout.key_dirs, layout.store_dir) if _under(real, d)]
            if inside:
                return deny(f"eidolons hook: {path}: {_WRITE_REASONS[KEY]}")
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
        return any(_under(d, real) and os.path.isdir(d) for d in self.layout.key_dirs[1:])

    def _above_protected(self, real: str, honours_ignore: bool = True) -> bool:
        layout = self.layout
        protected = [*layout.handoff_dirs, layout.store_dir, *layout.key_dirs]
        above = [d for d in protected if _under(d, real) and os.path.isdir(d)]
        if not above:
            return False
        inside_state = all(_under(d, layout.state_dir) for d in above)
        return not (honours_ignore and inside_state and self._protected_by_ignore())

    # --- shell ----------------------------------------------------------------------

    def _shell(self, call: ToolCall) -> Decision:
        from eidolons.hooks.shell import expand_word, read_command

        assert call.command is not None
        reading = read_command(call.command, call.cwd)
        for args in reading.gate_calls:
            refused = _gate_command(args, call.receiver)
            if refused is not None:
                return deny(f"eidolons hook: {refused}")
        layout = self.layout
        names = self._handoff_names()
        gated: list[str] = []
        for program, args, cwds in reading.recursive:
            recursive = self._recursive_read(program, args, cwds)
            if recursive is not None:
                return recursive
        for word, cwds in zip(reading.words, reading.dirs, strict=True):
            paths = [p for cwd in cwds for p in expand_word(word, cwd)]
            resolved = False
            for path in paths:
                write_cls = layout.classify_write(path)
                if write_cls is not None:
                    return deny(
                        f"eidolons hook: the command names {path}: {_WRITE_REASONS[write_cls]}"
                    )
                read_cls = layout.classify_read(path)
                if read_cls in (KEY, STORE):
                    return deny(f"eidolons hook: the command names {path}: {_WRITE_REASONS[KEY]}")
                if read_cls == HANDOFF:
                    real = os.path.realpath(path)
                    if not os.path.isfile(real) and os.path.isdir(real):
                        return deny(
                            f"eidolons hook: the command names the hand-off directory {path}; "
                            "read each hand-off with Read, through the gate"
                        )
                    gated.append(path)
                if os.path.lexists(path):
                    resolved = True
            if not resolved and self._mentions(word, names):
                return deny(
                    f"eidolons hook: the command mentions a hand-off ({word!r}) in a way "
                    "the hook cannot resolve; read it with Read, through the gate"
                )
        if call.receiver is not None and reading.opaque is None:
            reading.opaque = self._foreign_code(reading)
        if call.receiver is not None and reading.opaque is not None:
            return deny(
                f"eidolons hook: cannot tell what this command reads ({reading.opaque}); "
                f"{call.receiver} reads hand-offs with Read, through the gate "
                f"([{call.receiver}-verify-incoming] fails closed when in doubt)"
            )
        if gated:
            return self._reads(call, gated)
        return ALLOW

    def _foreign_code(self, reading: Any) -> str | None:
        """Why a command may run code the hook cannot see, or None (ADR 0134): a program
        given by path, or found on ``PATH``, outside the directories an agent cannot
        write (the hook's ``PATH`` outside the project and the temporary directories,
        the interpreter's own directory); an environment that changes what runs
        (``PATH=``, ``LD_PRELOAD=``, ``PYTHONPATH=``...); ``python -m eidolons`` where an
        ``eidolons`` in the working directory would be imported instead of the gate. A
        receiver's script of its own would read hand-offs without the gate."""
        import shutil
        import sys

        for name in reading.assigned:
            if name in _RUN_VARIABLES or name.startswith(_RUN_PREFIXES):
                return f"{name}= changes what the command runs"
        if reading.module_dirs and reading.others:
            return (
                "python -m eidolons after another command, which may write the eidolons "
                "it would import instead of the gate"
            )
        for cwds in reading.module_dirs:
            for cwd in cwds:
                try:
                    shadow = [n for n in os.listdir(cwd) if n.partition(".")[0] == "eidolons"]
                except OSError:
                    continue
                if shadow:
                    return f"python -m eidolons in {cwd} would import {shadow[0]}, not the gate"
        python = os.path.abspath(sys.executable) if sys.executable else ""
        trusted = [d for d in (python and os.path.dirname(python),) if d]
        trusted.append(os.path.dirname(os.path.realpath(python)) if python else "")
        root = self.layout.root
        for entry in os.environ.get("PATH", "").split(os.pathsep):
            real = os.path.realpath(entry) if os.path.isabs(entry) else ""
            if real and not _under(real, root) and not real.startswith(_SCRATCH):
                trusted.append(real)
        path_env = os.environ.get("PATH", "").split(os.pathsep)
        open_path = any(
            not os.path.isabs(e)
            or _under(os.path.realpath(e), root)
            or os.path.realpath(e).startswith(_SCRATCH)
            for e in path_env
        )

        def foreign(path: str) -> bool:
            real = os.path.realpath(path)
            return not any(d and os.path.dirname(real) == d for d in trusted)

        from eidolons.hooks.shell import OPAQUE_PROGRAMS, RUNNERS, program_base

        # a link an agent made to an interpreter or a shell (`ln -s /bin/bash ./x; ./x
        # peek.sh`), or to a runner, whose operands are judged by its name (`ln -s
        # /usr/bin/setsid ./x; ./x ./y`): the name is not on the list, what it runs is
        for program, cwds in reading.by_path:
            for cwd in cwds:
                link = os.path.join(cwd, os.path.expanduser(program))
                real = os.path.realpath(link)
                if foreign(real) or os.path.dirname(real) == os.path.realpath(
                    os.path.dirname(link)
                ):
                    continue
                if program_base(real) in OPAQUE_PROGRAMS:
                    return f"{program} is {real}, which can read files the command does not name"
                if os.path.basename(real) in RUNNERS:
                    return f"{program} is {real}, which runs the program it is given"
        for program, cwds in reading.programs:
            if "/" in program:
                found = [os.path.join(c, os.path.expanduser(program)) for c in cwds]
                # a program by path that is not there yet: an earlier part of the
                # command may write it (`cp x /tmp/y; /tmp/y`)
                if any(not os.path.lexists(p) or foreign(p) for p in found):
                    return f"{program} is not a program from a directory agents cannot write"
                continue
            which = shutil.which(program)
            if which is None and open_path and program not in _BUILTINS:
                return f"{program} is not on PATH, whose directories agents may write"
            if which is not None and foreign(which):
                return f"{program} is not a program from a directory agents cannot write"
        # a runner's program by name (`timeout 5 peek`): a word it may run, found on PATH
        # in a directory agents may write
        for word in reading.run_names:
            which = shutil.which(word)
            if which is not None and foreign(which):
                return f"{word} is not a program from a directory agents cannot write"
        # a program run by a wrapper (`timeout 5 ./x`, `setsid ./x`, `strace ./x`): any
        # word naming an executable file outside those directories
        for word, cwds in zip(reading.words, reading.dirs, strict=True):
            if "/" not in word or word.startswith("-"):
                continue
            for cwd in cwds:
                path = os.path.join(cwd, os.path.expanduser(word))
                if os.path.isfile(path) and os.access(path, os.X_OK) and foreign(path):
                    return f"{word} is an executable an agent could have written"
        return None

    def _recursive_read(
        self, program: str, args: list[str], cwds: tuple[str, ...]
    ) -> Decision | None:
        """A program reading a directory tree above a hand-off directory (or the keys, or
        the memory store) reads every payload without the gate (rule 5, for the shell):
        denied, unless it is ripgrep honouring ``.eidolons/.ignore`` (as the Grep tool)."""
        from eidolons.hooks.shell import expand_word

        operands = [
            p for word in args for cwd in cwds for p in expand_word(word, cwd) if os.path.isdir(p)
        ]
        honours_ignore = program == "rg" and not any(
            a.startswith(("-u", "--unrestricted", "--no-ignore", "--hidden", "-.")) for a in args
        )
        for directory in operands or list(cwds):
            real = os.path.realpath(directory)
            if self._above_protected(real, honours_ignore=honours_ignore):
                return deny(
                    f"eidolons hook: {program} would read {directory} recursively, hand-offs "
                    "included, without the gate; name a narrower path"
                )
        return None

    def _handoff_names(self) -> set[str]:
        out: set[str] = set()
        for directory in self.layout.handoff_dirs:
            try:
                with os.scandir(directory) as it:
                    for entry in it:
                        if len(entry.name) >= 4:
                            out.add(entry.name)
                            if len(out) > 10000:
                                return out
            except OSError:
                continue
        return out

    def _mentions(self, word: str, names: set[str]) -> bool:
        if ".eidolons" in word:
            return True
        if any(d in word for d in self.layout.handoff_dirs):
            return True
        return any(name in word for name in names)


# the environment that decides what a command runs (ADR 0134)
_RUN_VARIABLES = frozenset({"PATH", "IFS", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS"})
_RUN_PREFIXES = ("LD_", "DYLD_", "PYTHON", "PERL", "RUBY", "NODE_", "BASH_FUNC_")
_SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")
# the shell's own commands, never looked up on PATH
_BUILTINS = frozenset(
    "cd pushd popd dirs export declare typeset readonly local set unset shift true false "
    "test [ [[ echo printf read wait exit return type umask ulimit times jobs fg bg kill "
    "getopts let pwd : { } ! if then else elif fi for while until do done case esac in "
    "function select".split()
)


def _under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def _gate_command(args: list[str], receiver: str | None) -> str | None:
    """Why an agent (``receiver``; None = the main loop) may not run ``eidolons ARGS``,
    or None (rule 6)."""
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
