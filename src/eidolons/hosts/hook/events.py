"""One hook event, strictly parsed into a :class:`ToolCall`; the :class:`Layout` the hook
protects.

- The event is one JSON object read by the package's strict reader of untrusted JSON;
  anything else is :class:`HookInputError`.
- The receiver is the host's identity of the calling agent (``agent_type``), never an
  envelope's field; none means the main loop, the orchestrator.
- Paths are compared after resolving symlinks. On the fast path: ``os`` only.
"""

from __future__ import annotations

import os

from eidolons.io.paths import COPIES_DIR, STATE_DIR, is_relative_to, realpath

# the project's state paths, spelled once (ADR 0001; os only), still importable from here
from eidolons.io.paths import ENVELOPE_SUFFIX as ENVELOPE_SUFFIX
from eidolons.io.paths import HANDOFF_DIR as HANDOFF_DIR

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Any

    Spec = tuple[str, tuple[str, ...], tuple[str, ...], str | None]

MAX_EVENT_BYTES = 1024 * 1024
MAX_DEPTH = 32
MAX_LINK_SCAN = 100_000

READ = "read"
SEARCH = "search"
LIST = "list"
SHELL = "shell"
WRITE = "write"
PASS = "pass"  # touches no file (WebFetch, TodoWrite, a subagent's Agent...)
DISPATCH = "dispatch"  # the main loop starts a subagent (Agent, Task): the orchestrator gate runs
OTHER = "other"  # unknown tool or MCP: its string arguments are checked as paths

HANDOFF = "handoff"
KEY = "key"
STATE = "state"
STORE = "store"
WIRING = "wiring"


class HookInputError(Exception):
    """The hook's input is not an event this hook can judge (the hook denies)."""


def loads_event(data: bytes) -> dict[str, Any]:
    """One hook event, parsed by the strict reader of untrusted JSON
    (:func:`eidolons.ecl.grammar.loads_strict`: no duplicate key, no ``NaN``, no
    overflowing number, no lone surrogate, at most :data:`MAX_DEPTH` deep), at most
    :data:`MAX_EVENT_BYTES`. Raises :class:`HookInputError`."""
    from eidolons.ecl.grammar import Limits, loads_strict
    from eidolons.errors import EnvelopeError

    if len(data) > MAX_EVENT_BYTES:
        raise HookInputError(f"hook input is larger than {MAX_EVENT_BYTES} bytes")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise HookInputError("hook input is not valid UTF-8") from None
    if data.startswith(b"\xef\xbb\xbf"):
        raise HookInputError("hook input starts with a byte-order mark")
    try:
        value = loads_strict(data, Limits(MAX_EVENT_BYTES, MAX_DEPTH))
    except EnvelopeError as exc:
        raise HookInputError(f"hook input is not strict JSON ({exc})") from None
    if not isinstance(value, dict):
        raise HookInputError("hook input is not a JSON object")
    return value


class ToolCall:
    """One tool call, as every host's hook reports it."""

    def __init__(
        self,
        host: str,
        tool: str,
        kind: str,
        cwd: str,
        *,
        paths: list[str] | None = None,
        command: str | None = None,
        patterns: list[str] | None = None,
        receiver: str | None = None,
        target: str | None = None,
        tool_input: dict[str, Any] | None = None,
    ) -> None:
        self.host = host
        self.tool = tool
        self.kind = kind
        self.cwd = cwd
        self.paths = paths or []
        self.command = command
        self.patterns = patterns or []
        self.receiver = receiver
        self.target = target  # DISPATCH: the subagent started
        self.tool_input = tool_input  # READ on Claude Code: the input a redirect rewrites


# --- field access -----------------------------------------------------------------------


def _str(doc: dict[str, Any], key: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str):
        raise HookInputError(f"{key} must be a string")
    return value


def _obj(doc: dict[str, Any], key: str) -> dict[str, Any]:
    value = doc.get(key)
    if not isinstance(value, dict):
        raise HookInputError(f"{key} must be an object")
    return value


def _abs(path: str, cwd: str) -> str:
    if "\x00" in path:
        raise HookInputError("a path holds a NUL byte")
    if path.startswith("~"):
        path = os.path.expanduser(path)
    return os.path.normpath(os.path.join(cwd, path))


def _cwd(doc: dict[str, Any], fallback: str | None = None) -> str:
    cwd = doc.get("cwd")
    cwd = fallback if cwd is None else cwd
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        raise HookInputError("cwd must be an absolute path")
    return cwd


def _receiver(doc: dict[str, Any]) -> str | None:
    value = doc.get("agent_type")
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > 200:
        raise HookInputError("agent_type must be a string")
    return value


def _paths(tool_input: dict[str, Any], keys: tuple[str, ...], cwd: str) -> list[str]:
    out = []
    for key in keys:
        value = tool_input.get(key)
        if value is None:
            continue
        items = value if isinstance(value, list) else [value]
        for item in items:
            if not isinstance(item, str):
                raise HookInputError(f"tool_input.{key} must be a string")
            out.append(_abs(item, cwd))
    return out


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, out)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)


def _generic(host: str, tool: str, tool_input: Any, cwd: str, receiver: str | None) -> ToolCall:
    strings: list[str] = []
    _strings(tool_input, strings)
    found = [s for s in strings if s.startswith(("/", "~", "./", "../")) or ".eidolons" in s]
    # a relative name (``handoff.md``, ``sub/../x``) is a path too when it names a file
    # from the working directory: an MCP file server resolves it there
    found.extend(
        s
        for s in strings
        if s not in found
        and 0 < len(s) <= 4096
        and "\x00" not in s
        and "\n" not in s
        and os.path.lexists(os.path.join(cwd, s))
    )
    paths = [_abs(p, cwd) for p in found]
    args = tool_input if isinstance(tool_input, dict) else None
    return ToolCall(host, tool, OTHER, cwd, paths=paths, receiver=receiver, tool_input=args)


# --- per host: a table per dialect ----------------------------------------------------------

# a tool's Spec: (kind, the keys naming its paths, the keys naming its patterns, what a call
# without a path lacks: None when it may name none; a search or listing without one is of cwd)
_FILE = ("file_path", "notebook_path")
_CLAUDE_TOOLS: dict[str, Spec] = {
    **dict.fromkeys(("Read", "NotebookRead"), (READ, _FILE, (), "tool_input.file_path")),
    **dict.fromkeys(
        ("Write", "Edit", "MultiEdit", "NotebookEdit"), (WRITE, _FILE, (), "tool_input.file_path")
    ),
    "Grep": (SEARCH, ("path",), ("pattern", "glob"), None),
    **dict.fromkeys(("Glob", "LS"), (LIST, ("path",), ("pattern", "glob"), None)),
    # tools that name no file of their own (their text is not a path to read)
    **dict.fromkeys(
        (
            *("Agent", "Task", "TodoWrite", "TodoRead", "WebFetch", "WebSearch"),
            *("ExitPlanMode", "EnterPlanMode", "AskUserQuestion", "SendMessage"),
            *("BashOutput", "KillShell", "KillBash", "TaskOutput", "TaskStop"),
            *("SlashCommand", "Skill", "ListMcpResourcesTool"),
        ),
        (PASS, (), (), None),
    ),
}
#: the MCP server's ``read_verified``: a read of the hand-off it names (judged as the caller)
_READ_VERIFIED: Spec = (READ, ("artifact",), (), "tool_input.artifact")
_SHELLS = frozenset({"Bash", "PowerShell", "shell", "exec_command", "local_shell"})
_CURSOR_FILE = ("file_path", "path", "target_file")
_CURSOR_TOOLS: dict[str, Spec] = {
    "Read": (READ, _CURSOR_FILE, (), None),
    "Write": (WRITE, _CURSOR_FILE, (), None),
}
_GEMINI_TOOLS: dict[str, Spec] = {
    **dict.fromkeys(("write_file", "replace"), (WRITE, ("file_path", "path"), (), None)),
    **dict.fromkeys(
        ("glob", "list_directory"), (LIST, ("path", "dir_path"), ("pattern", "include"), None)
    ),
    **dict.fromkeys(
        ("search_file_content", "grep"),
        (SEARCH, ("path", "dir_path"), ("pattern", "include"), None),
    ),
}
_GEMINI_READ = {"read_file": ("absolute_path", "file_path", "path"), "read_many_files": ("paths",)}
_COPILOT_TOOLS: dict[str, Spec] = {
    "view": (READ, ("path", "file_path"), (), "a path"),
    **dict.fromkeys(("edit", "create"), (WRITE, ("path", "file_path"), (), "a path")),
}


def _call(
    host: str, tool: str, spec: Spec, args: dict[str, Any], cwd: str, receiver: str | None
) -> ToolCall:
    kind, keys, pattern_keys, missing = spec
    paths = _paths(args, keys, cwd)
    if missing is not None and not paths:
        raise HookInputError(f"{tool} without {missing}")
    if kind == SEARCH or kind == LIST:
        paths = paths or [cwd]
    patterns = [v for k in pattern_keys if isinstance(v := args.get(k), str) and v]
    return ToolCall(
        host, tool, kind, cwd, paths=paths, patterns=patterns, receiver=receiver, tool_input=args
    )


def _dialect(
    host: str,
    tool: str,
    args: dict[str, Any],
    cwd: str,
    table: dict[str, Spec],
    claude: dict[str, str],
) -> ToolCall:
    """A tool of ``table``, else the Claude Code tool ``claude`` maps it to, else generic."""
    if tool in table:
        return _call(host, tool, table[tool], args, cwd, None)
    if tool in claude:
        return claude_tool_call(host, claude[tool], args, cwd, None)
    return _generic(host, tool, args, cwd, None)


def claude_tool_call(
    host: str, tool: str, tool_input: dict[str, Any], cwd: str, receiver: str | None
) -> ToolCall:
    """Claude Code's tool names (also Codex's, which reuses them)."""
    if tool in _SHELLS:
        command = tool_input.get("command")
        if isinstance(command, list) and all(isinstance(c, str) for c in command):
            command = " ".join(_quote(c) for c in command)
        if not isinstance(command, str):
            raise HookInputError(f"{tool} without a string tool_input.command")
        return ToolCall(host, tool, SHELL, cwd, command=command, receiver=receiver)
    if tool == "apply_patch":
        command = tool_input.get("command") or tool_input.get("patch") or tool_input.get("input")
        if not isinstance(command, str):
            raise HookInputError("apply_patch without a string patch")
        paths = [_abs(p, cwd) for p in patch_paths(command)]
        return ToolCall(host, tool, WRITE, cwd, paths=paths, receiver=receiver)
    if tool in ("Agent", "Task") and receiver is None:
        target = tool_input.get("subagent_type")
        if target is not None and not isinstance(target, str):
            raise HookInputError(f"{tool} with a subagent_type that is not a string")
        return ToolCall(host, tool, DISPATCH, cwd, receiver=None, target=target or None)
    spec = _CLAUDE_TOOLS.get(tool)
    if spec is None and tool.startswith("mcp__eidolons") and tool.endswith("__read_verified"):
        spec = _READ_VERIFIED  # the gate's own reader, unbound or bound (eidolons-<R>)
    if spec is not None:
        return _call(host, tool, spec, tool_input, cwd, receiver)
    return _generic(host, tool, tool_input, cwd, receiver)


def _quote(word: str) -> str:
    if word and all(c.isalnum() or c in "@%+=:,./-_" for c in word):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


def patch_paths(patch: str) -> list[str]:
    """The files an ``apply_patch`` patch adds, updates, deletes or moves to."""
    out = []
    for line in patch.splitlines():
        for marker in ("*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "):
            if line.startswith(marker):
                out.append(line[len(marker) :].strip())
    return out


def _pre_tool_use(host: str, doc: dict[str, Any]) -> ToolCall:
    """Claude Code's and Codex's ``PreToolUse`` event."""
    if doc.get("hook_event_name") != "PreToolUse":
        raise HookInputError("hook_event_name must be PreToolUse")
    tool = _str(doc, "tool_name")
    return claude_tool_call(host, tool, _obj(doc, "tool_input"), _cwd(doc), _receiver(doc))


def parse_cursor(doc: dict[str, Any]) -> ToolCall:
    roots = doc.get("workspace_roots")
    fallback = roots[0] if isinstance(roots, list) and roots and isinstance(roots[0], str) else None
    fallback = fallback or os.environ.get("CURSOR_PROJECT_DIR")
    cwd = _cwd(doc, fallback)
    event = doc.get("hook_event_name")
    if event in ("beforeReadFile", "beforeTabFileRead"):
        path = _str(doc, "file_path")
        return ToolCall("cursor", "Read", READ, cwd, paths=[_abs(path, cwd)])
    if event == "beforeShellExecution":
        return ToolCall("cursor", "Shell", SHELL, cwd, command=_str(doc, "command"))
    if event == "preToolUse":
        tool = _str(doc, "tool_name")
        tool_input = _obj(doc, "tool_input")
        to_claude = {"Shell": "Bash", "Grep": "Grep", "Task": "Task"}
        return _dialect("cursor", tool, tool_input, cwd, _CURSOR_TOOLS, to_claude)
    if event == "beforeMCPExecution":
        return _generic("cursor", _str(doc, "tool_name"), doc.get("tool_input"), cwd, None)
    raise HookInputError(f"hook_event_name {event!r} is not an event this hook gates")


def _glob_root(pattern: str) -> str:
    """The directory a glob pattern searches: its components before the first wildcard."""
    parts = pattern.split(os.sep)
    for i, part in enumerate(parts):
        if any(c in part for c in "*?["):
            return os.sep.join(parts[:i]) or os.sep
    return pattern


def parse_gemini(doc: dict[str, Any]) -> ToolCall:
    if doc.get("hook_event_name") != "BeforeTool":
        raise HookInputError("hook_event_name must be BeforeTool")
    cwd = _cwd(doc)
    tool = _str(doc, "tool_name")
    args = _obj(doc, "tool_input")
    if tool in _GEMINI_READ:
        paths = _paths(args, _GEMINI_READ[tool], cwd)
        if not paths:
            raise HookInputError(f"{tool} without a path")
        include = args.get("include")
        globs = [p for p in paths if any(c in p for c in "*?[")] + (
            [_abs(i, cwd) for i in include if isinstance(i, str)]
            if isinstance(include, list)
            else []
        )
        dirs = [p for p in paths if os.path.isdir(p)]
        if globs or dirs:  # many files at once: judged as a search of where they lie
            roots = [_glob_root(g) for g in globs] + dirs
            names = [os.path.basename(g) for g in globs]
            files = [p for p in paths if p not in globs and p not in dirs]
            return ToolCall("gemini", tool, SEARCH, cwd, paths=roots + files, patterns=names)
        return ToolCall("gemini", tool, READ, cwd, paths=paths)
    if tool == "run_shell_command":
        command = _str(args, "command")
        directory = args.get("directory")
        if isinstance(directory, str) and directory:
            cwd = _abs(directory, cwd)
        return ToolCall("gemini", tool, SHELL, cwd, command=command)
    return _dialect("gemini", tool, args, cwd, _GEMINI_TOOLS, {})


def parse_copilot(doc: dict[str, Any]) -> ToolCall:
    cwd = _cwd(doc)
    tool = _str(doc, "toolName")
    raw_args = doc.get("toolArgs")
    if isinstance(raw_args, str):
        args = loads_event(raw_args.encode("utf-8", "surrogatepass"))
    elif isinstance(raw_args, dict):
        args = raw_args
    else:
        raise HookInputError("toolArgs must be a JSON string")
    return _dialect("copilot", tool, args, cwd, _COPILOT_TOOLS, {"bash": "Bash"})


PARSERS = {
    "claude-code": lambda doc: _pre_tool_use("claude-code", doc),
    "codex": lambda doc: _pre_tool_use("codex", doc),
    "cursor": parse_cursor,
    "gemini": parse_gemini,
    "copilot": parse_copilot,
}


# --- the layout -------------------------------------------------------------------------


_real = realpath


def find_root(cwd: str) -> str:
    """The root :func:`eidolons.io.config.find_root` finds from ``cwd``: the one ancestor
    walk, :func:`eidolons.io.paths.marked_root`, without importing pathlib."""
    from eidolons.io.paths import marked_root

    return marked_root(cwd) or _real(cwd)


def user_key_dir() -> str:
    """The signing keys outside the project: ``EIDOLONS_KEY_DIR``, else the config dir."""
    explicit = os.environ.get("EIDOLONS_KEY_DIR")
    if explicit:
        return explicit
    from eidolons.io.paths import config_dir  # the one rule (os and stat only)

    return config_dir()


def key_dirs(root: str) -> tuple[str, ...]:
    """The project's ``.eidolons/keys`` and the user's key directory; with
    ``EIDOLONS_KEY_DIR``, the config directory too (heads and indexes, ADR 0018)."""
    dirs = (os.path.join(root, STATE_DIR, "keys"), _real(user_key_dir()))
    if not os.environ.get("EIDOLONS_KEY_DIR"):
        return dirs
    from eidolons.io.paths import config_dir

    return (*dirs, _real(config_dir()))


# Claude Code's wiring, the same at the project and the user level: skills, commands and
# plugins carry ``hooks:`` of their own (run outside the sandbox, where the signing key can
# be read)
_CLAUDE_FILES = ("settings.json", "settings.local.json", "agents", "skills", "commands", "hooks")
_CLAUDE_WIRING = tuple(os.path.join(".claude", name) for name in (*_CLAUDE_FILES, "plugins"))
# the other hosts' hook and settings files, the same at both levels
_OTHER_HOST_WIRING = (
    os.path.join(".cursor", "hooks.json"),
    os.path.join(".codex", "hooks.json"),
    os.path.join(".codex", "config.toml"),
    os.path.join(".gemini", "settings.json"),
)

WIRING_FILES = (
    *_CLAUDE_WIRING,
    os.path.join(".agents", "skills"),
    ".mcp.json",
    # the ignored files Claude Code copies, outside the sandbox, into a subagent's worktree
    # (``isolation: worktree``), where every shell reads them
    ".worktreeinclude",
    *_OTHER_HOST_WIRING,
    os.path.join(".github", "hooks"),
)


# the same wiring in the user's home (hooks merge across levels, and a user-level
# ``disableAllHooks`` turns the project's hooks off), and the managed-policy directory
USER_WIRING_FILES = (*_CLAUDE_WIRING, ".claude.json", *_OTHER_HOST_WIRING)
MANAGED_WIRING = (os.path.join(os.sep, "etc", "claude-code"),)


def gate_code(root: str | None = None) -> tuple[str, ...]:
    """The code the hook runs (ADR 0015): the package, site-packages (a ``.pth`` there runs
    at every start), the interpreter with its directory, the standard library, and the
    interpreter's prefixes (a venv's ``pyvenv.cfg`` names the interpreter and the standard
    library it starts with). Rewriting any of them rewrites the gate. A path that holds
    the project ``root`` is left out (a prefix of ``$HOME``): the project is not code."""
    import site  # already imported at start-up (no -S)
    import sys

    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    python = os.path.abspath(sys.executable) if sys.executable else ""
    interpreter = (python, os.path.dirname(python), realpath(python)) if python else ()
    stdlib = os.path.dirname(os.__file__)
    code = (package, *site.getsitepackages(), *interpreter, stdlib, sys.prefix, sys.base_prefix)
    real = _real(root) if root is not None else None
    return tuple(p for p in code if real is None or not is_relative_to(real, _real(p)))


class Layout:
    """The paths the hook protects, resolved once per event."""

    __slots__ = (
        "_index",
        "_key_dirs",
        "copies_dir",
        "handoff_dirs",
        "root",
        "state_dir",
        "store_dir",
        "wiring",
    )

    def __init__(self, root: str, extra_handoff_dirs: tuple[str, ...] = ()) -> None:
        self.root = _real(root)
        self._index: bytes | bool | None = False  # False: not read yet
        self._key_dirs: tuple[str, ...] | None = None  # looked up when first needed
        self.state_dir = os.path.join(self.root, STATE_DIR)
        self.handoff_dirs = tuple(
            _real(os.path.join(self.root, d)) for d in (HANDOFF_DIR, *extra_handoff_dirs)
        )
        self.store_dir = os.path.join(self.state_dir, "memory")
        self.copies_dir = os.path.join(self.root, COPIES_DIR)
        home = os.path.expanduser("~")
        self.wiring = (
            *(os.path.join(self.root, f) for f in WIRING_FILES),
            *(os.path.join(home, f) for f in USER_WIRING_FILES),
            *MANAGED_WIRING,
            *gate_code(self.root),
        )

    @property
    def key_dirs(self) -> tuple[str, ...]:
        """:func:`key_dirs`, found on first use (a call that touches no file needs none)."""
        if self._key_dirs is None:
            self._key_dirs = key_dirs(self.root)
        return self._key_dirs

    def handoff_dir(self, real: str) -> bool:
        return any(is_relative_to(real, d) for d in self.handoff_dirs)

    def key_dir(self, real: str) -> bool:
        """Under a signing-key directory: no agent reads or writes there."""
        return any(is_relative_to(real, d) for d in self.key_dirs)

    def classify_read(self, path: str) -> str | None:
        """HANDOFF, KEY, STORE, or None for a file that is none of ECL's business."""
        real = _real(path)
        if self.key_dir(real):
            return KEY
        if self.handoff_dir(real):
            return HANDOFF
        if is_relative_to(real, self.store_dir) or is_relative_to(real, self.copies_dir):
            return STORE
        if has_envelope(path) or (real != path and has_envelope(real)):
            return HANDOFF
        if self.links_to_handoff(real):
            return HANDOFF
        if self.trace_names(path):
            return HANDOFF
        return None

    def trace_names(self, path: str) -> bool:
        """Whether the trace may name ``path`` as a payload (its envelope deleted): the host's
        payload index answers when it covers every trace file, else the full rule
        (:func:`eidolons.gates.trigger.find_handoff`). True sends the read to the gate."""
        from eidolons.io.paths import foreign_projects, names, payload_index, rules_out

        if foreign_projects(path, self.root):  # another project holds it: its rules too
            return not rules_out(path, self.root) and self._full_rule(path)
        if self._index is False:
            self._index = payload_index(self.root)
        index = self._index
        if isinstance(index, bytes):
            return names(index, path, self.root)
        return self._full_rule(path)

    def _full_rule(self, path: str) -> bool:
        from eidolons.gates.trigger import find_handoff

        return find_handoff(path, self.root) is not None

    def links_to_handoff(self, real: str) -> bool:
        """Whether ``real`` is a hard link to a file in a hand-off directory (looked up only
        for a file of more than one link; past :data:`MAX_LINK_SCAN` entries, or an entry
        or directory that cannot be read while scanned: yes, it cannot be ruled out)."""
        try:
            st = os.stat(real)
        except OSError:
            return False
        if st.st_nlink < 2 or not (st.st_mode & 0o170000 == 0o100000):
            return False
        identity = (st.st_dev, st.st_ino)
        seen = 0
        stack = list(self.handoff_dirs)
        while stack:
            try:
                listing = os.scandir(stack.pop())
            except FileNotFoundError:
                continue  # no such hand-off directory
            except OSError:
                return True  # one that cannot be listed: what it holds is unseen
            try:
                with listing as it:
                    for entry in it:
                        seen += 1
                        if seen > MAX_LINK_SCAN:
                            return True  # too many to rule out: fail closed
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            est = entry.stat(follow_symlinks=False)
                            if (est.st_dev, est.st_ino) == identity:
                                return True
            except OSError:
                return True  # changed while scanned: the rest unseen, so fail closed
        return False

    def classify_write(self, path: str) -> str | None:
        """KEY, STATE or WIRING for a path no agent may write, else None."""
        real = _real(path)
        if self.key_dir(real):
            return KEY
        if self.handoff_dir(real):
            return HANDOFF  # sealed: only a new payload file may be created there
        if is_relative_to(real, self.state_dir):
            return STATE
        if any(is_relative_to(real, w) or is_relative_to(path, w) for w in self.wiring):
            return WIRING
        return None


def has_envelope(path: str) -> bool:
    """The receiver gate's trigger: ``path`` is an envelope or one of its
    :func:`eidolons.io.paths.envelope_candidates` exists."""
    from eidolons.io.paths import envelope_candidates

    if path.endswith(ENVELOPE_SUFFIX):
        return True
    return any(os.path.lexists(p) for p in envelope_candidates(path))
