"""``eidolons verify-envelope ENVELOPE``: the orchestrator's mechanical gate."""

from __future__ import annotations

import os
import sys

from eidolons.cli.common import Option, add_options

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    import argparse

HELP = "recompute an envelope's digest, decide pass or refuse, and record it in the trace"

#: the options, once: the argparse parser and the fast argv reader both read this
OPTIONS = (
    Option("envelope", metavar="ENVELOPE", help="path to the .envelope.json file"),
    Option("--mode", help="block or warn (default: $EIDOLONS_ECL_VERIFY_MODE, else block)"),
    Option("--block", action="store_true", help="same as --mode block"),
    Option(
        "--strict",
        action="store_true",
        help="schema warnings (a missing message_id, an unknown version...) make the "
        "envelope malformed",
    ),
    Option(
        "--json",
        action="store_true",
        help="print one JSON object on stdout (notes and warnings in it), nothing on stderr",
    ),
    Option("--trace", metavar="FILE", help="append the event to FILE instead of the thread trace"),
    Option("--no-trace", action="store_true", help="do not append a trace event"),
    Option(
        "--root",
        metavar="DIR",
        help="project root (default: $EIDOLONS_ROOT, else .eidolons/ or .git/ ancestor)",
    ),
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_options(p, OPTIONS)


def run(args: argparse.Namespace) -> int:
    from eidolons._text import printable
    from eidolons.cli.common import fail, print_json, say, speak, use_color
    from eidolons.errors import UsageError
    from eidolons.gates.orchestrator import run_gate, text_line, warning_line
    from eidolons.io import paths as pathstr
    from eidolons.io.config import Limits, hmac_key, root_dir, verify_mode

    notes: list[str] = []  # said on stderr, or carried in the JSON (--json: stdout only)
    try:
        mode = verify_mode(args.mode, block=args.block)
        root = root_dir(args.root, notes=notes)
        limits = Limits.from_env(os.environ)
    except UsageError as exc:
        return fail(exc)
    if not args.json:
        say(*(f"eidolons: {note}" for note in notes))
    outcome = run_gate(
        pathstr.pure(args.envelope),  # spelled as a Path would be (ADR 0022)
        root=root,
        mode=mode,
        strict=args.strict,
        key=hmac_key(),
        limits=limits,
        trace_file=pathstr.pure(args.trace) if args.trace else None,
        write_trace=not args.no_trace,
    )

    def answer() -> None:
        warning = warning_line(outcome)  # what was let through is never silent
        if args.json:
            doc = outcome.to_json()
            doc["notes"] = notes + ([warning.removeprefix("eidolons: ")] if warning else [])
            print_json(doc)
            return
        say(text_line(outcome, color=use_color(sys.stderr)))
        say(*(f"eidolons: {note}" for note in outcome.notes))
        for item in outcome.result.warnings:  # upstream prints I-4's mismatch too
            if item.startswith("size_bytes_match"):
                say(f"eidolons: warning: {printable(item)}")
        if warning is not None:
            say(warning)

    return speak(outcome.exit_code, answer)  # the verdict on record decides (ADR 0003)
