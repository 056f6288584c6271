"""``eidolons doctor [--json]``: what to fix so no receiver can skip the gate.

Exit codes: 0 clean, 1 findings, 2 usage."""

from __future__ import annotations

import argparse

from eidolons._text import plural
from eidolons.cli.common import print_json, project_root

HELP = "check the set-up: D8 receiver skills, skill drift, host hooks, keys, receiver agents"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", metavar="DIR")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")


def run(args: argparse.Namespace) -> int:
    from eidolons.hosts.doctor import run_checks

    root = project_root(args.root)
    if isinstance(root, int):
        return root
    report = run_checks(root)
    if args.json:
        print_json(report.to_json())
    else:
        for finding in report.findings:
            print(f"doctor: [{finding['check']}] {finding['subject']}: {finding['message']}")
        for note in report.notes:
            print(f"doctor: note: {note}")
        n = len(report.findings)
        print(f"doctor: {plural(n, 'finding')}" if n else "doctor: all checks passed")
    return 1 if report.findings else 0
