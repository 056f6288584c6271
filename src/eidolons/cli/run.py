"""``eidolons run --verify ENVELOPE [--verify-block] [--as RECEIVER] [-- COMMAND ...]``."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from eidolons._text import printable
from eidolons.cli.common import error, fail, print_json, say, speak
from eidolons.errors import EnvelopeError, InputError, UsageError

if TYPE_CHECKING:
    from eidolons.ecl.contract import ContractSet, ContractSetUnavailable
    from eidolons.gates.orchestrator import GateOutcome
    from eidolons.io.config import Limits

HELP = "gate a route: verify the envelope, then run the receiver's dispatch command"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--verify", metavar="ENVELOPE", help="the envelope to gate on (required)")
    p.add_argument("--mode", help="block or warn (default: $EIDOLONS_ECL_VERIFY_MODE, else block)")
    p.add_argument(
        "--verify-block", action="store_true", help="same as --mode block (the nexus's flag)"
    )
    p.add_argument("--as", dest="receiver", metavar="RECEIVER", help="also run the receiver gate")
    p.add_argument("--root", metavar="DIR")
    p.add_argument("--contracts", action="append", default=[], metavar="DIR")
    p.add_argument("--json", action="store_true", help="print the decision as JSON (no COMMAND)")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...")


def run(args: argparse.Namespace) -> int:
    import tempfile

    from eidolons.ecl.grammar import Limits, is_slug
    from eidolons.gates.orchestrator import run_gate
    from eidolons.io.config import find_root, hmac_key, verify_mode

    command = list(args.command)
    if command and command[0] != "--":
        # upstream's `run "PROMPT" --verify ENV` routes a prompt; this run executes a
        # command, and only one written after `--` (a one-word prompt is not a program)
        return error(
            f"run executes COMMAND only after '--' (got {printable(command[0])!r}); unlike "
            'the nexus\'s `eidolons run "PROMPT" --verify ENV`, it routes no prompt: '
            "eidolons run --verify ENVELOPE [--as RECEIVER] -- COMMAND [ARGS...]"
        )
    command = command[1:]
    if args.verify is None:
        return error("run needs --verify ENVELOPE: eidolons run --verify ENVELOPE -- COMMAND")
    if command and args.json:
        return error("--json prints the decision only; it cannot be combined with COMMAND")
    receiver = args.receiver.partition("@")[0] if args.receiver else None
    if receiver is not None and not is_slug(receiver):
        return error(f"--as {args.receiver!r} is not an eidolon slug")
    notes: list[str] = []  # said on stderr, or carried in the JSON (--json)
    try:
        mode = verify_mode(args.mode, block=args.verify_block, flag="--verify-block")
        root = find_root(args.root, notes=notes)
        limits = Limits.from_env(os.environ)
    except UsageError as exc:
        return fail(exc)
    if not args.json:
        say(*(f"eidolons: {note}" for note in notes))
    key = hmac_key()
    envelope = Path(args.verify)
    from eidolons.ecl.envelope import parse_envelope
    from eidolons.ecl.receiver import edge_budget, sections_apply
    from eidolons.io.contracts import load_contracts
    from eidolons.io.files import create, write_bytes
    from eidolons.io.payload import read_envelope_bytes

    contracts = load_contracts(root, args.contracts) if receiver is not None else None
    try:  # the route's one read of the envelope: both gates judge these bytes
        data: bytes | None = read_envelope_bytes(envelope, limits.max_envelope_bytes, root)
    except InputError:
        data = None  # the orchestrator gate reads it again and reports it malformed
    keep = False
    if data is not None and receiver is not None and contracts is not None:
        try:  # the receiver judges sections and the budget (B-1, in characters) on the
            # bytes the orchestrator hashed: kept only for such an edge
            parsed = parse_envelope(data, limits)
            keep = edge_budget(parsed, contracts, receiver) is not None
            keep = keep or sections_apply(parsed, contracts, receiver)
        except EnvelopeError:
            pass
    with tempfile.TemporaryDirectory(prefix="eidolons-route-") as private:  # mode 0700
        snapshot = Path(private) / "payload"
        with create(snapshot) as sink:
            outcome = run_gate(
                envelope, root=root, mode=mode, key=key, limits=limits, sink=sink,
                keep_payload=keep, envelope_bytes=data, command="run",
            )  # fmt: skip
        envelope_copy = Path(private) / "envelope.json"
        if data is not None:
            write_bytes(envelope_copy, data, mode=0o400)
        return _route(
            args, command, receiver, root, key, limits, outcome, snapshot,
            envelope_copy if data is not None else None, data, contracts, notes,
        )  # fmt: skip


def _route(
    args: argparse.Namespace,
    command: list[str],
    receiver: str | None,
    root: Path,
    key: bytes | None,
    limits: Limits,
    outcome: GateOutcome,
    snapshot: Path,
    envelope_copy: Path | None,
    data: bytes | None,
    contracts: ContractSet | ContractSetUnavailable | None,  # None: no receiver (--as)
    notes: list[str],
) -> int:
    import subprocess

    from eidolons.gates.orchestrator import text_line, warning_line
    from eidolons.gates.receiver import Snapshot, verify_incoming
    from eidolons.gates.route import RouteDecision

    envelope = Path(args.verify)
    decision = RouteDecision(outcome)
    if (
        decision.outcome.exit_code == 0
        and receiver is not None
        and data is not None
        and contracts is not None  # an unavailable set is falsy: it is judged, and refuses
    ):
        r = outcome.result
        hashed = r.digest is not None
        decision.incoming = verify_incoming(
            envelope,
            receiver,
            root=root,
            contracts=contracts,
            key=key,
            limits=limits,
            snapshot=Snapshot(
                data,
                digest=r.digest,
                payload_path=r.payload_path,
                identity=r.payload_identity,
                error=None if hashed else f"[{r.verdict}] {r.message}",
            ),
        )
    if receiver is not None and data is None and decision.allowed:  # fail closed
        say(f"eidolons run: route blocked: cannot read {envelope}")
        return 3

    def answer() -> None:
        incoming = decision.incoming  # falsy when refused: compare with None
        if not args.json:
            say(*(f"eidolons: {note}" for note in decision.outcome.notes))
            if not decision.allowed:
                say(f"eidolons run: route blocked: {printable(decision.reason())}")
        if not decision.allowed and incoming is not None and incoming.failures:
            say(*incoming.status_lines())  # after the route line, in every mode (--json too)
        warning = warning_line(decision.outcome) if decision.allowed else None
        if args.json:  # notes and warnings in the JSON: stderr keeps the REFUSE lines only
            said = [warning.removeprefix("eidolons: ")] if warning else []
            print_json({**decision.to_json(), "notes": notes + said})
        if not decision.allowed:
            if not args.json:
                handback = incoming.extra.get("handback") if incoming is not None else None
                if handback:
                    say(f"eidolons run: hand-back for the orchestrator: {printable(str(handback))}")
            return
        if warning is not None and not args.json:  # warn mode let a non-pass through: say
            say(text_line(decision.outcome), warning)  # so before anything runs
        if not command and not args.json:
            say(f"eidolons run: route allowed: {printable(decision.reason())}")

    # the decision on record decides, whatever the output does (ADR 0003)
    code = speak(0 if decision.allowed else 3, answer)
    if code != 0 or not command:
        return code
    # COMMAND reads the bytes the gate hashed (a read-only snapshot), never the live file
    hashed = decision.outcome.result.digest is not None
    if hashed:
        snapshot.chmod(0o400)
    try:
        proc = subprocess.run(
            command,
            env=decision.command_env(snapshot if hashed else None, envelope_copy),
            check=False,
        )
    except OSError as exc:
        return error(f"cannot run {command[0]!r}: {exc.strerror or exc}", 127)
    return proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
