"""``eidolons emit PAYLOAD``: write the sibling envelope for a payload (the sender's side)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from eidolons._text import printable
from eidolons.cli.common import fail, print_json, say
from eidolons.errors import EidolonsError, EnvelopeError, UsageError

HELP = "write the ECL envelope for a payload and record the emit event"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("payload", metavar="PAYLOAD")
    p.add_argument("--from", dest="sender", required=True, metavar="EIDOLON[@VERSION]")
    p.add_argument("--to", dest="recipient", required=True, metavar="EIDOLON[@VERSION]")
    p.add_argument("--performative", required=True)
    p.add_argument("--kind", required=True, help="artifact.kind, e.g. scout-report")
    p.add_argument("--objective", required=True, help="one sentence, 1-240 characters")
    p.add_argument("--thread", help="thread id (default: the new message id)")
    p.add_argument("--parent", help="parent message id")
    p.add_argument("--schema-version", default="1.0", help="artifact.schema_version (default 1.0)")
    p.add_argument(
        "--trust-level",
        choices=["low", "standard", "high"],
        help="default: the contract's trust_level for this edge",
    )
    p.add_argument(
        "--edge-origin",
        choices=["roster", "composition", "implicit", "emitted-request"],
        help="default: the contract's edge_origin for this edge, if there is a contract",
    )
    p.add_argument("--envelope-version", default="2.1", help="default 2.1")
    p.add_argument("--tokens-used", type=int, help="default: summary length / 4")
    p.add_argument(
        "--token-budget",
        type=int,
        help="default: the contract's token_budget_max for this edge, else 4000",
    )
    p.add_argument("--summary", help="context_delta.summary (default: the objective)")
    p.add_argument("--input-handle", action="append", default=[], metavar="HANDLE")
    p.add_argument(
        "--ise",
        metavar="JSON",
        help='the ise block (ECL 2.0+), e.g. \'{"assertion_grade": "validated"}\'',
    )
    p.add_argument("--contracts", action="append", default=[], metavar="DIR")
    p.add_argument(
        "--hmac", action="store_true", help="integrity via HMAC-SHA-256 keyed with $ECL_HMAC_KEY"
    )
    p.add_argument(
        "--sign",
        action="store_true",
        help="sign the envelope with the sender's key (<stem>.envelope.sig)",
    )
    p.add_argument(
        "--out", metavar="FILE", help="envelope path (default: ${PAYLOAD%%.*}.envelope.json)"
    )
    p.add_argument("--force", action="store_true", help="replace an existing envelope")
    p.add_argument(
        "--no-check",
        action="store_true",
        help="write even an envelope the receiver would refuse (with a warning)",
    )
    p.add_argument("--json", action="store_true", help="print the envelope and paths as JSON")
    p.add_argument("--trace", metavar="FILE", help="append the emit event to FILE")
    p.add_argument("--no-trace", action="store_true")
    p.add_argument("--root", metavar="DIR")


def run(args: argparse.Namespace) -> int:
    from eidolons.gates.sender import HandoffRefused, emit, parse_agent
    from eidolons.io.config import Limits, find_root, hmac_key, hmac_key_warning
    from eidolons.keys.host import KeyFileError

    notes: list[str] = []  # said on stderr, or carried in the JSON (--json)
    try:
        key = None
        if args.hmac:
            key = hmac_key()
            if key is None:
                raise UsageError("--hmac needs ECL_HMAC_KEY to be set")
            short = hmac_key_warning(key)
            if short is not None:
                notes.append(short)
        root = find_root(args.root, notes=notes)
        sender = parse_agent(args.sender, "--from")
        recipient = parse_agent(args.recipient, "--to")
        signer = _signer(root, sender.eidolon) if args.sign else None
        result = emit(
            Path(args.payload),
            sender=sender,
            recipient=recipient,
            performative=args.performative,
            kind=args.kind,
            objective=args.objective,
            root=root,
            thread_id=args.thread,
            parent_id=args.parent,
            schema_version=args.schema_version,
            envelope_version=args.envelope_version,
            trust_level=args.trust_level,
            edge_origin=args.edge_origin,
            ise=_ise(args.ise),
            tokens_used=args.tokens_used,
            token_budget=args.token_budget,
            summary=args.summary,
            input_handles=args.input_handle,
            key=key,
            out=Path(args.out) if args.out else None,
            force=args.force,
            write_trace=not args.no_trace,
            trace_file=Path(args.trace) if args.trace else None,
            limits=Limits.from_env(os.environ),
            signer=signer,
            contract_dirs=[Path(d) for d in args.contracts],
            check=not args.no_check,
        )
    except KeyFileError as exc:
        return fail(exc)
    except HandoffRefused as exc:
        say(*(f"eidolons: {note}" for note in notes), *exc.lines())
        return 3
    except EidolonsError as exc:
        say(*(f"eidolons: {note}" for note in notes))
        return fail(exc, 2)
    for failure in result.refusals:  # --no-check: written, and said out loud
        notes.append(
            f"warning: --no-check: {printable(args.recipient)} will refuse this "
            f"hand-off: {failure.code} ({printable(failure.message)})"
        )
    if args.json:
        print_json(
            {
                "envelope_path": str(result.envelope_path),
                "trace": str(result.trace_path) if result.trace_path else None,
                "envelope": result.envelope,
                "refusals": [f.to_dict() for f in result.refusals],
                "placed": str(result.placed) if result.placed else None,
                "notes": notes,
            }
        )
    else:
        say(*(f"eidolons: {note}" for note in notes))
        if result.placed is not None:
            print(f"payload: {result.placed} (copied into the sealed hand-off directory)")
        print(f"envelope: {result.envelope_path}")
        if result.trace_path:
            print(f"trace: {result.trace_path}")
    sys.stdout.flush()
    return 0


def _signer(root: Path, sender: str) -> object:
    """The sender's signing key for --sign (imports cryptography: only with --sign)."""
    from eidolons.ecl.events import utc_now
    from eidolons.keys.receipts import sender_signer
    from eidolons.keys.store import load_trust_store

    return sender_signer(load_trust_store(root), sender, root, utc_now())


def _ise(raw: str | None) -> dict[str, object] | None:
    from eidolons.ecl.grammar import loads_strict

    if raw is None:
        return None
    try:
        value = loads_strict(raw.encode("utf-8"))
    except EnvelopeError as exc:
        raise UsageError(f"--ise: {exc}") from None
    if not isinstance(value, dict):
        raise UsageError("--ise must be a JSON object")
    return value
