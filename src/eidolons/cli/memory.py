"""``eidolons memory recall|ingest|stats``: recall from, ingest into (only what the
receiver gate passed, the exact bytes it verified, after the pass is on record: ADR 0021)
and describe the hand-off memory. Exit codes: in ``_EPILOG``."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eidolons._text import plural
from eidolons.cli.common import error as _error
from eidolons.cli.common import fail, print_json
from eidolons.errors import EidolonsError, InputError, UsageError
from eidolons.io.config import find_root

HELP = "Recall from, ingest into (after the receiver gate) and describe the hand-off memory."

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_NOT_DONE = 3  # refused, gate unavailable, memory off: one code (ADR 0003)

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
    try:
        if args.memory_command == "recall":
            return _recall(args)
        if args.memory_command == "ingest":
            return _ingest(args)
        return _stats(args)
    except EidolonsError as exc:
        return fail(exc, EXIT_USAGE)


def _recall(args: argparse.Namespace) -> int:
    from eidolons.memory import is_error, is_skipped, parse_layers, skipped_recall

    if args.k < 1:
        raise UsageError(f"--k must be at least 1, got {args.k}")
    layers: list[str] | None = None
    if args.layers is not None:
        try:
            layers = parse_layers(args.layers) or None
        except ValueError as exc:
            raise UsageError(f"--layers: {exc}") from None
    receiver = args.receiver.partition("@")[0] if args.receiver is not None else None
    if receiver is not None:  # validated as verify-incoming validates it (ADR 0009)
        from eidolons.ecl.grammar import is_slug

        if not is_slug(receiver):
            raise UsageError(f"--as {args.receiver!r} is not an eidolon slug")
    from eidolons.memory import open_memory

    memory = open_memory(find_root(args.root))
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
        return EXIT_NOT_DONE
    if is_error(result):
        _error(f"recall refused: {result['error']}: {result.get('message', '')}")
        return EXIT_NOT_DONE
    if not args.json:
        _print_records(result)
    return EXIT_OK


def _print_records(result: Mapping[str, Any]) -> None:
    records = result.get("records", [])
    budget = result.get("budget", {})
    print(
        f"backend {result.get('backend')}: {plural(len(records), 'record')}"
        f" (k {budget.get('k_applied')}, evicted {result.get('evicted_count', 0)},"
        f" {plural(result.get('total_tokens', 0), 'token')})"
    )
    for record in records:
        print(
            f"{record['score']:.4f}  {record['layer']:<10}  "
            f"{record['trust_tier']}/{record['validation_state']:<11}  {record['id']}"
        )
        print(f"        {record['summary']}")


@dataclass
class IngestOutcome:
    """What ``eidolons memory ingest`` decided; ``exit_code`` is the command's."""

    exit_code: int
    message: str
    gate: dict[str, Any] = field(default_factory=dict)
    memory: dict[str, Any] | None = None


#: ``gate(envelope_path, root, on_pass) -> (passed, "PASS" or the refusal code)``; it calls
#: ``on_pass(envelope, payload)`` only after its pass is on record, with what it judged.
IngestGate = Callable[[Path, Path, Callable[[Any, Any], Mapping[str, Any]]], tuple[bool, str]]


def receiver_gate(
    envelope_path: Path, root: Path, on_pass: Callable[[Any, Any], Mapping[str, Any]]
) -> tuple[bool, str]:
    """The receiver gate as the hand-off's addressed recipient, ``on_pass`` its callback."""
    from eidolons.ecl.grammar import Limits
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
    envelope_path: Path, root: Path, *, gate: IngestGate | None = None
) -> IngestOutcome:
    """``gate`` (default :func:`receiver_gate`) with a callback that ingests what it
    passed. Raises :class:`~eidolons.errors.InputError` for a path that is missing or not
    a regular file (a FIFO, a device), before any read."""
    import stat

    import eidolons.memory as memory_api

    try:
        st = os.lstat(envelope_path)
    except FileNotFoundError:
        raise InputError(f"{envelope_path}: no such envelope file") from None
    except OSError as exc:
        raise InputError(f"{envelope_path}: cannot read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode) and not stat.S_ISLNK(st.st_mode):
        raise InputError(f"{envelope_path}: not a regular file")
    memory = memory_api.open_memory(root)
    seen: dict[str, Any] = {}

    def on_pass(envelope: Any, payload: Any) -> Mapping[str, Any]:
        if isinstance(payload, bytes | bytearray) and memory is not None:
            seen["result"] = memory.ingest(envelope.data, bytes(payload), gated=True)
        return {}

    try:
        try:
            passed, code = (gate or receiver_gate)(envelope_path, root, on_pass)
        except ImportError:
            message = "receiver gate unavailable; refusing to ingest"
            return IngestOutcome(EXIT_NOT_DONE, message, {"code": "GATE_UNAVAILABLE"})
        except Exception as exc:  # a crashing gate is not a pass
            return IngestOutcome(
                EXIT_NOT_DONE,
                f"receiver gate failed ({type(exc).__name__}: {exc}); refusing to ingest",
                {"code": "GATE_ERROR"},
            )
    finally:
        if memory is not None:
            memory.close()
    gate_info = {"passed": bool(passed), "code": code}
    result = seen.get("result") if passed and memory is not None else None
    if not passed:
        message = f"receiver gate refused the hand-off: {code}; not ingested"
    elif memory is None:
        message = "memory is off (EIDOLONS_MEMORY=off); not ingested"
    elif not isinstance(result, dict):
        result = None
        message = "receiver gate passed without the verified payload bytes; refusing to ingest"
    elif memory_api.is_skipped(result):
        message = f"memory unavailable, ingest skipped: {result.get('reason')}"
    elif memory_api.is_error(result):
        message = f"memory refused the hand-off: {result['error']}: {result.get('message', '')}"
    else:
        verb = "already ingested" if result.get("commit_status") == "merged" else "ingested"
        message = (
            f"{verb} {result.get('id')} ({result.get('layer')},"
            f" {result.get('trust_tier')}/{result.get('validation_state')}, backend"
            f" {result.get('backend')})"
        )
        return IngestOutcome(EXIT_OK, message, gate_info, result)
    return IngestOutcome(EXIT_NOT_DONE, message, gate_info, result)


def _ingest(args: argparse.Namespace) -> int:
    root = find_root(args.root)
    outcome = ingest_envelope(Path(args.envelope), root)
    if args.json:
        print_json(asdict(outcome))
    if outcome.exit_code != EXIT_OK:
        _error(outcome.message)
    elif not args.json:
        print(outcome.message)
    return outcome.exit_code


def _stats(args: argparse.Namespace) -> int:
    from eidolons.memory import open_memory

    memory = open_memory(find_root(args.root))
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
        return EXIT_NOT_DONE
    return EXIT_OK
