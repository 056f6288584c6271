"""``eidolons verify-envelope ENVELOPE``: the orchestrator's mechanical gate."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HELP = "recompute an envelope's digest, decide pass or refuse, and record it in the trace"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("envelope", metavar="ENVELOPE", help="path to the .envelope.json file")
    p.add_argument("--mode", help="block or warn (default: $EIDOLONS_ECL_VERIFY_MODE, else block)")
    p.add_argument("--block", action="store_true", help="same as --mode block")
    p.add_argument(
        "--strict",
        action="store_true",
        help="schema warnings make the envelope malformed; in block mode every non-pass "
        "exits 3 (unverifiable included)",
    )
    p.add_argument(
        "--json", action="store_true", help="print one JSON object on stdout, nothing on stderr"
    )
    p.add_argument(
        "--trace", metavar="FILE", help="append the event to FILE instead of the thread trace"
    )
    p.add_argument("--no-trace", action="store_true", help="do not append a trace event")
    p.add_argument(
        "--root",
        metavar="DIR",
        help="project root (default: $EIDOLONS_ROOT, else .eidolons/ or .git/ ancestor)",
    )


def run(args: argparse.Namespace) -> int:
    from eidolons._text import printable
    from eidolons.commands._common import fail, print_json, use_color
    from eidolons.config import Limits, find_root, hmac_key, verify_mode
    from eidolons.errors import UsageError
    from eidolons.gates.orchestrator import run_gate, text_line, warning_line

    try:
        if args.block and args.mode not in (None, "block"):
            raise UsageError("--block contradicts --mode " + args.mode)
        mode = "block" if args.block else verify_mode(args.mode)
        root = find_root(args.root, note=True)
        limits = Limits.from_env(os.environ)
    except UsageError as exc:
        return fail(exc)
    outcome = run_gate(
        Path(args.envelope),
        root=root,
        mode=mode,
        strict=args.strict,
        key=hmac_key(),
        limits=limits,
        trace_file=Path(args.trace) if args.trace else None,
        write_trace=not args.no_trace,
    )
    if args.json:
        print_json(outcome.to_json())
    else:
        print(text_line(outcome, color=use_color(sys.stderr)), file=sys.stderr)
        for note in outcome.notes:
            print(f"eidolons: {note}", file=sys.stderr)
        for item in outcome.result.warnings:  # upstream prints I-4's mismatch too
            if item.startswith("size_bytes_match"):
                print(f"eidolons: warning: {printable(item)}", file=sys.stderr)
    warning = warning_line(outcome)
    if warning is not None:  # even with --json: what was let through is never silent
        print(warning, file=sys.stderr)
    return outcome.exit_code
