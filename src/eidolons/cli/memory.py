"""``eidolons memory``: recall from, ingest into and describe the hand-off memory.

- ``recall QUERY [--as RECEIVER] [--k N] [--layers a,b] [--explain] [--json] [--root DIR]``:
  the CRYSTALIUM ``recall`` over the project's scope (and the receiver's class visibility
  with ``--as``); all four layers unless ``--layers`` narrows them.
- ``ingest ENVELOPE [--json] [--root DIR]``: the receiver gate (as the hand-off's
  addressed recipient) with an "on pass" callback that ingests: the envelope is read and
  parsed once, by the gate, and only the envelope it judged, with the exact payload bytes
  it verified, is ingested, after the pass is on record. A FIFO or device is refused
  before any read. When the gate cannot be imported the command fails closed.
- ``stats [--json] [--root DIR]``: what the store holds (local) or which server and tools
  answer (mcp).

Exit codes: 0 done; 1 refused (the gate did not pass, or the memory refused the hand-off
or the query with a reason code); 2 usage or unreadable input; 3 the receiver gate is
unavailable or failed, so nothing was ingested; 4 the memory is off or unavailable (the
call was skipped).

Only the standard library is imported at module level (CLI start-up time).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eidolons.cli.common import error as _error
from eidolons.cli.common import fail, open_memory, print_json
from eidolons.io.config import find_root

if TYPE_CHECKING:
    from eidolons.memory import Memory

HELP = "Recall from, ingest into (after the receiver gate) and describe the hand-off memory."

EXIT_OK = 0
# one vocabulary for every command (ADR 0027): what was not done is a refusal (3)
EXIT_REFUSED = 3
EXIT_USAGE = 2
EXIT_GATE_UNAVAILABLE = 3
EXIT_MEMORY_UNAVAILABLE = 3

_EPILOG = (
    "exit codes: 0 done, 2 usage or bad input, 3 not done (refused by the receiver gate, "
    "gate unavailable, or memory off or unavailable: nothing ingested), 70 internal error. "
    "Backend: EIDOLONS_MEMORY="
    "off|local|mcp (default local), EIDOLONS_MEMORY_COMMAND or EIDOLONS_MEMORY_URL for mcp."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = _EPILOG
    actions = parser.add_subparsers(dest="memory_command", metavar="ACTION", required=True)

    recall = actions.add_parser(
        "recall", help="recall prior hand-offs related to QUERY", epilog=_EPILOG
    )
    recall.add_argument("query", metavar="QUERY")
    recall.add_argument(
        "--as", dest="receiver", metavar="RECEIVER", help="recall as this agent class"
    )
    recall.add_argument("--k", type=int, default=5, metavar="N", help="at most N records (5)")
    recall.add_argument(
        "--layers",
        metavar="LAYERS",
        help="comma-separated subset of episodic,semantic,procedural,execution (all)",
    )
    recall.add_argument("--explain", action="store_true", help="include the ranking diagnostics")
    _common_options(recall)

    ingest = actions.add_parser(
        "ingest",
        help="run the receiver gate on ENVELOPE and ingest the hand-off if it passes",
        epilog=_EPILOG,
    )
    ingest.add_argument("envelope", metavar="ENVELOPE", help="path to the .envelope.json")
    _common_options(ingest)

    stats = actions.add_parser("stats", help="describe the memory", epilog=_EPILOG)
    _common_options(stats)


def _common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the answer as JSON")
    parser.add_argument("--root", metavar="DIR", help="project root (default: discovered)")


def run(args: argparse.Namespace) -> int:
    from eidolons.errors import EidolonsError

    try:
        if args.memory_command == "recall":
            return _recall(args)
        if args.memory_command == "ingest":
            return _ingest(args)
        return _stats(args)
    except EidolonsError as exc:
        return fail(exc, EXIT_USAGE)


# ---------------------------------------------------------------------------------------


def _recall(args: argparse.Namespace) -> int:
    from eidolons.errors import UsageError
    from eidolons.memory import is_error, is_skipped
    from eidolons.memory._common import parse_layers, skipped_recall

    if args.k < 1:
        raise UsageError(f"--k must be at least 1, got {args.k}")
    layers: list[str] | None = None
    if args.layers is not None:
        try:
            layers = parse_layers(args.layers) or None
        except ValueError as exc:
            raise UsageError(f"--layers: {exc}") from None
    receiver = args.receiver.partition("@")[0] if args.receiver is not None else None
    if receiver is not None:  # validated as verify-incoming validates it (ADR 0026)
        from eidolons.ecl.grammar import is_slug

        if not is_slug(receiver):
            raise UsageError(f"--as {args.receiver!r} is not an eidolon slug")
    root = find_root(args.root)
    memory = open_memory(root)
    if memory is None:
        result = skipped_recall("memory is off (EIDOLONS_MEMORY=off)", args.k)
    else:
        try:
            scope: dict[str, Any] = {}
            if memory.project:
                scope["project"] = memory.project
            if receiver:
                scope["agent_class_visibility"] = receiver
            result = memory.recall(scope, args.query, args.k, layers, explain=args.explain)
        finally:
            memory.close()
    if args.json:
        print_json(result)
    if is_skipped(result):
        _error(f"memory unavailable, recall skipped: {result.get('reason')}")
        return EXIT_MEMORY_UNAVAILABLE
    if is_error(result):
        _error(f"recall refused: {result['error']}: {result.get('message', '')}")
        return EXIT_REFUSED
    if not args.json:
        _print_records(result)
    return EXIT_OK


def _print_records(result: Mapping[str, Any]) -> None:
    records = result.get("records", [])
    budget = result.get("budget", {})
    print(
        f"backend {result.get('backend')}: {len(records)} record(s)"
        f" (k {budget.get('k_applied')}, evicted {result.get('evicted_count', 0)},"
        f" {result.get('total_tokens', 0)} tokens)"
    )
    for record in records:
        print(
            f"{record['score']:.4f}  {record['layer']:<10}  "
            f"{record['trust_tier']}/{record['validation_state']:<11}  {record['id']}"
        )
        print(f"        {record['summary']}")


# ---------------------------------------------------------------------------------------


@dataclass
class IngestOutcome:
    """What ``eidolons memory ingest`` decided; ``exit_code`` is the command's."""

    exit_code: int
    message: str
    gate: dict[str, Any] = field(default_factory=dict)
    memory: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "exit_code": self.exit_code,
            "message": self.message,
            "gate": self.gate,
            "memory": self.memory,
        }


#: ``gate(envelope_path, root, on_pass) -> (passed, "PASS" or the refusal code)``. The gate
#: reads the envelope once and calls ``on_pass(envelope, payload)`` only after its pass is
#: on record, with the envelope it judged (an object with ``.data``) and the exact bytes
#: it verified.
IngestGate = Callable[[Path, Path, Callable[[Any, Any], Mapping[str, Any]]], tuple[bool, str]]


def receiver_gate(
    envelope_path: Path, root: Path, on_pass: Callable[[Any, Any], Mapping[str, Any]]
) -> tuple[bool, str]:
    """The receiver gate (``eidolons.gates.receiver``) as the hand-off's addressed
    recipient, with ``on_pass`` as its callback: one read, one parse, and what is
    ingested is what was judged."""
    from eidolons.ecl.limits import Limits
    from eidolons.gates.receiver import verify_incoming
    from eidolons.io.config import hmac_key
    from eidolons.io.contracts import load_contracts

    result = verify_incoming(
        envelope_path,
        None,
        root=root,
        contracts=load_contracts(root, []),
        key=hmac_key(),
        limits=Limits.from_env(os.environ),
        want_payload=True,
        on_pass=on_pass,
    )
    return (True, "PASS") if result else (False, result.failure_code or "UNVERIFIED")


def ingest_envelope(
    envelope_path: Path,
    root: Path,
    *,
    gate: IngestGate | None = None,
    memory_factory: Callable[[Path], Memory | None] | None = None,
) -> IngestOutcome:
    """The receiver gate with an "on pass" callback that ingests (ADR 0011): the gate
    reads and parses the envelope once, and only what it judged, with the bytes it
    verified, reaches the memory. ``gate`` defaults to :func:`receiver_gate`,
    ``memory_factory`` to the commands' one opener (``_common.open_memory``). A path that
    is missing or not a regular file (a FIFO, a device) is bad input, refused before any read."""
    import stat

    import eidolons.memory as memory_api
    from eidolons.errors import InputError

    try:
        st = os.lstat(envelope_path)
    except FileNotFoundError:
        raise InputError(f"{envelope_path}: no such envelope file") from None
    except OSError as exc:
        raise InputError(f"{envelope_path}: cannot read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode) and not stat.S_ISLNK(st.st_mode):
        raise InputError(f"{envelope_path}: not a regular file")
    memory = (memory_factory or open_memory)(root)
    seen: dict[str, Any] = {}

    def on_pass(envelope: Any, payload: Any) -> Mapping[str, Any]:
        seen["called"] = True
        if not isinstance(payload, bytes | bytearray):
            return {}
        if memory is not None:
            seen["result"] = memory.ingest(envelope.data, bytes(payload), gated=True)
        return {}

    try:
        try:
            passed, code = (gate or receiver_gate)(envelope_path, root, on_pass)
        except ImportError:
            message = "receiver gate unavailable; refusing to ingest"
            return IngestOutcome(EXIT_GATE_UNAVAILABLE, message, {"code": "GATE_UNAVAILABLE"})
        except Exception as exc:  # a crashing gate is not a pass
            return IngestOutcome(
                EXIT_GATE_UNAVAILABLE,
                f"receiver gate failed ({type(exc).__name__}: {exc}); refusing to ingest",
                {"code": "GATE_ERROR"},
            )
    finally:
        if memory is not None:
            memory.close()
    gate_info = {"passed": bool(passed), "code": code}
    if not passed:
        return IngestOutcome(
            EXIT_REFUSED, f"receiver gate refused the hand-off: {code}; not ingested", gate_info
        )
    if memory is None:
        return IngestOutcome(
            EXIT_MEMORY_UNAVAILABLE, "memory is off (EIDOLONS_MEMORY=off); not ingested", gate_info
        )
    result = seen.get("result")
    if not isinstance(result, dict):
        return IngestOutcome(
            EXIT_GATE_UNAVAILABLE,
            "receiver gate passed without the verified payload bytes; refusing to ingest",
            gate_info,
        )
    if memory_api.is_skipped(result):
        return IngestOutcome(
            EXIT_MEMORY_UNAVAILABLE,
            f"memory unavailable, ingest skipped: {result.get('reason')}",
            gate_info,
            result,
        )
    if memory_api.is_error(result):
        return IngestOutcome(
            EXIT_REFUSED,
            f"memory refused the hand-off: {result['error']}: {result.get('message', '')}",
            gate_info,
            result,
        )
    verb = "already ingested" if result.get("commit_status") == "merged" else "ingested"
    return IngestOutcome(
        EXIT_OK,
        f"{verb} {result.get('id')} ({result.get('layer')},"
        f" {result.get('trust_tier')}/{result.get('validation_state')}, backend"
        f" {result.get('backend')})",
        gate_info,
        result,
    )


def _ingest(args: argparse.Namespace) -> int:
    root = find_root(args.root)
    outcome = ingest_envelope(Path(args.envelope), root)
    if args.json:
        print_json(outcome.to_dict())
    if outcome.exit_code == EXIT_OK:
        if not args.json:
            print(outcome.message)
    else:
        _error(outcome.message)
    return outcome.exit_code


# ---------------------------------------------------------------------------------------


def _stats(args: argparse.Namespace) -> int:
    root = find_root(args.root)
    memory = open_memory(root)
    if memory is None:
        stats: dict[str, Any] = {"backend": "off", "status": "off"}
    else:
        try:
            stats = memory.stats()
        finally:
            memory.close()
    if args.json:
        print_json(stats)
    else:
        for key, value in stats.items():
            shown = (
                json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value
            )
            print(f"{key}: {shown}")
    if stats.get("status") in ("off", "unavailable"):
        if not args.json:
            _error(f"memory {stats['status']}")
        return EXIT_MEMORY_UNAVAILABLE
    return EXIT_OK
