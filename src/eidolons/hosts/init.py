"""``eidolons init``: set a project up the documented way, and ``--undo`` it.

Steps, each reported as one line (``created``, ``merged``, ``unchanged``; ``would ...``
in a dry run): ``.eidolons/`` and its hand-off directory; ``.eidolons/.ignore`` (Grep
skips the hand-offs, keys and memory) and ``.eidolons/.gitignore`` (git stores none of
them; so does a ``.gitignore`` in each hand-off directory configured outside
``.eidolons/``); ``keys init`` when there is no trust store; the
skills of the project's receivers; each host's wiring (:mod:`eidolons.hosts.wiring`),
merged without disturbing foreign entries (a file that is not a JSON object is replaced
only with ``force``, kept as ``FILE.bak``); for Claude Code the launcher and the marker
``.eidolons/sealed`` (ADR 0015); then notes on the sandbox.

``.eidolons/init.json`` records what was created and merged; ``undo`` removes exactly
that, never the signing key or the trust store.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eidolons._text import plural
from eidolons.errors import EidolonsError
from eidolons.hosts.wiring import (
    CONFIG_FILES,
    LAUNCHER,
    MANIFEST_FILE,
    Entry,
    WiringError,
    claude_plan,
    launcher_text,
    merge,
    plan,
    unmerge,
)
from eidolons.io.files import FileContentError, move_aside, read_json_object, read_text, write_text
from eidolons.io.paths import (
    GITIGNORE_FILE,
    HANDOFF_DIR,
    IGNORE_FILE,
    IGNORE_LINES,
    SEALED_FILE,
    STATE_DIR,
    realpath,
)

#: runs an eidolons command in-process: its exit code and what it printed
Run = Callable[[list[str]], tuple[int, str]]

MANIFEST = MANIFEST_FILE
IGNORE = IGNORE_FILE
#: each ignore file init writes: its manifest key, what it hides the directories from, and
#: the first line of the header it writes
IGNORE_FILES = {
    IGNORE: (
        "ignore",
        "Grep",
        "# written by eidolons init: ripgrep (Claude Code's Grep) skips these",
    ),
    GITIGNORE_FILE: ("gitignore", "git", "# written by eidolons init: git stores none of these"),
}
DIRS = (STATE_DIR, HANDOFF_DIR)
#: git's ignore file init writes in each hand-off directory the configuration adds outside
#: ``.eidolons/``: everything there but itself. It lies deeper than any ``.gitignore`` an
#: agent's shell can write (the project's own), so no line there re-includes a hand-off
GITIGNORE_NAME = ".gitignore"
DIR_GITIGNORE_LINES = ("*", "!" + GITIGNORE_NAME)
DIR_GITIGNORE_KEY = "gitignore "  # + the directory, relative to the project


def configured_outside_state(root: Path) -> tuple[str, ...]:
    """Each hand-off directory of the configuration that lies in the project but outside
    ``.eidolons/`` (whose own ``.gitignore`` keeps the rest out of git), relative to the
    project: checked in whole, the project would otherwise store its hand-offs where every
    shell reads them (``git show``)."""
    from eidolons.hosts.hook.fast import configured_handoff_dirs
    from eidolons.io.paths import is_relative_to

    real_root = realpath(root)
    state = os.path.join(real_root, STATE_DIR)
    found = (realpath(d) for d in configured_handoff_dirs(str(root)))
    return tuple(
        dict.fromkeys(
            os.path.relpath(d, real_root)
            for d in found
            if is_relative_to(d, real_root) and d != real_root and not is_relative_to(d, state)
        )
    )


class InitError(EidolonsError):
    """A file init must not touch without ``--force`` (exit 2)."""

    code = "INIT"
    exit_code = 2


_INFINITIVE = {"created": "create", "merged": "merge", "removed": "remove", "moved": "move"}


class Report:
    def __init__(self, dry_run: bool) -> None:
        self.dry_run = dry_run
        self.lines: list[dict[str, str]] = []
        self.notes: list[str] = []  # said on stderr: what the user must know or do

    def add(self, action: str, path: str, detail: str = "") -> None:
        self.lines.append({"action": action, "path": path, "detail": detail})

    def text(self) -> list[str]:
        out = []
        for line in self.lines:
            verb = line["action"]
            if self.dry_run and verb != "unchanged":
                verb = "would " + _INFINITIVE.get(verb, verb)
            detail = f" ({line['detail']})" if line["detail"] else ""
            out.append(f"init: {verb} {line['path']}{detail}")
        return out


def _load_manifest(root: Path) -> dict[str, Any]:
    try:
        text = read_text(root / MANIFEST)
        doc = None if text is None else json.loads(text)
    except (OSError, ValueError) as exc:
        raise InitError(f"{MANIFEST} cannot be read ({exc}); remove it to start over") from None
    if doc is None:
        return {"format": "eidolons.init.v1", "created": [], "entries": {}, "ignore": []}
    if not isinstance(doc, dict) or doc.get("format") != "eidolons.init.v1":
        raise InitError(f"{MANIFEST} is not an eidolons init record")
    return doc


def load_json_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when absent. Raises InitError when it is not one."""
    try:
        return read_json_object(path)
    except FileContentError as exc:
        raise InitError(str(exc)) from None


def _dump(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def install(
    root: Path,
    hosts: list[str],
    *,
    dry_run: bool = False,
    force: bool = False,
    python: str | None = None,
    receivers: list[str] | None = None,
    domains: list[str] | None = None,
    run: Run,
) -> Report:
    """Set the project up for ``hosts``; ``run`` runs another eidolons command (``keys
    init``, ``skill install``) in-process and returns its exit code and stdout."""
    setup = _Setup(root, Report(dry_run), _load_manifest(root), force)
    setup.dirs()
    setup.ignore()
    setup.keys(run)
    setup.skills(run, receivers)
    for host in hosts:
        setup.host(host, python)
    if "claude-code" in hosts and domains:
        allowed = [Entry(("sandbox", "network", "allowedDomains"), d) for d in domains]
        setup.merge_file(CONFIG_FILES["claude-code"], "claude-code", allowed, {})
    if "claude-code" in hosts:
        setup.sealed()
    if not dry_run:
        write_text(root / MANIFEST, _dump(setup.manifest))
    return setup.report


class _Setup:
    """One ``init`` run: each step adds its lines to the report and, unless a dry run,
    writes and records what it created or merged in the manifest."""

    def __init__(self, root: Path, report: Report, manifest: dict[str, Any], force: bool):
        self.root = root
        self.report = report
        self.manifest = manifest
        self.force = force
        self.dry_run = report.dry_run

    def _created(self, rel: str) -> None:
        if rel not in self.manifest["created"]:
            self.manifest["created"].append(rel)

    def dirs(self) -> None:
        for rel in DIRS:
            if (self.root / rel).is_dir():
                self.report.add("unchanged", rel + "/")
                continue
            self.report.add("created", rel + "/")
            if not self.dry_run:
                (self.root / rel).mkdir(parents=True, exist_ok=True)
                self.manifest["created"].append(rel)

    def ignore(self) -> None:
        for rel, (key, tool, header) in IGNORE_FILES.items():
            self._ignore(rel, key, tool, header)
        _, tool, header = IGNORE_FILES[GITIGNORE_FILE]
        for rel in configured_outside_state(self.root):
            if not self.dry_run:
                try:
                    (self.root / rel).mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise InitError(f"hand-off directory {rel}: {exc.strerror}") from None
            ignore = os.path.join(rel, GITIGNORE_NAME)
            self._ignore(ignore, DIR_GITIGNORE_KEY + rel, tool, header, DIR_GITIGNORE_LINES)

    def _ignore(
        self, rel: str, key: str, tool: str, header: str, lines: tuple[str, ...] = IGNORE_LINES
    ) -> None:
        current = read_text(self.root / rel)
        text, exists = current or "", current is not None
        present = {line.strip() for line in text.splitlines()}
        missing = [line for line in lines if line not in present]
        if not missing:
            self.report.add("unchanged", rel)
            return
        hides = "hides " + ", ".join(missing) + f" from {tool}"
        self.report.add("merged" if exists else "created", rel, hides)
        if self.dry_run:
            return
        if text and not text.endswith("\n"):
            text += "\n"
        first = "" if exists else header + "\n"
        write_text(self.root / rel, first + text + "".join(f"{line}\n" for line in missing))
        self.manifest[key] = sorted(set(self.manifest.get(key) or []) | set(missing))
        if not exists:
            self._created(rel)

    def keys(self, run: Run) -> None:
        """``keys init``, in-process, when there is no trust store yet."""
        trust = os.path.join(".eidolons", "trust.json")
        if (self.root / trust).exists():
            self.report.add("unchanged", trust, "trust store present")
            return
        if not self.dry_run:
            code, _ = run(["keys", "init", "--root", str(self.root)])
            if code != 0:
                raise InitError(f"eidolons keys init failed (exit {code})")
        self.report.add("created", trust, "eidolons keys init: a signing key outside the project")

    def skills(self, run: Run, receivers: list[str] | None) -> None:
        """``skill install R...`` for the project's receivers, in-process."""
        found = project_agents(self.root)[0] if receivers is None else receivers
        if not found:
            self.report.notes.append(
                "no receiver agents found (.claude/agents/*.md naming a contract's receiver): "
                "no skills installed; name them with `eidolons init --receivers vigil,apivr`"
            )
            return
        argv = ["skill", "install", *found, "--root", str(self.root)]
        argv += ["--dry-run"] if self.dry_run else []
        argv += ["--force"] if self.force else []
        code, out = run(argv)
        if code not in (0, 3):
            raise InitError(f"eidolons skill install failed (exit {code})")
        lines = out.splitlines()
        changed = [line for line in lines if "unchanged" not in line.split(".", 1)[0]]
        written = f"{len(changed)} of {len(lines)} files written"
        detail = f"eidolons skill install {' '.join(found)}: {written}"
        if code == 3:
            detail += "; some refused (not generated by eidolons: see eidolons skill install)"
        self.report.add("merged" if changed else "unchanged", "receivers' skills", detail)

    def host(self, host: str, python: str | None) -> None:
        if host != "claude-code":
            entries, scalars = plan(host, str(self.root), python)
            self.merge_file(CONFIG_FILES[host], host, entries, scalars)
            return
        from eidolons.hosts.hook.fast import configured_handoff_dirs

        real_root = realpath(self.root)
        extra = tuple(
            os.path.relpath(d, real_root) for d in configured_handoff_dirs(str(self.root))
        )
        bound = project_agents(self.root)[1]
        for rel, entries in claude_plan(str(self.root), python, extra, bound).items():
            self.merge_file(rel, host, entries, {})

    def merge_file(
        self, rel: str, host: str, entries: list[Entry], scalars: dict[str, Any]
    ) -> None:
        path = self.root / rel
        try:
            doc = load_json_object(path)
        except InitError:
            if not self.force:
                raise
            self.report.add("moved", rel, f"to {rel}.bak (--force)")
            if not self.dry_run:
                move_aside(path, str(path) + ".bak")
            doc = None
        exists = doc is not None
        doc = doc if doc is not None else {}
        try:
            changed = merge(doc, entries, scalars)
        except WiringError as exc:
            raise InitError(f"cannot merge {rel}: {exc}") from None
        if not changed:
            self.report.add("unchanged", rel, f"{host} wiring")
            return
        kinds = sorted({".".join(e.pointer) for e in changed})
        self.report.add("merged" if exists else "created", rel, f"{host}: " + ", ".join(kinds))
        if self.dry_run:
            return
        write_text(path, _dump(doc))
        recorded = self.manifest["entries"].setdefault(rel, [])
        for entry in changed:
            if entry.to_dict() not in recorded:
                recorded.append(entry.to_dict())
        if not exists:
            self._created(rel)

    def sealed(self) -> None:
        """The launcher, the marker of a sealed project, and what the sandbox means here."""
        marker = "# written by eidolons init: hand-offs are received only from the hand-off "
        marker += "directories\n"
        for rel, text, mode in ((LAUNCHER, launcher_text(), 0o755), (SEALED_FILE, marker, 0o644)):
            try:
                current = read_text(self.root / rel)
            except UnicodeDecodeError:
                current = None
            if current == text:
                self.report.add("unchanged", rel)
                continue
            self.report.add("created" if current is None else "merged", rel)
            if self.dry_run:
                continue
            write_text(self.root / rel, text, mode)
            if current is None:
                self._created(rel)
        self.report.notes.extend([*sandbox_problems_here(), SANDBOX_EFFECT])


#: what the sandbox changes for the user's own commands (init says it once)
SANDBOX_EFFECT = (
    "the sandbox is on for every Bash command in this project: commands write only inside "
    "the project and the temporary directory, cannot read the hand-offs, and reach the "
    "network only for the domains in sandbox.network.allowedDomains of .claude/settings.json "
    "(add the ones your commands need: `eidolons init --allow-domain pypi.org`); no tool "
    "and no CLAUDE.md import reads a hand-off either: a receiver reads one with the MCP tool "
    "mcp__eidolons__read_verified, a sender writes a draft and emits it"
)


def sandbox_problems_here() -> list[str]:
    """Why Claude Code's sandbox cannot start on this machine, with how to fix it."""
    import shutil

    if sys.platform.startswith("linux"):
        missing = [name for name in ("bwrap", "socat") if shutil.which(name) is None]
        if missing:
            return [
                f"the sandbox cannot start here: {' and '.join(missing)} not installed; run "
                "`sudo apt-get install bubblewrap socat` (Fedora: `sudo dnf install bubblewrap "
                "socat`). Until then Claude Code refuses to start in this project "
                "(sandbox.failIfUnavailable)"
            ]
        return []
    if sys.platform != "darwin":
        return [f"Claude Code's sandbox does not run on {sys.platform}: the shell is not sealed"]
    return []


def project_agents(root: Path) -> tuple[list[str], tuple[str, ...]]:
    """The project's agents (its Claude Code agent definitions) that a contract names as a
    receiver, and those that send on a high-trust edge (they get a bound MCP server)."""
    from eidolons.hosts.wiring import agent_names
    from eidolons.io.contracts import ContractSet, load_contracts

    contracts = load_contracts(root, [])
    if not isinstance(contracts, ContractSet):
        return [], ()
    agents = set(agent_names(str(root)))
    receivers = sorted(agents & {c.to for c in contracts})
    senders = tuple(sorted(agents & {c.from_ for c in contracts if c.trust_level == "high"}))
    return receivers, senders


def undo(root: Path, *, dry_run: bool = False, run: Run) -> Report:
    report = Report(dry_run)
    if not (root / MANIFEST).exists():
        report.add("unchanged", MANIFEST, "nothing was installed by eidolons init")
        return report
    manifest = _load_manifest(root)
    created = set(manifest["created"])
    for rel, recorded in manifest["entries"].items():
        path = root / rel
        doc = load_json_object(path)
        if doc is None:
            continue
        removed = unmerge(doc, [Entry.from_dict(e) for e in recorded])
        leftovers = {k: v for k, v in doc.items() if k != "version"}
        if rel in created and not leftovers:
            report.add("removed", rel)
            if not dry_run:
                path.unlink()
        else:
            report.add("merged", rel, f"removed {plural(removed, 'entry', 'entries')} of eidolons")
            if not dry_run:
                write_text(path, _dump(doc))
    _undo_ignore(root, manifest, created, report, dry_run)
    run(["skill", "uninstall", "--root", str(root), *(["--dry-run"] if dry_run else [])])
    report.add("removed", "receivers' skills", "eidolons skill uninstall")
    if (root / ".eidolons" / "trust.json").exists():
        report.add("kept", os.path.join(".eidolons", "trust.json"), "keys are never removed")
    if not dry_run:
        (root / MANIFEST).unlink()
    for rel in sorted((d for d in created if d in DIRS), reverse=True):
        try:
            if not dry_run:
                (root / rel).rmdir()
            report.add("removed", rel + "/")
        except OSError:
            report.add("kept", rel + "/", "not empty")
    return report


def _undo_ignore(
    root: Path, manifest: dict[str, Any], created: set[str], report: Report, dry_run: bool
) -> None:
    for rel, (key, _, header) in IGNORE_FILES.items():
        _undo_ignore_file(root, rel, set(manifest.get(key) or []), header, created, report, dry_run)
    header = IGNORE_FILES[GITIGNORE_FILE][2]
    for key, lines in manifest.items():
        if key.startswith(DIR_GITIGNORE_KEY) and isinstance(lines, list):
            rel = os.path.join(key[len(DIR_GITIGNORE_KEY) :], GITIGNORE_NAME)
            _undo_ignore_file(root, rel, set(lines), header, created, report, dry_run)


def _undo_ignore_file(
    root: Path,
    rel: str,
    ours: set[str],
    header: str,
    created: set[str],
    report: Report,
    dry_run: bool,
) -> None:
    path = root / rel
    text = read_text(path)
    if text is None:
        return
    lines = text.splitlines()
    keep = [line for line in lines if line.strip() not in ours and line != header]
    if rel in created and not [line for line in keep if line.strip()]:
        report.add("removed", rel)
        if not dry_run:
            path.unlink()
        return
    report.add("merged", rel, "removed the lines of eidolons")
    if not dry_run:
        write_text(path, "".join(f"{line}\n" for line in keep))


def detect_hosts(root: Path) -> list[str]:
    """The hosts a project shows signs of (upstream's ``detect_hosts``); Claude Code if none."""
    signs = {
        "claude-code": (".claude", "CLAUDE.md"),
        "cursor": (".cursor", ".cursorrules"),
        "codex": (".codex", "AGENTS.md"),
        "gemini": (".gemini",),
    }
    found = [host for host, names in signs.items() if any((root / n).exists() for n in names)]
    return found or ["claude-code"]
