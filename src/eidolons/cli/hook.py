"""``eidolons hook HOST``: the argparse front (help) of the host hook, which runs from
:mod:`eidolons.hosts.hook.fast`."""

from __future__ import annotations

import argparse

HELP = "judge one host hook event on stdin (the receiver gate inside Claude Code, Cursor...)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from eidolons.hosts.hook.fast import EVENTS, HOSTS

    p.add_argument("host", metavar="HOST", choices=HOSTS, help=" | ".join(HOSTS))
    p.add_argument("event", metavar="EVENT", nargs="?", choices=EVENTS, help="ignored; for clarity")
    p.add_argument("--root", metavar="DIR", help="the project root (init writes it)")
    p.add_argument(
        "--as",
        dest="receiver",
        metavar="RECEIVER",
        help="the receiver, for hosts that do not say which agent is calling",
    )


def run(args: argparse.Namespace) -> int:
    from eidolons.hosts.hook.fast import main

    argv = [args.host]
    if args.root:
        argv += ["--root", args.root]
    if args.receiver:
        argv += ["--as", args.receiver]
    return main(argv)
