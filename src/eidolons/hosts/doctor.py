"""``eidolons doctor``: is this project set up so that no receiver can skip the gate?

The checks (ADR 0016; each finding reported once): root, D8 (every installed member has a
known roster class, a receiver class a blocking verify-incoming skill), drift (installed
skills against the contracts), hosts (Claude Code's wiring read and the wired hook run,
ADR 0015; Cursor's hooks fail closed; a note for the hosts that cannot seal a shell),
keys, trace-store (with ``EIDOLONS_TRACE_DSN``) and agents.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from eidolons.hosts.skills.install import MEMBER_MARKERS
from eidolons.io.files import create_new, package_text, read_text
from eidolons.io.paths import HANDOFF_DIR, STATE_DIR, TRACE_DIR, realpath

STATE_DIRS = frozenset(
    {
        *(os.path.basename(d) for d in (TRACE_DIR, HANDOFF_DIR)),
        *("keys", "memory", "contracts", "refusals", "skills", "harness"),
    }
)


class Report:
    """The findings (what to fix), the checks passed and the notes of one run."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.findings: list[dict[str, str]] = []
        self.passed: list[dict[str, str]] = []
        self.notes: list[str] = []

    def fail(self, check: str, subject: str, message: str) -> None:
        self.findings.append({"check": check, "subject": subject, "message": message})

    def ok(self, check: str, subject: str, message: str) -> None:
        self.passed.append({"check": check, "subject": subject, "message": message})

    def rel(self, path: Path | str) -> str:
        path = Path(path)
        return str(path.relative_to(self.root) if path.is_relative_to(self.root) else path)

    def to_json(self) -> dict[str, Any]:
        return {
            "root": str(self.root),
            "ok": not self.findings,
            "findings": self.findings,
            "passed": self.passed,
            "notes": self.notes,
        }


def run_checks(root: Path) -> Report:
    report = Report(root)
    check_root(report)
    check_d8(report)
    check_drift(report)
    check_hosts(report)
    check_keys(report)
    check_trace_store(report)
    check_agents(report)
    return report


def check_root(report: Report) -> None:
    if (report.root / ".eidolons").is_dir():
        report.ok("root", str(report.root), "holds .eidolons/")
    else:
        report.fail(
            "root",
            str(report.root),
            "no .eidolons/ here: gates fall back to a .git/ ancestor or the current directory "
            "(run eidolons init)",
        )


LOCK_FILE = "eidolons.lock"


def lock_members(root: Path) -> tuple[list[str], str | None]:
    """The member names ``eidolons.lock`` lists, and why it cannot be read (None when it
    can or there is none): a lock that cannot be read is never "no members"."""
    lock = root / LOCK_FILE
    if not os.path.lexists(lock):
        return [], None
    if not lock.is_file():
        return [], "not a regular file: the members it lists cannot be read"
    import yaml

    try:
        doc = yaml.safe_load(read_text(lock) or "")
    except OSError as exc:
        return [], f"cannot be read: {exc.strerror or exc}"
    except UnicodeDecodeError:
        return [], "not UTF-8: the members it lists cannot be read"
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        return [], f"not valid YAML{line}: the members it lists cannot be read"
    if doc is None:
        return [], None  # an empty lock: nothing installed
    if not isinstance(doc, dict):
        return [], "not a mapping with a members list"
    members = doc.get("members", [])
    if not isinstance(members, list):
        return [], "members is not a list"
    names: list[str] = []
    unnamed: list[str] = []
    for i, m in enumerate(members):
        name = m.get("name") if isinstance(m, dict) else m
        if isinstance(name, str) and name:
            names.append(name)
        else:
            unnamed.append(f"members[{i}]")
    return names, f"{', '.join(unnamed)} has no name" if unnamed else None


def installed_members(root: Path, listed: list[str]) -> tuple[list[str], str | None]:
    """The lock's members (``listed``) and every member tree under ``.eidolons/``, and why
    ``.eidolons/`` cannot be listed (None when it can or there is none)."""
    names = set(listed)
    state = root / ".eidolons"
    problem = None
    try:
        entries = sorted(os.scandir(state), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):  # no state directory: none installed
        entries = []
    except OSError as exc:
        entries, problem = [], f"cannot be listed: {exc.strerror or exc}"
    for entry in entries:
        if entry.name in STATE_DIRS or entry.name.startswith(".") or not entry.is_dir():
            continue
        member = Path(entry.path)
        if any((member / m).exists() for m in MEMBER_MARKERS):
            names.add(entry.name)
    return sorted(names), problem


def check_d8(report: Report) -> None:
    import yaml

    ecl = yaml.safe_load(package_text("data", "roster", "ecl.yaml"))  # verbatim upstream
    classes = json.loads(package_text("data", "roster", "classes.json"))  # names, aliases
    vi = ecl["verify_incoming"]
    blocking, forbid = vi["blocking_markers"], vi["forbid_markers"]
    listed, problem = lock_members(report.root)
    if problem is not None:
        report.fail("D8", LOCK_FILE, problem)
    installed, unlisted = installed_members(report.root, listed)
    if unlisted is not None:
        report.fail("D8", ".eidolons", unlisted)
    for name in installed:
        klass = classes.get(name)
        if klass is None:
            report.fail("D8", name, "not in the roster (no capability class known)")
            continue
        if klass not in ecl["classes"]:
            report.fail("D8", name, f"class {klass!r} is not in ecl.yaml: not an exemption")
            continue
        if ecl["classes"][klass].get("receiver") is not True:
            report.ok("D8", name, f"class={klass} is not an ECL hand-off receiver (exempt)")
            continue
        member = report.root / ".eidolons" / name
        files = [
            p
            for p in (member / "skills" / "verify-incoming" / "SKILL.md", member / vi["skill_path"])
            if p.is_file()
        ]
        if not files:
            report.fail("D8", name, "missing blocking verify-incoming skill")
            continue
        for path in files:
            text = read_text(path, errors="replace") or ""
            where, before = report.rel(path), len(report.findings)
            if not any(marker in text for marker in blocking):
                report.fail("D8", where, "declares no blocking posture (no REFUSE / SHALL NOT)")
            for marker in (m for m in forbid if m in text):
                report.fail("D8", where, f"declares warn-only posture ({marker!r})")
            if len(report.findings) == before:
                report.ok("D8", where, f"blocking verify-incoming gate present (class={klass})")


def _section(text: str, heading: str) -> str | None:
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("## ") and line[3:].lower().startswith(heading):
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("## ")), None)
            return "\n".join(lines[i:end]).strip()
    return None


def _refuse_template(text: str, receiver: str) -> str:
    """The REFUSE line as the rendered skill spells it (``… REFUSE: <CODE> from <from>``)."""
    start = text.index(f"[{receiver}-verify-incoming] REFUSE: ")
    words = text[start:].split()
    return " ".join(words[:5]).rstrip(".,;")


def check_drift(report: Report) -> None:
    from eidolons.hosts.skills.install import skill_targets
    from eidolons.hosts.skills.render import receivers, render_skill
    from eidolons.io.contracts import ContractSetUnavailable, load_contracts

    contracts = load_contracts(report.root, [])
    if isinstance(contracts, ContractSetUnavailable):
        report.fail("drift", "contracts", f"the contract set does not load: {contracts.reason}")
        return
    for receiver in receivers(contracts):
        targets = [t for t in skill_targets(report.root, receiver) if t.path.is_file()]
        flat = report.root / ".eidolons" / receiver / "skills" / "verify-incoming.md"
        paths = [t.path for t in targets] + ([flat] if flat.is_file() else [])
        if not paths:
            continue
        expected = render_skill(receiver, contracts).decode("utf-8")
        want_table = _section(expected, "inbound edges")
        line = _refuse_template(expected, receiver)
        for path in dict.fromkeys(paths):
            text = read_text(path, errors="replace") or ""
            where = report.rel(path)
            table = _section(text, "inbound edges")
            if table != want_table:
                report.fail(
                    "drift",
                    where,
                    "the inbound-edges table differs from the contracts "
                    f"(eidolons skill install {receiver} --force)",
                )
            elif line not in text:
                report.fail("drift", where, f"the REFUSE line is not exactly `{line}`")
            else:
                report.ok("drift", where, "inbound table and REFUSE line match the contracts")


def check_hosts(report: Report) -> None:
    from eidolons.hosts.init import InitError, load_json_object
    from eidolons.hosts.wiring import (
        CLAUDE_CODE_GAP,
        CONFIG_FILES,
        UNSEALED,
        check_cursor_hooks,
        unsealed_note,
    )

    root = report.root
    if (root / ".claude").is_dir():
        check_claude_code(report)
        report.notes.append(CLAUDE_CODE_GAP)
    cursor = root / ".cursor" / "hooks.json"
    if cursor.exists() or (root / ".cursor").is_dir():
        try:
            doc = load_json_object(cursor)
        except InitError as exc:
            report.fail("hosts", report.rel(cursor), str(exc))
        else:
            problems = check_cursor_hooks(doc) if doc is not None else ["missing"]
            for problem in problems:
                report.fail("hosts", report.rel(cursor), problem)
            if not problems:
                report.ok("hosts", report.rel(cursor), "Cursor hooks wired fail-closed")
    for host in UNSEALED:
        if (root / CONFIG_FILES[host]).exists():
            report.notes.append(unsealed_note(host))  # what a host cannot guarantee


def check_claude_code(report: Report) -> None:
    """The Claude Code wiring, checked by reading it and by running it."""
    from eidolons.hosts.hook.fast import configured_handoff_dirs
    from eidolons.hosts.init import InitError, load_json_object, sandbox_problems_here
    from eidolons.hosts.wiring import (
        CLAUDE_LOCAL,
        CLAUDE_SETTINGS,
        LAUNCHER,
        MCP_FILE,
        PYTHON_ENV,
        check_claude_settings,
        read_deny_problems,
        sandbox_problems,
    )

    root = report.root
    before = len(report.findings)
    docs: dict[str, dict[str, Any]] = {}
    for rel in (CLAUDE_SETTINGS, CLAUDE_LOCAL, MCP_FILE):
        try:
            docs[rel] = load_json_object(root / rel) or {}
        except InitError as exc:
            report.fail("hosts", rel, str(exc))
            return
    problems = check_claude_settings(docs[CLAUDE_SETTINGS])
    for problem in problems:
        report.fail("hosts", CLAUDE_SETTINGS, problem)
    launcher = root / LAUNCHER
    if not os.access(launcher, os.X_OK):
        report.fail("hosts", LAUNCHER, "missing or not executable: every tool call is blocked")
    env = docs[CLAUDE_LOCAL].get("env")
    python = env.get(PYTHON_ENV) if isinstance(env, dict) else None
    if not isinstance(python, str) or not os.access(python, os.X_OK):
        report.fail(
            "hosts",
            CLAUDE_LOCAL,
            f"{PYTHON_ENV} is {python!r}, not an interpreter on this machine: every tool call "
            "is blocked (run eidolons init here)",
        )
        python = None
    real_root = realpath(root)
    handoffs = (os.path.join(real_root, HANDOFF_DIR), *configured_handoff_dirs(real_root))
    for problem in sandbox_problems(real_root, handoffs):
        report.fail("hosts", CLAUDE_SETTINGS, problem)
    for problem in read_deny_problems(
        real_root, [docs[CLAUDE_SETTINGS], docs[CLAUDE_LOCAL]], handoffs
    ):
        report.fail("hosts", CLAUDE_SETTINGS, problem)
    sandbox = docs[CLAUDE_SETTINGS].get("sandbox")
    if not isinstance(sandbox, dict) or sandbox.get("failIfUnavailable") is not True:
        report.fail(
            "hosts",
            CLAUDE_SETTINGS,
            "sandbox.failIfUnavailable is not true: where the sandbox cannot start, Bash "
            "runs unsealed",
        )
    for note in sandbox_problems_here():
        report.fail("hosts", "sandbox", note)
    code, unknown = _wired_gate_code(python, real_root) if python is not None else ((), None)
    if unknown is not None:
        report.fail("hosts", CLAUDE_LOCAL, unknown)
    for path in _shell_writable_gate_code(real_root, code, docs):
        report.fail(
            "hosts",
            report.rel(path),
            "code the gate runs lies where a sandboxed shell can write it (not in denyWrite): "
            "an agent could rewrite the gate (run eidolons init)",
        )
    for rel in _shell_writable_wiring(real_root, docs):
        report.fail(
            "hosts",
            rel,
            "a sandboxed shell can write this host wiring (not in denyWrite): a hook an agent "
            "writes there runs outside every sandbox (run eidolons init)",
        )
    for rel in _unruled_wiring(docs[CLAUDE_SETTINGS]):
        report.fail(
            "hosts",
            rel,
            f"no permissions.deny rule Edit(./{rel}/**): the host checks its own rules on the "
            "path a Write resolves to, after the hook; without one a directory name the shell "
            "swaps between the two lets a Write reach this wiring (run eidolons init)",
        )
    for rel, message in _tracked_by_git(real_root, handoffs):
        report.fail("hosts", rel, message)
    for rel in _unignored_handoff_dirs(real_root):
        report.fail(
            "hosts",
            rel,
            "no .gitignore of eidolons init in this hand-off directory: a project checked in "
            "whole stores its hand-offs in .git, which every sandboxed shell reads (git show) "
            "(run eidolons init)",
        )
    server = docs[MCP_FILE].get("mcpServers", {})
    if not isinstance(server, dict) or "eidolons" not in server:
        report.fail(
            "hosts", MCP_FILE, "the eidolons MCP server is not registered (run eidolons init)"
        )
    if python is not None and not problems and os.access(launcher, os.X_OK):
        for problem in _run_the_hook(report.root, launcher, python):
            report.fail("hosts", LAUNCHER, problem)
    if len(report.findings) == before:
        report.ok("hosts", CLAUDE_SETTINGS, "Claude Code hook wired fail-closed, shell sealed")


def _unruled_wiring(settings: dict[str, Any]) -> list[str]:
    """The hosts' wiring (project level) that no ``Edit`` deny rule of the shared settings
    covers (:func:`eidolons.hosts.wiring.claude_plan` writes one for each)."""
    from eidolons.hosts.hook.events import WIRING_FILES

    permissions = settings.get("permissions")
    deny = permissions.get("deny") if isinstance(permissions, dict) else None
    rules = set(deny) if isinstance(deny, list) else set()
    return [rel for rel in WIRING_FILES if f"Edit(./{rel.replace(os.sep, '/')}/**)" not in rules]


def _unignored_handoff_dirs(root: str) -> list[str]:
    """The hand-off directories configured outside ``.eidolons/`` whose ``.gitignore``
    lacks a line init writes there (:data:`eidolons.hosts.init.DIR_GITIGNORE_LINES`)."""
    from eidolons.hosts.init import DIR_GITIGNORE_LINES, GITIGNORE_NAME, configured_outside_state

    missing = []
    for rel in configured_outside_state(Path(root)):
        try:
            text = read_text(os.path.join(root, rel, GITIGNORE_NAME), errors="replace") or ""
        except OSError:
            text = ""
        lines = {line.strip() for line in text.splitlines()}
        if not all(line in lines for line in DIR_GITIGNORE_LINES):
            missing.append(rel)
    return missing


def _tracked_by_git(root: str, handoffs: tuple[str, ...]) -> list[tuple[str, str]]:
    """``(subject, finding)`` for each sealed directory (hand-offs, keys, memory, the gate's
    copies) of which the project's git repository tracks files; none where there is no git
    or no repository, and one finding when git cannot be asked."""
    import subprocess

    from eidolons.hosts.wiring import SEALED_STATE
    from eidolons.io.paths import is_relative_to

    sealed = [os.path.join(root, STATE_DIR, d) for d in SEALED_STATE]
    sealed += [d for d in handoffs if d not in sealed and is_relative_to(d, root)]
    rels = [os.path.relpath(d, root) for d in sealed]
    try:  # one call for them all
        r = subprocess.run(
            ["git", "-C", root, "ls-files", "-z", "--", *rels],
            env={**os.environ, "LC_ALL": "C"},  # its message for "no repository" in English
            capture_output=True,
            timeout=30,
            check=False,
        )
    except FileNotFoundError:
        return []  # no git on this machine: nothing it keeps
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [("git", f"cannot ask git which sealed files it keeps: {exc}")]
    if r.returncode != 0:
        if b"not a git repository" in r.stderr:
            return []
        why = os.fsdecode(r.stderr).strip().splitlines()[:1] or [f"exit {r.returncode}"]
        return [("git", f"cannot ask git which sealed files it keeps: {why[0]}")]
    names = [os.fsdecode(n) for n in r.stdout.split(b"\0") if n]
    found = [(rel, sum(1 for n in names if n.startswith(rel + os.sep))) for rel in rels]
    return [
        (
            rel,
            f"git keeps {count} files of {rel}/ in .git, which every sandboxed shell reads "
            f"(git show): untrack them (git rm -r --cached {rel}) and purge them from the "
            "history",
        )
        for rel, count in found
        if count
    ]


def _wired_gate_code(python: str, root: str) -> tuple[tuple[str, ...], str | None]:
    """The code the wired interpreter runs as the gate (:func:`~eidolons.hosts.hook.events.
    gate_code`, asked of ``python`` itself: its venv need not be this one), or why not."""
    import subprocess

    ask = "import json, sys; from eidolons.hosts.hook.events import gate_code; "
    ask += "print(json.dumps(gate_code(sys.argv[1])))"
    try:
        r = subprocess.run(
            [python, "-I", "-c", ask, root], capture_output=True, text=True, timeout=30, check=False
        )
        code = json.loads(r.stdout) if r.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        code = None
    if not isinstance(code, list) or not all(isinstance(p, str) for p in code):
        why = f"cannot ask {python} which code it runs as the gate (is eidolons installed there?)"
        return (), why
    return tuple(code), None


def _shell_writable_gate_code(
    root: str, code: tuple[str, ...], docs: dict[str, dict[str, Any]]
) -> list[str]:
    """The gate's code paths a sandboxed shell could write: inside the project or a
    temporary directory, and under no ``denyWrite`` path."""
    from eidolons.hosts.wiring import sandbox_paths
    from eidolons.io.paths import is_relative_to

    denied = sandbox_paths(docs.values(), "denyWrite", root)
    out = []
    for path in sorted({realpath(p) for p in code if p}):
        writable = is_relative_to(path, root) or path.startswith(
            ("/tmp/", "/var/tmp/", "/dev/shm/")
        )
        if writable and not any(is_relative_to(path, d) for d in denied):
            out.append(path)
    return out


def _shell_writable_wiring(root: str, docs: dict[str, dict[str, Any]]) -> list[str]:
    """The hosts' wiring files (project level) under no ``denyWrite`` path."""
    from eidolons.hosts.hook.events import WIRING_FILES
    from eidolons.hosts.wiring import sandbox_paths
    from eidolons.io.paths import is_relative_to

    denied = sandbox_paths(docs.values(), "denyWrite", root)
    return [
        rel
        for rel in WIRING_FILES
        if not any(is_relative_to(os.path.join(root, rel), d) for d in denied)
    ]


def _run_the_hook(root: Path, launcher: Path, python: str) -> list[str]:
    """Run the wired hook as Claude Code would: a plain Read is allowed, a Read of a
    hand-off without its envelope denied."""
    import subprocess

    env = {**os.environ, "CLAUDE_PROJECT_DIR": str(root), "EIDOLONS_PYTHON": python}
    try:
        probe = create_new(root / HANDOFF_DIR, ".doctor-probe-", ".md")
    except OSError as exc:  # cannot probe: the hook is not shown to deny, which is a finding
        return [f"cannot place a probe hand-off in {HANDOFF_DIR} to run the hook: {exc.strerror}"]
    problems = []
    try:
        for path, want in ((root / ".claude" / "settings.json", 0), (Path(probe), 2)):
            event = {
                "session_id": "doctor",
                "cwd": str(root),
                "hook_event_name": "PreToolUse",
                "tool_name": "Read",
                "tool_input": {"file_path": str(path)},
                "tool_use_id": "doctor",
            }
            try:
                proc = subprocess.run(
                    [str(launcher), "hook", "claude-code"],
                    input=json.dumps(event).encode(),
                    capture_output=True,
                    env=env,
                    cwd=root,
                    timeout=60,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                return [f"the wired hook does not run: {exc}"]
            if proc.returncode != want:
                what = (
                    "a plain Read" if want == 0 else "the read of a hand-off without its envelope"
                )
                said = proc.stderr.decode(errors="replace").strip().splitlines()[:1]
                problems.append(
                    f"the wired hook answered {what} with exit {proc.returncode} "
                    f"(expected {want}){': ' + said[0] if said else ''}"
                )
    finally:
        os.unlink(probe)
    return problems


def check_keys(report: Report) -> None:
    from eidolons.ecl.events import utc_now
    from eidolons.keys.host import inside, key_dir, root_refusal
    from eidolons.keys.store import TrustStoreError, load_trust_store, trust_store_path

    trust = trust_store_path(report.root)
    try:  # as every gate loads it: one that fails closed there is no "present" here
        signed = load_trust_store(report.root) is not None
    except TrustStoreError as exc:
        signed = True
        report.fail("keys", report.rel(trust), f"{exc}: every gate refuses every hand-off")
    else:
        if signed:
            report.ok("keys", report.rel(trust), "trust store present")
        else:
            report.fail(
                "keys",
                report.rel(trust),
                "no trust store: passes are unsigned (eidolons keys init)",
            )
    refusal = root_refusal(report.root, utc_now()) if signed else None
    if refusal is not None:  # every verify-envelope here would exit 3 (ADR 0011)
        why = f"the orchestrator key would not sign at this root: {refusal}"
        report.fail("keys", report.rel(trust), why)
    directory = key_dir()
    if not directory.exists():
        if signed:
            report.fail("keys", str(directory), "no signing-key directory on this machine")
        return
    if inside(directory, report.root):
        report.fail("keys", str(directory), "the signing keys lie inside the project")
    mode = stat.S_IMODE(directory.stat().st_mode)
    if mode & 0o077:
        report.fail("keys", str(directory), f"mode {mode:04o}: group or others can list it (0700)")
    for key in sorted(directory.glob("*.pem")):
        kmode = stat.S_IMODE(key.stat().st_mode)
        if kmode & 0o077:
            report.fail("keys", str(key), f"mode {kmode:04o}: readable by others (chmod 600)")
        if inside(key, report.root):
            report.fail("keys", str(key), "inside the project, where every agent can read it")


def check_trace_store(report: Report) -> None:
    from eidolons.errors import EidolonsError
    from eidolons.io.paths import TRACE_DSN_ENV

    dsn = os.environ.get(TRACE_DSN_ENV)
    if not dsn:
        return  # the JSONL store: psycopg is not even imported
    from eidolons.trace.pg_admin import authority_report
    from eidolons.trace.postgres import redact

    try:
        standing = authority_report(dsn)
    except EidolonsError as exc:
        report.fail("trace-store", redact(dsn), str(exc))
        return
    for problem in standing.problems:
        report.fail("trace-store", redact(dsn), problem)
    if not standing.problems:
        report.ok("trace-store", redact(dsn), standing.summary)


def check_agents(report: Report) -> None:
    from eidolons.hosts.wiring import receiver_agent_findings
    from eidolons.io.contracts import ContractSetUnavailable, load_contracts

    contracts = load_contracts(report.root, [])
    if isinstance(contracts, ContractSetUnavailable):
        return  # check_drift reports it
    receivers = {c.to for c in contracts}
    for path, message in receiver_agent_findings(str(report.root), receivers):
        report.fail("agents", report.rel(path), message)
