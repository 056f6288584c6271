"""``eidolons doctor [--json]``: what to fix so no receiver can skip the gate.

Exit codes: 0 clean, 1 findings, 2 usage."""

from __future__ import annotations

import argparse

HELP = "check the set-up: D8 receiver skills, skill drift, host hooks, keys, receiver agents"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", metavar="DIR")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from eidolons.commands._common import error, print_json
    from eidolons.doctor import run_checks

    if args.root:
        root = Path(args.root)
        if not root.is_dir():
            return error(f"--root {args.root!r} is not a directory")
        root = root.resolve()
    else:
        from eidolons.config import find_root
        from eidolons.errors import UsageError

        try:
            root = find_root(None)
        except UsageError as exc:
            return error(str(exc))
    report = run_checks(root)
    if args.json:
        print_json(report.to_json())
    else:
        for finding in report.findings:
            print(finding.line())
        n = len(report.findings)
        print(f"doctor: {n} finding{'s' if n != 1 else ''}" if n else "doctor: all checks passed")
    return 1 if report.findings else 0
