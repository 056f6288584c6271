"""``eidolons init``: the project set up the documented way (``--undo`` removes it).

Exit codes: 0 done, 2 usage or a file init will not touch without ``--force``, 70
internal error."""

from __future__ import annotations

import argparse
import os
import sys

from eidolons.cli.common import error, print_json, project_root

HELP = "set the project up: .eidolons/, hand-off dir, keys, skills and each host's hook"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from eidolons.hosts.wiring import HOSTS

    p.add_argument(
        "--hosts",
        metavar="LIST",
        help=f"comma-separated: {','.join(HOSTS)} (default: the hosts the project shows, "
        "else claude-code)",
    )
    p.add_argument(
        "--receivers",
        metavar="LIST",
        help="comma-separated receivers whose skills to install (default: the project's "
        "agent definitions that a contract names as receivers)",
    )
    p.add_argument(
        "--allow-domain",
        metavar="DOMAIN",
        action="append",
        default=[],
        help="a network domain Bash commands may reach in Claude Code's sandbox (repeatable)",
    )
    p.add_argument("--root", metavar="DIR")
    p.add_argument("--dry-run", action="store_true", help="say what would be done, change nothing")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace a host file that is not a JSON object (kept as FILE.bak)",
    )
    p.add_argument("--undo", action="store_true", help="remove exactly what init installed")
    p.add_argument("--json", action="store_true", help="print the changes as JSON")


def run(args: argparse.Namespace) -> int:
    from eidolons.hosts.init import InitError, detect_hosts, install, undo
    from eidolons.hosts.wiring import (
        CLAUDE_CODE_GAP,
        HOSTS,
        UNSEALED,
        receiver_agent_findings,
        unsealed_note,
    )

    root = project_root(args.root)
    if isinstance(root, int):
        return root
    hosts = detect_hosts(root)
    if args.hosts is not None:
        hosts = [h.strip() for h in args.hosts.split(",") if h.strip()]
        unknown = [h for h in hosts if h not in HOSTS]
        if unknown or not hosts:
            return error(
                f"--hosts: unknown host {', '.join(unknown) or '(none)'}; known: {','.join(HOSTS)}"
            )
    if args.undo and args.hosts is not None:
        return error("--undo removes everything init installed; it takes no --hosts")
    try:
        if args.undo:
            report = undo(root, dry_run=args.dry_run, run=_quietly)
        else:
            receivers = (
                None
                if args.receivers is None
                else [r.strip() for r in args.receivers.split(",") if r.strip()]
            )
            report = install(
                root,
                hosts,
                dry_run=args.dry_run,
                force=args.force,
                python=os.path.abspath(sys.executable),  # the hooks run this interpreter
                receivers=receivers,
                domains=args.allow_domain,
                run=_quietly,
            )
    except InitError as exc:
        return error(f"init: {exc}")
    advice = []
    if not args.undo:
        from eidolons.hosts.init import project_agents

        advice = receiver_agent_findings(str(root), set(project_agents(root)[0]))
    if args.json:
        print_json(
            {
                "root": str(root),
                "dry_run": args.dry_run,
                "changes": report.lines,
                "advice": [{"file": f, "message": m} for f, m in advice],
                "notes": report.notes,
            }
        )
        return 0
    for line in report.text():
        print(line)
    for note in report.notes:
        print(f"init: note: {note}", file=sys.stderr)
    for host in [] if args.undo else [h for h in hosts if h in UNSEALED]:
        print(f"init: note: {unsealed_note(host)}", file=sys.stderr)
    if "claude-code" in hosts and not args.undo:
        print(f"init: note: {CLAUDE_CODE_GAP}", file=sys.stderr)
    for path, message in advice:
        print(f"init: advice: {path}: {message}", file=sys.stderr)
    return 0


def _quietly(argv: list[str]) -> tuple[int, str]:
    """Run an eidolons command in-process, its stdout captured (init reports for it)."""
    import contextlib
    import io

    from eidolons.cli.main import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(argv)
    return code, buf.getvalue()
