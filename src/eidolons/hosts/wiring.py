"""What ``eidolons init`` writes into each host's configuration (ADR 0015, ADR 0016), and
how ``doctor`` and the hook read it back.

Pure over JSON documents: :func:`plan` gives each host's entries, :func:`merge` adds them
without disturbing foreign entries (re-running is a no-op), :func:`unmerge` removes
exactly them; an entry is ours when it runs the launcher or the bootstrap
(:func:`is_ours`). Claude Code's shared files name no machine path; the per-machine facts
(the interpreter, the key directories, the gate's code) go to ``settings.local.json``.
"""

from __future__ import annotations

import json
import os
import shlex

from eidolons.hosts.hook.fast import BOOTSTRAP, LEGACY_BOOTSTRAPS, command_argv
from eidolons.io.files import read_text
from eidolons.io.paths import (
    CONFIG_FILE,
    COPIES_DIR,
    GITIGNORE_FILE,
    HANDOFF_DIR,
    IGNORE_FILE,
    SEALED_FILE,
    STATE_DIR,
    STORE_FILE,
    TRACE_DIR,
    is_relative_to,
    realpath,
)

TYPE_CHECKING = False  # as typing.TYPE_CHECKING: the hook's Bash check loads neither module
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

MANIFEST_FILE = os.path.join(STATE_DIR, "init.json")

HOOK_TIMEOUT = 30  # seconds; the hook's own budget (10 s) stays well inside it
STATUS = "eidolons: ECL receiver gate"
HOSTS = ("claude-code", "cursor", "codex", "gemini", "copilot")
CLAUDE_SETTINGS = os.path.join(".claude", "settings.json")
CLAUDE_LOCAL = os.path.join(".claude", "settings.local.json")
MCP_FILE = ".mcp.json"
#: the launcher the Claude Code wiring runs (a protected path: no sandboxed shell writes it)
LAUNCHER = os.path.join(".claude", "hooks", "eidolons")
PYTHON_ENV = "EIDOLONS_PYTHON"
#: why a host's shell is not sealed by ``init`` (ADR 0015; README: hosts), for init and doctor
UNSEALED = {
    "cursor": "its sandbox has no deny inside the workspace",
    "codex": "a `sandbox_mode` in any configuration layer undoes a project's permission "
    "profile (an administrator can seal it: docs/hosts.md); a hook that cannot start lets "
    "the tool run (fails open)",
    "gemini": "it has no declarative deny on Linux; a hook that cannot start lets the tool "
    "run (fails open)",
    "copilot": "its sandbox lets the model retry outside it unless managed settings forbid "
    "it (docs/hosts.md)",
}


#: what the Claude Code seal does not cover (``init`` and ``doctor`` say it)
CLAUDE_CODE_GAP = (
    "claude-code: a `.claude/` directory a shell makes below the project root (such as "
    "`pkg/.claude/skills/`) is not write-protected: the sandbox denies writes only to the "
    "paths it names when it starts, and the hooks of a skill there would run outside it if "
    "the host loaded that skill (docs/hosts.md)"
)


def unsealed_note(host: str) -> str:
    """What the gate holds for on a host whose shell ``init`` does not seal."""
    return (
        f"{host}: the gate holds for the host's file tools and the MCP reader only, not for "
        f"its shell: {UNSEALED[host]}"
    )


CONFIG_FILES = {
    "claude-code": CLAUDE_SETTINGS,
    "cursor": os.path.join(".cursor", "hooks.json"),
    "codex": os.path.join(".codex", "hooks.json"),
    "gemini": os.path.join(".gemini", "settings.json"),
    "copilot": os.path.join(".github", "hooks", "eidolons.json"),
}
# read-only tools a receiver agent needs (plus the MCP server's reader)
RECEIVER_TOOLS = ("Read", "Grep", "Glob", "mcp__eidolons__read_verified")


class WiringError(Exception):
    """A host file cannot be merged (not a JSON object, a conflicting value)."""


def is_ours(entry: Any) -> bool:
    """An entry this tool wrote: it runs the launcher, today's bootstrap or an earlier one."""
    text = json.dumps(entry)  # a string in it is JSON-escaped: so is what is looked for
    marks = (BOOTSTRAP, *LEGACY_BOOTSTRAPS, "/" + LAUNCHER.replace(os.sep, "/"), STATUS)
    return any(json.dumps(b)[1:-1] in text for b in marks)


class Entry:
    """``value`` belongs in the list at ``pointer`` (keys from the document's top); with
    ``scalar``, ``value`` is what the key at ``pointer`` must hold (``previous``: what it
    held before, restored by ``undo``)."""

    __slots__ = ("pointer", "previous", "scalar", "value")

    def __init__(
        self, pointer: tuple[str, ...], value: Any, scalar: bool = False, previous: Any = None
    ) -> None:
        self.pointer = pointer
        self.value = value
        self.scalar = scalar
        self.previous = previous

    def to_dict(self) -> dict[str, Any]:
        doc = {"pointer": list(self.pointer), "value": self.value}
        if self.scalar:
            doc["scalar"] = True
            doc["previous"] = self.previous
        return doc

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> Entry:
        return cls(
            tuple(doc["pointer"]), doc["value"], bool(doc.get("scalar")), doc.get("previous")
        )


def claude_plan(
    root: str,
    python: str | None,
    extra_handoff_dirs: tuple[str, ...] = (),
    bound: tuple[str, ...] = (),
) -> dict[str, list[Entry]]:
    """Claude Code's wiring, file by file (relative path -> entries); the shared file and
    ``.mcp.json`` name no path of this machine. ``bound``: the agents that get an MCP
    server of their own, ``eidolons-<R>`` (``mcp serve --as R``), which tags a high-trust
    hand-off with the host's HMAC key and which the hook lets only subagent R call."""
    import sys

    from eidolons.hosts.hook.events import USER_WIRING_FILES, WIRING_FILES, gate_code, key_dirs

    handler = {
        "type": "command",
        "command": "${CLAUDE_PROJECT_DIR}/" + LAUNCHER.replace(os.sep, "/"),
        "args": ["hook", "claude-code"],
        "timeout": HOOK_TIMEOUT,
        "onFailure": "block",
        "statusMessage": STATUS,
    }
    state = "./" + STATE_DIR
    sealed_read = [f"{state}/{d}" for d in SEALED_STATE] + [
        "./" + d.replace(os.sep, "/") for d in extra_handoff_dirs
    ]
    shared = [Entry(("hooks", "PreToolUse"), {"matcher": "*", "hooks": [handler]})]
    shared += [
        Entry(("sandbox", key), value, scalar=True) for key, value in SANDBOX_SETTINGS.items()
    ]
    deny_read = (*sealed_read, "~/.config/eidolons")
    shared += [Entry(("sandbox", "filesystem", "denyRead"), d) for d in deny_read]
    # every host's wiring, not only Claude Code's (which its sandbox protects on its own): a
    # hook an agent writes for another host runs outside every sandbox there
    wiring = ["./" + f.replace(os.sep, "/") for f in WIRING_FILES]
    shared += [
        Entry(("sandbox", "filesystem", "denyWrite"), d)
        for d in (state, *sealed_read[len(SEALED_STATE) :], *wiring)
    ]
    # the host itself reads no hand-off either: a memory file (CLAUDE.md and its @-imports,
    # at any depth, or a link) names any path and is read outside every hook and sandbox.
    # A Read deny rule covers those reads, links' targets too, and the file tools: hand-offs
    # are read through the gate's MCP tool (read_verified) and written by emit; the gate's
    # own state is no tool's
    shared += [Entry(("permissions", "deny"), f"Read({d}/**)") for d in sealed_read]
    shared += [Entry(("permissions", "deny"), f"Edit({state}/{d})") for d in STATE_FILES]
    # the host's own rules for the file tools too: the hook judges a Write by the path it
    # resolves first, the host checks its rules on the path it resolves after, and refuses a
    # write whose resolution changed since; a directory name swapped by the shell between
    # the two is then still refused (measured: a Write through a link swapped to .codex/)
    shared += [Entry(("permissions", "deny"), r) for w in wiring for r in _edit_rules(w)]
    shared += [
        Entry(("permissions", "deny"), r)
        for w in USER_WIRING_FILES
        for r in _edit_rules("~/" + w.replace(os.sep, "/"))
    ]
    real_root = realpath(root)
    keys = [d for d in key_dirs(real_root) if not is_relative_to(d, real_root)]
    code = sorted({realpath(p) for p in gate_code(real_root) if p})
    local = [Entry(("env", PYTHON_ENV), python or sys.executable, scalar=True)]
    local += [
        Entry(("enabledMcpjsonServers",), n)
        for n in ("eidolons", *(f"eidolons-{b}" for b in bound))
    ]
    local += [Entry(("sandbox", "filesystem", "denyRead"), d) for d in keys]
    local += [Entry(("sandbox", "filesystem", "denyWrite"), d) for d in (*keys, *code)]
    local += [Entry(("permissions", "deny"), f"Read(/{d}/**)") for d in keys]
    local += [
        Entry(("permissions", "deny"), r) for d in (*keys, *code) for r in _edit_rules("/" + d)
    ]
    server = {"command": LAUNCHER.replace(os.sep, "/"), "args": ["mcp", "serve"]}
    mcp = [Entry(("mcpServers", "eidolons"), server, scalar=True)]
    for b in bound:
        bound_server = {**server, "args": ["mcp", "serve", "--as", b]}
        mcp.append(Entry(("mcpServers", f"eidolons-{b}"), bound_server, scalar=True))
    return {CLAUDE_SETTINGS: shared, CLAUDE_LOCAL: local, MCP_FILE: mcp}


def _edit_rules(path: str) -> tuple[str, str]:
    """The host's deny rules for every file tool's write of ``path`` (a rule's spelling:
    ``./`` the project, ``~/`` the home, ``//`` the file system's root) and of what lies
    under it (a file or a directory)."""
    return (f"Edit({path})", f"Edit({path}/**)")


#: the state under ``.eidolons/`` no shell may read: hand-offs, memory, the gate's copies, keys
SEALED_STATE = (
    os.path.relpath(HANDOFF_DIR, STATE_DIR),
    "memory",
    os.path.relpath(COPIES_DIR, STATE_DIR),
    "keys",
)
#: the gate's state under ``.eidolons/`` that no file tool may change
STATE_FILES = (
    *(
        os.path.relpath(p, STATE_DIR)
        for p in (
            IGNORE_FILE,
            GITIGNORE_FILE,
            CONFIG_FILE,
            SEALED_FILE,
            STORE_FILE,
            MANIFEST_FILE,
        )
    ),
    *(d + "/**" for d in (os.path.relpath(TRACE_DIR, STATE_DIR), "contracts", "refusals")),
    *(d + "/**" for d in ("keys", "memory", os.path.relpath(COPIES_DIR, STATE_DIR))),
    "trust.json",
)
#: strict mode: a shell that cannot be sandboxed does not run (ADR 0015)
SANDBOX_SETTINGS = {"enabled": True, "allowUnsandboxedCommands": False, "failIfUnavailable": True}


def launcher_text() -> str:
    """The launcher ``init`` writes to :data:`LAUNCHER`: this machine's interpreter comes
    from ``EIDOLONS_PYTHON`` (``.claude/settings.local.json``); without one it refuses,
    exit 2 (a deny, for a hook), in one line that says how to set it up."""
    return (
        "#!/bin/sh\n"
        "# Written by `eidolons init`: runs eidolons with this machine's interpreter, named\n"
        f"# by {PYTHON_ENV} in .claude/settings.local.json (per machine, not shared).\n"
        f'py="${{{PYTHON_ENV}:-}}"\n'
        'if [ -z "$py" ] || [ ! -x "$py" ]; then\n'
        '  echo "eidolons: denied: no interpreter for the gate on this machine '
        f"({PYTHON_ENV}=$py); run: pip install eidolons && eidolons init --hosts claude-code"
        '" >&2\n'
        "  exit 2\n"
        "fi\n"
        f'exec "$py" -I -c {shlex.quote(LAUNCH_BOOTSTRAP)} "$@"\n'
    )


# the launcher's Python: any escape (a broken install) is exit 2 and one line, never 1
LAUNCH_BOOTSTRAP = (
    "import os, sys; sys.excepthook = lambda t, v, b: (sys.stderr.write("
    "'eidolons: denied (internal error: %s: %s)\\n' % (t.__name__, v)), "
    "sys.stderr.flush(), os._exit(2)); "
    "from eidolons.cli.main import main; sys.exit(main(sys.argv[1:]))"
)


def plan(host: str, root: str, python: str | None = None) -> tuple[list[Entry], dict[str, Any]]:
    """The entries for ``host`` and the scalar settings the file must hold."""
    argv = command_argv(host, root, python)
    line = shlex.join(argv)
    if host == "claude-code":
        return claude_plan(root, python)[CLAUDE_SETTINGS], {}
    if host == "cursor":
        handler = {"command": line, "type": "command", "timeout": HOOK_TIMEOUT, "failClosed": True}
        events = ("beforeReadFile", "preToolUse", "beforeShellExecution", "beforeMCPExecution")
        return [Entry(("hooks", e), handler) for e in events], {"version": 1}
    command = {"type": "command", "command": line, "timeout": HOOK_TIMEOUT}
    if host == "codex":
        handler = {**command, "statusMessage": STATUS}
        return [Entry(("hooks", "PreToolUse"), {"hooks": [handler]})], {}
    if host == "gemini":
        handler = {**command, "timeout": HOOK_TIMEOUT * 1000, "name": "eidolons"}
        return [Entry(("hooks", "BeforeTool"), {"matcher": ".*", "hooks": [handler]})], {}
    if host == "copilot":
        handler = {"type": "command", "bash": line, "timeoutSec": HOOK_TIMEOUT, "comment": STATUS}
        return [Entry(("hooks", "preToolUse"), handler)], {"version": 1}
    raise WiringError(f"unknown host {host!r}")


_MISSING = object()


def _at(doc: dict[str, Any], pointer: tuple[str, ...], kind: type, create: bool = True) -> Any:
    """The ``kind`` (dict or list) at ``pointer``, made on the way when ``create`` (else
    None where a key is missing); raises :class:`WiringError` where the document differs."""
    node: Any = doc
    for i, key in enumerate(pointer):
        if not isinstance(node, dict):
            raise WiringError(f"{'.'.join(pointer[:i])} is not an object")
        if key not in node:
            if not create:
                return None
            node[key] = kind() if i == len(pointer) - 1 else {}
        node = node[key]
    if not isinstance(node, kind):
        raise WiringError(f"{'.'.join(pointer)} is not {'an object' if kind is dict else 'a list'}")
    return node


def merge(doc: dict[str, Any], entries: list[Entry], scalars: dict[str, Any]) -> list[Entry]:
    """Add ``entries`` to ``doc`` in place; return those that changed it. A hook entry of
    ours already present is replaced where it stands; a plain value already present is
    left alone (it may be the user's own)."""
    for key, value in scalars.items():
        if key in doc and doc[key] != value:
            raise WiringError(f"{key} is {doc[key]!r}, this tool writes {value!r}")
        doc[key] = value
    changed = []
    for entry in entries:
        if entry.scalar:
            parent = _at(doc, entry.pointer[:-1], dict)
            key = entry.pointer[-1]
            if parent.get(key, _MISSING) != entry.value:
                entry.previous = parent.get(key)
                parent[key] = entry.value
                changed.append(entry)
            continue
        items = _at(doc, entry.pointer, list)
        if entry.value in items:
            continue
        if isinstance(entry.value, dict):
            mine = [i for i, item in enumerate(items) if is_ours(item)]
            if mine:
                items[mine[0]] = entry.value
                for i in reversed(mine[1:]):
                    del items[i]
                changed.append(entry)
                continue
        items.append(entry.value)
        changed.append(entry)
    return changed


def unmerge(doc: dict[str, Any], entries: list[Entry]) -> int:
    """Remove ``entries`` (and any hook entry of ours) from ``doc``; prune the containers
    left empty. Returns how many values were removed."""
    removed = 0
    for entry in entries:
        if entry.scalar:
            try:
                parent = _at(doc, entry.pointer[:-1], dict)
            except WiringError:
                continue
            key = entry.pointer[-1]
            if parent.get(key, _MISSING) == entry.value:
                if entry.previous is None:
                    del parent[key]
                else:
                    parent[key] = entry.previous
                removed += 1
                _prune(doc, entry.pointer)
            continue
        items = _at(doc, entry.pointer, list, create=False)
        if items is None:
            continue
        keep = [i for i in items if i != entry.value and not (isinstance(i, dict) and is_ours(i))]
        removed += len(items) - len(keep)
        items[:] = keep
        _prune(doc, entry.pointer)
    return removed


def _prune(doc: dict[str, Any], pointer: tuple[str, ...]) -> None:
    for depth in range(len(pointer), 0, -1):
        parent: Any = doc
        for key in pointer[: depth - 1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        key = pointer[depth - 1]
        if isinstance(parent, dict) and parent.get(key) in ([], {}):
            del parent[key]


# --- checks (doctor) -------------------------------------------------------------------


def _matcher_covers(matcher: Any, tool: str) -> bool:
    if matcher in (None, "", "*"):
        return True
    if not isinstance(matcher, str):
        return False
    if all(c.isalnum() or c in "_-|, " for c in matcher):
        names = {m.strip() for m in matcher.replace(",", "|").split("|")}
        return tool in names
    import re

    try:
        return re.search(matcher, tool) is not None
    except re.error:
        return False


def read_deny_problems(root: str, docs: list[Any], handoff_dirs: tuple[str, ...]) -> list[str]:
    """Why the host itself could read a hand-off, or ``[]``: every hand-off directory
    (real paths under the real ``root``) needs a ``Read(./DIR/**)`` deny rule in the shared
    or the local settings ``docs``, or a memory file (CLAUDE.md and its @-imports, at any
    depth, or a link) brings its bytes into an agent's context outside every hook."""
    rules: set[str] = set()
    for doc in docs:
        permissions = doc.get("permissions") if isinstance(doc, dict) else None
        deny = permissions.get("deny") if isinstance(permissions, dict) else None
        rules.update(r for r in (deny if isinstance(deny, list) else []) if isinstance(r, str))
    problems = []
    for directory in handoff_dirs:
        rel = os.path.relpath(directory, root).replace(os.sep, "/")
        if not {f"Read(./{rel}/**)", f"Read(/{directory}/**)"} & rules:
            problems.append(
                f"no permissions.deny rule Read(./{rel}/**): a memory file (CLAUDE.md, its "
                "@-imports, a link) could bring a hand-off into an agent's context without the "
                "gate (run eidolons init)"
            )
    return problems


def check_claude_settings(doc: Any) -> list[str]:
    """What is wrong with the gate's wiring in a Claude Code settings document."""
    if not isinstance(doc, dict):
        return ["is not a JSON object"]
    groups = doc.get("hooks", {}).get("PreToolUse") if isinstance(doc.get("hooks"), dict) else None
    if not isinstance(groups, list):
        return ["no PreToolUse hook: the receiver gate is not wired (run eidolons init)"]
    ours = [
        (group, handler)
        for group in groups
        if isinstance(group, dict)
        for handler in (group.get("hooks") or [])
        if isinstance(handler, dict) and _runs_the_hook(handler)
    ]
    if not ours:
        return ["no PreToolUse hook runs `eidolons hook claude-code` (run eidolons init)"]
    problems = []
    for group, handler in ours:
        for tool in ("Read", "Bash", "Grep", "Glob"):
            if not _matcher_covers(group.get("matcher"), tool):
                problems.append(
                    f"the hook's matcher {group.get('matcher')!r} does not cover {tool}"
                )
        if handler.get("onFailure") != "block":
            problems.append(
                'the hook has no "onFailure": "block": a crash or timeout lets the read through'
            )
        timeout = handler.get("timeout")
        if not isinstance(timeout, (int, float)) or timeout < 15:
            problems.append(f"the hook's timeout {timeout!r} is missing or under 15 seconds")
        command = handler.get("command")
        if command != "${CLAUDE_PROJECT_DIR}/" + LAUNCHER.replace(os.sep, "/") or (
            "--root" in (handler.get("args") or [])
        ):
            problems.append(
                f"the hook runs {command!r}, a path of one machine (a clone or a moved "
                "project blocks every tool call or gates another root): run eidolons init"
            )
    return problems


def _runs_the_hook(handler: dict[str, Any]) -> bool:
    text = " ".join(str(x) for x in [handler.get("command", ""), *(handler.get("args") or [])])
    return any(b in text for b in (BOOTSTRAP, *LEGACY_BOOTSTRAPS)) or (
        "eidolons" in text and "hook" in text
    )


def check_cursor_hooks(doc: Any) -> list[str]:
    if not isinstance(doc, dict) or not isinstance(doc.get("hooks"), dict):
        return ["no hooks: the receiver gate is not wired (run eidolons init --hosts cursor)"]
    problems = []
    for event in ("beforeReadFile", "preToolUse"):
        handlers = [
            h for h in doc["hooks"].get(event) or [] if isinstance(h, dict) and _runs_the_hook(h)
        ]
        if not handlers:
            problems.append(f"no {event} hook runs eidolons")
        for h in handlers:
            if h.get("failClosed") is not True:
                problems.append(f'the {event} hook lacks "failClosed": true (Cursor fails open)')
    return problems


def agent_names(root: str) -> list[str]:
    """The ``name`` of each Claude Code agent definition in ``.claude/agents/``."""
    return [name for _, name, _ in _agents(root)]


def _agents(root: str) -> list[tuple[str, str, dict[str, Any]]]:
    directory = os.path.join(root, ".claude", "agents")
    try:
        files = sorted(os.listdir(directory))
    except OSError:
        return []
    out = []
    for file in files:
        if not file.endswith(".md"):
            continue
        path = os.path.join(directory, file)
        meta = _front_matter(path)
        if meta is not None and isinstance(meta.get("name"), str):
            out.append((path, meta["name"], meta))
    return out


def receiver_agent_findings(root: str, receivers: set[str]) -> list[tuple[str, str]]:
    """(file, advice) for each Claude Code agent file of a receiver that names no tools
    (it then inherits every tool, MCP servers of any kind included), or that lacks the
    gate's reader. Bash and Write are fine where the sandbox seals the shell: a receiver
    that also sends (SPECTRA, APIVR) keeps Write and a sandboxed shell (ADR 0015)."""
    out: list[tuple[str, str]] = []
    allow = ", ".join(RECEIVER_TOOLS)
    for path, agent, meta in _agents(root):
        if agent not in receivers:
            continue
        tools = meta.get("tools")
        if tools is None:
            advice = (
                f"receiver {agent} names no tools: it inherits every tool; set `tools: "
                f"{allow}` (and Write, Bash, mcp__eidolons__emit if it also hands work on)"
            )
            out.append((path, advice))
            continue
        listed = {
            str(t).strip() for t in (tools if isinstance(tools, list) else str(tools).split(","))
        }
        if "Read" not in listed and "mcp__eidolons__read_verified" not in listed:
            out.append((path, f"receiver {agent} has neither Read nor {RECEIVER_TOOLS[-1]}"))
    return out


def _front_matter(path: str) -> dict[str, Any] | None:
    try:
        text = read_text(path, 64 * 1024)
    except (OSError, UnicodeDecodeError):
        return None
    if text is None or not text.startswith("---"):
        return None
    end = text.find("\n---", 3)
    if end < 0:
        return None
    import yaml

    try:
        meta = yaml.safe_load(text[3:end])
    except yaml.YAMLError:
        return None
    return meta if isinstance(meta, dict) else None


# --- the sandbox, as the hook and doctor read it back ------------------------------------


def _settings(root: str, rel: str) -> tuple[dict[str, Any] | None, str | None]:
    path = os.path.join(root, rel)
    try:
        text = read_text(path, 1024 * 1024)
        doc = None if text is None else json.loads(text)
    except (OSError, ValueError) as exc:
        return None, f"{rel} cannot be read ({exc.__class__.__name__})"
    if text is None:
        return None, None
    if not isinstance(doc, dict):
        return None, f"{rel} is not a JSON object"
    return doc, None


def resolve_setting_path(entry: Any, root: str) -> str | None:
    """A ``sandbox.filesystem`` path as Claude Code reads one in project settings: ``~/``
    from home, ``/`` absolute (``//`` too), anything else from the project root."""
    if not isinstance(entry, str) or not entry:
        return None
    path = entry.rstrip("/") or "/"
    if path.startswith("~/") or path == "~":
        path = os.path.expanduser(path)
    elif not path.startswith("/"):
        path = os.path.join(root, path)
    if path.endswith("/**"):
        path = path[:-3]
    return realpath(os.path.normpath(path))


def sandbox_paths(docs: Iterable[dict[str, Any]], key: str, root: str) -> list[str]:
    """Every ``sandbox.filesystem.<key>`` path of the settings ``docs``, resolved."""
    out = []
    for doc in docs:
        sandbox = doc.get("sandbox")
        filesystem = sandbox.get("filesystem") if isinstance(sandbox, dict) else None
        items = filesystem.get(key) if isinstance(filesystem, dict) else None
        for item in items if isinstance(items, list) else []:
            path = resolve_setting_path(item, root)
            if path:
                out.append(path)
    return out


def sandbox_problems(root: str, handoff_dirs: tuple[str, ...]) -> list[str]:
    """Why the project's Claude Code sandbox does not seal the shell, or ``[]``: it must be
    enabled in strict mode (``allowUnsandboxedCommands: false``), and every hand-off
    directory must lie under a ``denyRead`` path that no ``allowRead`` path re-opens. The
    shared and the local settings are read as Claude Code merges them (the local value of
    a key wins; lists add up)."""
    docs: list[dict[str, Any]] = []
    merged: dict[str, Any] = {}
    for rel in (CLAUDE_SETTINGS, CLAUDE_LOCAL):
        doc, problem = _settings(root, rel)
        if problem:
            return [problem]
        docs.append(doc or {})
        sandbox = docs[-1].get("sandbox")
        if isinstance(sandbox, dict):
            merged.update({k: v for k, v in sandbox.items() if k != "filesystem"})
    if merged.get("enabled") is not True:
        return ["the Claude Code sandbox is not enabled (sandbox.enabled)"]
    if merged.get("allowUnsandboxedCommands") is not False:
        return ["the sandbox lets a command run outside it (sandbox.allowUnsandboxedCommands)"]
    denied = sandbox_paths(docs, "denyRead", root)
    opened = sandbox_paths(docs, "allowRead", root)
    for directory in handoff_dirs:
        if not any(is_relative_to(directory, d) for d in denied):
            return [f"the sandbox does not hide {directory} from the shell (denyRead)"]
        if any(is_relative_to(directory, o) or is_relative_to(o, directory) for o in opened):
            return [f"an allowRead path re-opens {directory} to the shell"]
    return []
