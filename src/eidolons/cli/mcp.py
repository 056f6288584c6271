"""``eidolons mcp serve``: the gates as an MCP server over stdio (ADR 0020); the
``mcp`` SDK is imported only here."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from eidolons.cli.common import error, project_root
from eidolons.io.paths import realpath

HELP = "Serve the gates as MCP tools over stdio (read_verified: the gate as the only reader)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="mcp_action", metavar="ACTION", required=True)
    serve = actions.add_parser("serve", help="run the MCP server on stdin/stdout")
    serve.add_argument(
        "--as",
        dest="receiver",
        metavar="RECEIVER",
        help="bind the server to one receiver: calls naming another are refused",
    )
    serve.add_argument(
        "--root",
        metavar="DIR",
        help="project root (default: $EIDOLONS_ROOT, else $CLAUDE_PROJECT_DIR, else the "
        "nearest ancestor holding .eidolons/ or .git, else the current directory)",
    )
    serve.add_argument(
        "--contracts",
        metavar="DIR",
        action="append",
        default=[],
        help="extra contract directory (repeatable; later ones win)",
    )
    serve.add_argument(
        "--no-memory", action="store_true", help="the receiver gate neither recalls nor ingests"
    )


def run(args: argparse.Namespace) -> int:
    from eidolons.ecl.grammar import is_slug

    bound = None
    if args.receiver is not None:
        bound = args.receiver.partition("@")[0]
        if not is_slug(bound):
            return error(f"--as {args.receiver!r} is not an eidolon slug")
    explicit = args.root
    if explicit is None and not os.environ.get("EIDOLONS_ROOT"):
        explicit = os.environ.get("CLAUDE_PROJECT_DIR") or None
    root = project_root(explicit)
    if isinstance(root, int):
        return root
    for directory in args.contracts:
        if not Path(directory).is_dir():
            return error(f"--contracts {directory}: not a directory")
    if bound is not None:  # a typo in --as would refuse every call: say so now
        from eidolons.io.contracts import ContractSetUnavailable, load_contracts

        contract_set = load_contracts(root, args.contracts)
        if isinstance(contract_set, ContractSetUnavailable):
            print(
                f"eidolons mcp: warning: contracts do not load ({contract_set.reason}); "
                "every hand-off will be refused",
                file=sys.stderr,
            )
        else:
            if not contract_set.inbound(bound):
                return error(f"--as {bound}: no contract names {bound} as receiver")
    try:
        from eidolons.hosts.mcp.server import serve
    except ImportError as exc:
        return error(f"the mcp SDK is not installed ({exc}); pip install 'eidolons[mcp]'")
    from eidolons.hosts.mcp.tools import Toolbox

    box = Toolbox(
        root=root,
        bound=bound,
        contract_dirs=[Path(realpath(d)) for d in args.contracts],
        memory=not args.no_memory,
    )
    try:
        serve(box)
    except KeyboardInterrupt:
        return 0
    finally:
        sys.stderr.flush()
    return 0
