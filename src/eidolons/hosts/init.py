"""``eidolons init``: set a project up the documented way, and ``--undo`` it.

Steps, each reported as one line (``created``, ``merged``, ``unchanged``; ``would ...``
in a dry run): ``.eidolons/`` and its hand-off directory; ``.eidolons/.ignore`` (Grep
skips the hand-offs, keys and memory); ``keys init`` when there is no trust store; the
skills of the project's receivers; each host's wiring (:mod:`eidolons.hosts.wiring`),
merged without disturbing foreign entries (a file that is not a JSON object is replaced
only with ``force``, kept as ``FILE.bak``); for Claude Code the launcher and the marker
``.eidolons/sealed`` (ADR 0140); then notes on the sandbox.

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
from eidolons.io.files import (
    FileContentError,
    move_aside,
    read_json_object,
    read_text,
    write_text,
)
from eidolons.io.project import HANDOFF_DIR, IGNORE_FILE, IGNORE_LINES, SEALED_FILE, STATE_DIR

#: runs an eidolons command in-process: its exit code and what it printed
Run = Callable[[list[str]], tuple[int, str]]

MANIFEST = MANIFEST_FILE
IGNORE = IGNORE_FILE
DIRS = (STATE_DIR, HANDOFF_DIR)


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
    report = Report(dry_run)
    manifest = _load_manifest(root)
    created: list[str] = manifest["created"]
    for rel in DIRS:
        if (root / rel).is_dir():
            report.add("unchanged", rel + "/")
            continue
        report.add("created", rel + "/")
        if not dry_run:
            (root / rel).mkdir(parents=True, exist_ok=True)
            created.append(rel)
    _install_ignore(root, manifest, report, dry_run)
    _run_step(run, root, "keys", report, dry_run, force)
    _run_step(run, root, "skill", report, dry_run, force, receivers)
    for host in hosts:
        _install_host(root, host, manifest, report, dry_run=dry_run, force=force, python=python)
    if "claude-code" in hosts and domains:
        allowed = [Entry(("sandbox", "network", "allowedDomains"), d) for d in domains]
        _merge_file(
            root,
            CONFIG_FILES["claude-code"],
            "claude-code",
            allowed,
            {},
            manifest,
            report,
            dry_run,
            force,
        )
    if "claude-code" in hosts:
        _install_sealed(root, manifest, report, dry_run)
    if not dry_run:
        write_text(root / MANIFEST, _dump(manifest))
    return report


def _install_ignore(root: Path, manifest: dict[str, Any], report: Report, dry_run: bool) -> None:
    path = root / IGNORE
    current = read_text(path)
    text, exists = current or "", current is not None
    present = {line.strip() for line in text.splitlines()}
    missing = [line for line in IGNORE_LINES if line not in present]
    if not missing:
        report.add("unchanged", IGNORE)
        return
    report.add(
        "merged" if exists else "created", IGNORE, "hides " + ", ".join(missing) + " from Grep"
    )
    if dry_run:
        return
    header = (
        "" if exists else "# written by eidolons init: ripgrep (Claude Code's Grep) skips these\n"
    )
    if text and not text.endswith("\n"):
        text += "\n"
    write_text(path, header + text + "".join(f"{line}\n" for line in missing))
    manifest["ignore"] = sorted(set(manifest["ignore"]) | set(missing))
    if not exists:
        manifest["created"].append(IGNORE)


def _run_step(
    run: Run,
    root: Path,
    command: str,
    report: Report,
    dry_run: bool,
    force: bool,
    receivers: list[str] | None = None,
) -> None:
    """``keys init`` / ``skill install R...``, in-process, when this build has them."""
    trust = os.path.join(".eidolons", "trust.json")
    if command == "keys":
        if (root / trust).exists():
            report.add("unchanged", trust, "trust store present")
            return
        if not dry_run:
            code, out = run(["keys", "init", "--root", str(root)])
            if code != 0:
                raise InitError(f"eidolons keys init failed (exit {code})")
        report.add("created", trust, "eidolons keys init: a signing key outside the project")
        return
    found = project_agents(root)[0] if receivers is None else receivers
    if not found:
        report.notes.append(
            "no receiver agents found (.claude/agents/*.md naming a contract's receiver): no "
            "skills installed; name them with `eidolons init --receivers vigil,apivr`"
        )
        return
    argv = ["skill", "install", *found, "--root", str(root)]
    argv += ["--dry-run"] if dry_run else []
    argv += ["--force"] if force else []
    code, out = run(argv)
    if code not in (0, 3):
        raise InitError(f"eidolons skill install failed (exit {code})")
    lines = out.splitlines()
    changed = [line for line in lines if "unchanged" not in line.split(".", 1)[0]]
    detail = (
        f"eidolons skill install {' '.join(found)}: {len(changed)} of {len(lines)} files written"
    )
    if code == 3:
        detail += "; some refused (not generated by eidolons: see eidolons skill install)"
    report.add("merged" if changed else "unchanged", "receivers' skills", detail)


def _install_host(
    root: Path,
    host: str,
    manifest: dict[str, Any],
    report: Report,
    *,
    dry_run: bool,
    force: bool,
    python: str | None,
) -> None:
    if host == "claude-code":
        from eidolons.hosts.hook.fast import configured_handoff_dirs

        extra = tuple(
            os.path.relpath(d, os.path.realpath(root)) for d in configured_handoff_dirs(str(root))
        )
        for rel, entries in claude_plan(str(root), python, extra, project_agents(root)[1]).items():
            _merge_file(root, rel, host, entries, {}, manifest, report, dry_run, force)
        return
    entries, scalars = plan(host, str(root), python)
    _merge_file(root, CONFIG_FILES[host], host, entries, scalars, manifest, report, dry_run, force)


def _merge_file(
    root: Path,
    rel: str,
    host: str,
    entries: list[Entry],
    scalars: dict[str, Any],
    manifest: dict[str, Any],
    report: Report,
    dry_run: bool,
    force: bool,
) -> None:
    path = root / rel
    try:
        doc = load_json_object(path)
    except InitError:
        if not force:
            raise
        report.add("moved", rel, f"to {rel}.bak (--force)")
        if not dry_run:
            move_aside(path, str(path) + ".bak")
        doc = None
    exists = doc is not None
    doc = doc if doc is not None else {}
    try:
        changed = merge(doc, entries, scalars)
    except WiringError as exc:
        raise InitError(f"cannot merge {rel}: {exc}") from None
    if not changed:
        report.add("unchanged", rel, f"{host} wiring")
        return
    kinds = sorted({".".join(e.pointer) for e in changed})
    report.add("merged" if exists else "created", rel, f"{host}: " + ", ".join(kinds))
    if dry_run:
        return
    write_text(path, _dump(doc))
    recorded = manifest["entries"].setdefault(rel, [])
    for entry in changed:
        if entry.to_dict() not in recorded:
            recorded.append(entry.to_dict())
    if not exists and rel not in manifest["created"]:
        manifest["created"].append(rel)


def _install_sealed(root: Path, manifest: dict[str, Any], report: Report, dry_run: bool) -> None:
    """The launcher, the marker of a sealed project, and what the sandbox means here."""
    for rel, text, mode in (
        (LAUNCHER, launcher_text(), 0o755),
        (
            SEALED_FILE,
            "# written by eidolons init: hand-offs are received only from the hand-off "
            "directories\n",
            0o644,
        ),
    ):
        path = root / rel
        try:
            current = read_text(path)
        except UnicodeDecodeError:
            current = None
        if current == text:
            report.add("unchanged", rel)
            continue
        report.add("created" if current is None else "merged", rel)
        if dry_run:
            continue
        write_text(path, text, mode)
        if current is None and rel not in manifest["created"]:
            manifest["created"].append(rel)
    report.notes.extend([*sandbox_problems_here(), SANDBOX_EFFECT])


#: what the sandbox changes for the user's own commands (init says it once)
SANDBOX_EFFECT = (
    "the sandbox is on for every Bash command in this project: commands write only inside "
    "the project and the temporary directory, cannot read the hand-offs, and reach the "
    "network only for the domains in sandbox.network.allowedDomains of .claude/settings.json "
    "(add the ones your commands need: `eidolons init --allow-domain pypi.org`)"
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
            report.add("merged", rel, f"removed {removed} entries of eidolons")
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
    path = root / IGNORE
    ours = set(manifest.get("ignore") or [])
    text = read_text(path)
    if text is None:
        return
    lines = text.splitlines()
    keep = [
        line
        for line in lines
        if line.strip() not in ours and not line.startswith("# written by eidolons init")
    ]
    if IGNORE in created and not [line for line in keep if line.strip()]:
        report.add("removed", IGNORE)
        if not dry_run:
            path.unlink()
        return
    report.add("merged", IGNORE, "removed the lines of eidolons")
    if not dry_run:
        write_text(path, "".join(f"{line}\n" for line in keep))


def detect_hosts(root: Path) -> list[str]:
    """The hosts a project shows signs of (upstream's ``detect_hosts``); Claude Code if none."""
    found = []
    if (root / ".claude").exists() or (root / "CLAUDE.md").exists():
        found.append("claude-code")
    if (root / ".cursor").exists() or (root / ".cursorrules").exists():
        found.append("cursor")
    if (root / ".codex").exists() or (root / "AGENTS.md").exists():
        found.append("codex")
    if (root / ".gemini").exists():
        found.append("gemini")
    return found or ["claude-code"]


def python_for_hooks() -> str:
    """The interpreter the hooks run: this one, by absolute path."""
    return os.path.abspath(sys.executable)
