"""``eidolons verify-incoming ARTIFACT --as RECEIVER``: the receiver's blocking gate."""

from __future__ import annotations

import os
import sys

from eidolons.cli.common import Option, add_options

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    import argparse

HELP = "refuse an inbound hand-off unless its integrity is on record and its edge is allowed"

#: the options, once: the argparse parser and the fast argv reader both read this
OPTIONS = (
    Option("artifact", metavar="ARTIFACT", help="the payload handed over (or its envelope)"),
    Option(
        "--as",
        dest="receiver",
        required=True,
        metavar="RECEIVER",
        help="the receiving eidolon, e.g. vigil (a @version suffix is ignored)",
    ),
    Option("--root", metavar="DIR"),
    Option(
        "--contracts",
        action="append",
        default=[],
        metavar="DIR",
        help="extra contract directory (repeatable; later ones win)",
    ),
    Option("--json", action="store_true", help="print one JSON object with every failed check"),
    Option(
        "--no-reverify",
        action="store_true",
        help="decide on the orchestrator's record (no recomputation unless the bytes are "
        "needed; bytes read are always verified)",
    ),
    Option(
        "--no-memory",
        action="store_true",
        help="neither recall nor ingest (default: $EIDOLONS_MEMORY, else the local store)",
    ),
    Option("--show-recall", action="store_true", help="print the recalled records on stderr"),
    Option(
        "--require-envelope",
        action="store_true",
        help="refuse (UNVERIFIED) an artifact without an envelope instead of skipping it",
    ),
    Option(
        "--print-payload",
        action="store_true",
        help="on pass, write to stdout exactly the bytes that were verified",
    ),
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_options(p, OPTIONS)


def run(args: argparse.Namespace) -> int:
    early = _skip_early(args)
    if early is not None:
        return early
    from eidolons._text import printable
    from eidolons.cli.common import error, fail, gate_memory, print_json, say, speak
    from eidolons.ecl.grammar import is_slug
    from eidolons.errors import UsageError
    from eidolons.io import paths as pathstr
    from eidolons.io.config import Limits, hmac_key, root_dir
    from eidolons.io.contracts import load_contracts
    from eidolons.io.payload import AmbiguousEnvelope, envelope_of

    receiver = args.receiver.partition("@")[0]
    if not is_slug(receiver):
        return error(f"--as {args.receiver!r} is not an eidolon slug")
    if args.json and args.print_payload:
        return error("--json and --print-payload both write stdout; choose one")
    notes: list[str] = []  # said on stderr, or carried in the JSON (--json)
    try:
        root = root_dir(args.root, notes=notes)
        limits = Limits.from_env(os.environ)
    except UsageError as exc:
        return fail(exc)
    if not args.json:
        say(*(f"eidolons: {note}" for note in notes))
    artifact = pathstr.pure(args.artifact)  # spelled as a Path prints it, without pathlib
    known = None  # the one trigger decision, handed to the gate
    try:  # most artifacts an agent reads are not hand-offs: decide that before any loading
        if envelope_of(artifact) is None:
            if not os.path.lexists(artifact):
                return error(f"{artifact} does not exist")
            from eidolons.gates.trigger import find_handoff

            known = None if args.require_envelope else find_handoff(artifact, root)
            if known is None and os.path.isdir(artifact):  # a hand-off swapped for one is judged
                return error(f"{artifact} is a directory, not a hand-off artifact")
            if not args.require_envelope and known is None:
                from eidolons.gates.receiver import IncomingResult

                skipped = IncomingResult("skipped", receiver, artifact)
                if args.json:
                    print_json({**skipped.to_json(), "notes": notes})
                else:
                    say(*skipped.status_lines())
                return 0
    except AmbiguousEnvelope:
        pass  # the gate refuses it, with the reason
    except UsageError as exc:  # an unreadable hand-off configuration
        return fail(exc)
    contracts = load_contracts(root, args.contracts)
    memory, memory_note = gate_memory(root, disabled=args.no_memory)
    try:
        from eidolons.gates.receiver import verify_incoming

        on_envelope = on_pass = None
        if memory is not None:
            from eidolons.memory import gate_callbacks

            on_envelope, on_pass = gate_callbacks(memory, receiver)
            if not (args.json or args.show_recall):
                on_envelope = None  # nothing would deliver the recall: none is made (ADR 0021)
        result = verify_incoming(
            artifact,
            receiver,
            root=root,
            contracts=contracts,
            key=hmac_key(),
            limits=limits,
            reverify=not args.no_reverify,
            want_payload=args.print_payload,
            require_envelope=args.require_envelope,
            on_envelope=on_envelope,
            on_pass=on_pass,
            known=known,
        )
    finally:
        if memory is not None:
            try:
                memory.close()
            except Exception as exc:  # memory never reaches the verdict (ADRs 0003, 0021)
                why = f"{exc.__class__.__name__}: {exc}"
                memory_note = f"{memory.backend} (not closed cleanly: {why})"
    result.extra["memory"] = memory_note or (memory.backend if memory is not None else "off")

    def answer() -> None:
        if args.show_recall and not args.json and "recall" in result.extra:
            _print_recall(result.extra["recall"])
        if not result and result.status != "skipped":
            # the REFUSE line goes to stderr in every mode (--json and redirected stdout
            # too), first: a stdout that cannot be written does not silence it
            if result.failures:
                say(*result.status_lines())
            if result.trace_error and not args.json:  # --json: in the JSON
                say(f"eidolons: trace not written: {printable(result.trace_error)}")
        if args.json:
            print_json({**result.to_json(), "notes": notes})
        elif result or result.status == "skipped":
            evidence = result.notes if result else []
            say(*result.status_lines(), *(f"eidolons: {note}" for note in evidence))
        if args.print_payload and result and result.payload is not None:
            sys.stdout.buffer.write(result.payload)
            sys.stdout.buffer.flush()

    # the decision on record decides the exit code, whatever the output does (ADR 0003);
    # a pass whose bytes could not be handed over whole is a 3
    code = 0 if result or result.status == "skipped" else 3
    return speak(code, answer, undelivered=3 if args.print_payload else None)


def _skip_early(args: argparse.Namespace) -> int | None:
    """The commonest case of a per-read gate, decided before anything it does not need is
    imported (ADR 0022): an artifact with no envelope that the project does not know as a
    hand-off is skipped (exit 0). Only when that answer is certain: every check of the full
    path below that could answer otherwise (a usage error, ``--require-envelope``, an
    envelope beside it, a hand-off directory, the trace naming it, a root found by falling
    back to the current directory) answers None here, and the full path decides."""
    if args.require_envelope or (args.json and args.print_payload):
        return None
    artifact = args.artifact
    if not _plain(artifact) or artifact.endswith(".envelope.json"):
        return None
    from eidolons.ecl.grammar import is_slug

    receiver = args.receiver.partition("@")[0]
    if not is_slug(receiver):
        return None
    from eidolons.errors import UsageError
    from eidolons.io.paths import found_root

    try:  # the root root_dir finds without a note or an error (the one rule), else None
        root = found_root(args.root)
    except (UsageError, OSError):  # not a directory, or the current one is gone: the
        return None  # full path says so
    if root is None:
        return None
    if os.path.isdir(artifact) or not os.path.lexists(artifact):
        return None
    from eidolons.io.paths import envelope_candidates, rules_out

    if any(os.path.lexists(p) for p in envelope_candidates(artifact)):
        return None
    from eidolons.ecl.grammar import Limits

    try:  # a cap the full path refuses is never skipped
        Limits.from_env(os.environ)
    except UsageError:
        return None
    if not rules_out(artifact, root):
        return None
    from eidolons.cli.common import print_json, say
    from eidolons.gates.skip import skip_line, skipped_json

    if args.json:
        print_json({**skipped_json(receiver, artifact), "notes": []})  # found without a note
    else:
        say(skip_line(receiver, artifact))
    return 0


def _plain(path: str) -> bool:
    """Whether ``path`` is spelled as :class:`pathlib.Path` prints it (no empty or ``.``
    component, no trailing slash): what the gate prints and looks up is then ``path``
    itself."""
    parts = path.split("/")
    if parts[0] == "" and len(parts) > 1:  # absolute: one leading slash
        parts = parts[1:]
    return "" not in parts and "." not in parts


def _print_recall(recall: dict[str, object]) -> None:
    """Recalled records on stderr, every field escaped: memory holds text from earlier
    payloads, which an attacker may have written."""
    from eidolons._text import plural, printable
    from eidolons.cli.common import say

    records = recall.get("records") or []
    backend = printable(str(recall.get("backend", "?")))
    say(f"recall ({backend}): {plural(len(records), 'record')}")  # type: ignore[arg-type]
    from eidolons.memory import record_line

    say(*(record_line(rec) for rec in records if isinstance(rec, dict)))  # type: ignore[attr-defined]
