"""What ``eidolons init`` writes into each host's configuration, and how to find it again.

Pure over JSON documents (dicts): :func:`plan` says, per host, which file holds the hook
and which entries go where; :func:`merge` adds them to a document without disturbing
foreign entries (an entry of ours already there is replaced in place, so re-running is
a no-op); :func:`unmerge` removes exactly what was added. An entry is ours when it runs
:data:`eidolons.hooks.fast.BOOTSTRAP` (:func:`is_ours`). ``doctor`` reads the same plan to
check the wiring (:func:`check_claude_settings` and friends).

Per host (facts in ``shared/hosts/README.md``):

- claude-code, ``.claude/settings.json``: one ``PreToolUse`` group, matcher ``*`` (every
  tool: Read, Grep, Glob, Bash, Write/Edit, MCP), exec form (``command`` + ``args``: no
  shell), ``timeout`` 30 s, ``"onFailure": "block"``; ``permissions.deny`` rules keeping
  the keys and memory unreadable and the gate's state unwritable; ``sandbox.filesystem``
  lists to the same effect (OS-level, for Bash, once the user enables the sandbox).
- cursor, ``.cursor/hooks.json``: ``beforeReadFile``, ``preToolUse``,
  ``beforeShellExecution``, ``beforeMCPExecution``, each ``"failClosed": true``.
- codex, ``.codex/hooks.json``: one ``PreToolUse`` group without matcher (every tool).
- gemini, ``.gemini/settings.json``: ``BeforeTool`` with matcher ``.*``.
- copilot, ``.github/hooks/eidolons.json``: ``preToolUse`` (a file of its own).
"""

from __future__ import annotations

import json
import os
import shlex
from typing import Any

from eidolons.hooks.fast import BOOTSTRAP, LEGACY_BOOTSTRAPS, command_argv

HOOK_TIMEOUT = 30  # seconds; the hook's own budget (10 s) stays well inside it
STATUS = "eidolons: ECL receiver gate"
HOSTS = ("claude-code", "cursor", "codex", "gemini", "copilot")
CONFIG_FILES = {
    "claude-code": os.path.join(".claude", "settings.json"),
    "cursor": os.path.join(".cursor", "hooks.json"),
    "codex": os.path.join(".codex", "hooks.json"),
    "gemini": os.path.join(".gemini", "settings.json"),
    "copilot": os.path.join(".github", "hooks", "eidolons.json"),
}
# read-only tools a receiver agent needs (plus the MCP server's reader)
RECEIVER_TOOLS = ("Read", "Grep", "Glob", "mcp__eidolons__read_verified")
SHELL_OR_WRITE_TOOLS = frozenset(
    {"Bash", "PowerShell", "Write", "Edit", "MultiEdit", "NotebookEdit", "KillShell"}
)


class WiringError(Exception):
    """A host file cannot be merged (not a JSON object, a conflicting value)."""


def is_ours(entry: Any) -> bool:
    """An entry this tool wrote: it runs today's bootstrap or an earlier version's."""
    text = json.dumps(entry)  # a string in it is JSON-escaped: so is what is looked for
    return any(json.dumps(b)[1:-1] in text for b in (BOOTSTRAP, *LEGACY_BOOTSTRAPS))


class Entry:
    """``value`` belongs in the list at ``pointer`` (keys from the document's top)."""

    __slots__ = ("pointer", "value")

    def __init__(self, pointer: tuple[str, ...], value: Any) -> None:
        self.pointer = pointer
        self.value = value

    def to_dict(self) -> dict[str, Any]:
        return {"pointer": list(self.pointer), "value": self.value}

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> Entry:
        return cls(tuple(doc["pointer"]), doc["value"])


def plan(host: str, root: str, python: str | None = None) -> tuple[list[Entry], dict[str, Any]]:
    """The entries for ``host`` and the scalar settings the file must hold."""
    argv = command_argv(host, root, python)
    line = shlex.join(argv)
    if host == "claude-code":
        handler = {
            "type": "command",
            "command": argv[0],
            "args": argv[1:],
            "timeout": HOOK_TIMEOUT,
            "onFailure": "block",
            "statusMessage": STATUS,
        }
        from eidolons.hooks.events import key_dirs
        from eidolons.knownhandoff import CONFIG_FILE, IGNORE_FILE, STATE_DIR, TRACE_DIR

        state = os.path.join(root, STATE_DIR)

        keys = key_dirs(root)
        deny = [f"Read(/{d}/**)" for d in (*keys, os.path.join(state, "memory"))]
        deny += [
            f"Edit(/{p})"
            for p in (
                os.path.join(root, TRACE_DIR, "**"),
                os.path.join(state, "trust.json"),
                os.path.join(state, "contracts", "**"),
                os.path.join(state, "refusals", "**"),
                os.path.join(root, IGNORE_FILE),
                os.path.join(root, CONFIG_FILE),
            )
        ]
        entries = [Entry(("hooks", "PreToolUse"), {"matcher": "*", "hooks": [handler]})]
        entries += [Entry(("permissions", "deny"), rule) for rule in deny]
        entries += [Entry(("sandbox", "filesystem", "denyRead"), d) for d in keys]
        entries += [
            Entry(("sandbox", "filesystem", "denyWrite"), os.path.join(state, p))
            for p in (os.path.basename(TRACE_DIR), "trust.json", "contracts", "keys", "refusals")
        ]
        return entries, {}
    if host == "cursor":
        handler = {"command": line, "type": "command", "timeout": HOOK_TIMEOUT, "failClosed": True}
        events = ("beforeReadFile", "preToolUse", "beforeShellExecution", "beforeMCPExecution")
        return [Entry(("hooks", e), handler) for e in events], {"version": 1}
    if host == "codex":
        handler = {
            "type": "command",
            "command": line,
            "timeout": HOOK_TIMEOUT,
            "statusMessage": STATUS,
        }
        return [Entry(("hooks", "PreToolUse"), {"hooks": [handler]})], {}
    if host == "gemini":
        handler = {
            "type": "command",
            "command": line,
            "timeout": HOOK_TIMEOUT * 1000,
            "name": "eidolons",
        }
        return [Entry(("hooks", "BeforeTool"), {"matcher": ".*", "hooks": [handler]})], {}
    if host == "copilot":
        handler = {"type": "command", "bash": line, "timeoutSec": HOOK_TIMEOUT, "comment": STATUS}
        return [Entry(("hooks", "preToolUse"), handler)], {"version": 1}
    raise WiringError(f"unknown host {host!r}")


def _list_at(doc: dict[str, Any], pointer: tuple[str, ...], create: bool) -> list[Any] | None:
    node: Any = doc
    for i, key in enumerate(pointer):
        if not isinstance(node, dict):
            raise WiringError(f"{'.'.join(pointer[:i])} is not an object")
        if key not in node:
            if not create:
                return None
            node[key] = [] if i == len(pointer) - 1 else {}
        node = node[key]
    if not isinstance(node, list):
        raise WiringError(f"{'.'.join(pointer)} is not a list")
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
        items = _list_at(doc, entry.pointer, create=True)
        assert items is not None
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
        items = _list_at(doc, entry.pointer, create=False)
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


def receiver_agent_findings(root: str, receivers: set[str]) -> list[tuple[str, str]]:
    """(file, problem) for each Claude Code agent file of a receiver whose tools include
    a shell or write tools, or that names no tools (it then inherits every tool)."""
    directory = os.path.join(root, ".claude", "agents")
    out: list[tuple[str, str]] = []
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return out
    for name in names:
        if not name.endswith(".md"):
            continue
        path = os.path.join(directory, name)
        meta = _front_matter(path)
        if meta is None:
            continue
        agent = meta.get("name")
        if not isinstance(agent, str) or agent not in receivers:
            continue
        tools = meta.get("tools")
        allow = ", ".join(RECEIVER_TOOLS)
        if tools is None:
            out.append(
                (
                    path,
                    f"receiver {agent} names no tools: it inherits Bash and the write tools, "
                    f"which read around any hook; set `tools: {allow}`",
                )
            )
            continue
        listed = tools if isinstance(tools, list) else str(tools).split(",")
        bad = sorted({str(t).strip() for t in listed} & SHELL_OR_WRITE_TOOLS)
        if bad:
            out.append(
                (
                    path,
                    f"receiver {agent} has {', '.join(bad)}: a shell or write tool reads "
                    f"around any hook (`python -c` names no file); set `tools: {allow}`",
                )
            )
    return out


def _front_matter(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read(64 * 1024)
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("---"):
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
