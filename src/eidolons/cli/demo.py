"""``eidolons demo``: emit, verify, tamper, refuse and trace in a throw-away project, as a
scratch host (its own key, removed at the end: this host's keys are never used)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from eidolons.cli.common import error, use_color
from eidolons.io.paths import realpath

HELP = "run a self-contained demonstration: emit, verify, tamper, verify, show the trace"

PAYLOAD = """\
# Scout report: install.sh $HOME race

## Decision target
Where does install.sh write to $HOME, and which writes can race?

## Findings
- FINDING-001: `cli/install.sh:42` writes the cache without a lock.
"""


HMAC_KEY = b"demo-key-for-the-high-trust-edge-0123456789"  # >= 32 bytes (spec 6.4)
ISE = {"assertion_grade": "self-attested"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--keep", metavar="DIR", help="run in DIR (created) and keep it, instead of a temp dir"
    )


def run(args: argparse.Namespace) -> int:
    import tempfile

    from eidolons.keys.host import ScratchHost

    with tempfile.TemporaryDirectory(prefix="eidolons-demo-host-") as host, ScratchHost(host):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    import tempfile

    from eidolons.io.files import empty_dir

    if args.keep:
        try:
            empty = empty_dir(args.keep)
        except OSError as exc:  # a bad DIR is the caller's mistake: a usage error
            return error(f"--keep {args.keep!r}: cannot create the directory: {exc.strerror}")
        if not empty:
            return error(f"--keep {args.keep!r}: the directory is not empty")
        return _demo(Path(realpath(args.keep)), kept=True)
    with tempfile.TemporaryDirectory(prefix="eidolons-demo-") as tmp:
        code = _demo(Path(realpath(tmp)), kept=False)
    print(f"(the demo project {tmp} has been removed; --keep DIR keeps one)")
    return code


def _demo(root: Path, *, kept: bool) -> int:
    from eidolons.cli.trace_chain import event_line as _format
    from eidolons.ecl.integrity import Verdict
    from eidolons.gates.orchestrator import run_gate, text_line
    from eidolons.gates.receiver import verify_incoming
    from eidolons.gates.sender import emit, parse_agent
    from eidolons.io.contracts import load_contracts
    from eidolons.io.files import write_bytes
    from eidolons.io.paths import HANDOFF_DIR
    from eidolons.keys.lifecycle import init_role
    from eidolons.trace.log import JsonlStore

    color = use_color(sys.stdout)

    def step(text: str) -> None:
        print(f"\n\x1b[1m{text}\x1b[0m" if color else f"\n{text}")

    handoffs = root / HANDOFF_DIR
    payload = handoffs / "scout-report.md"
    write_bytes(payload, PAYLOAD.encode(), parents=True)
    store = JsonlStore(root)  # the demo's own project, whatever store is configured
    contracts = load_contracts(root, [])  # a broken set: the demo's gates refuse
    print(f"demo project: {root}" + (" (kept)" if kept else " (removed at the end)"))
    keys = init_role(root)  # in the scratch host: this demo's own key, never the user's
    print(
        f"demo key: {keys['keyid'][:16]}, in a scratch key directory removed at the end "
        "(this host's keys are never used)"
    )

    def receive(path: Path, key: bytes | None = None) -> object:
        result = verify_incoming(
            path, "vigil", root=root, contracts=contracts, key=key, store=store
        )
        for line in result.status_lines():
            print(line)
        return result

    step("1. ATLAS emits the envelope for its scout report")
    print(
        "$ eidolons emit .eidolons/handoffs/scout-report.md --from atlas@1.4.2 "
        "--to vigil@1.9.0 --performative PROPOSE --kind scout-report --objective '...'"
    )
    result = emit(
        payload,
        sender=parse_agent("atlas@1.4.2", "--from"),
        recipient=parse_agent("vigil@1.9.0", "--to"),
        performative="PROPOSE",
        kind="scout-report",
        objective="Hand the install.sh race scout report to VIGIL for debugging.",
        root=root,
        store=store,
        contracts=contracts,
    )
    print(f"envelope: {result.envelope_path.relative_to(root)}")
    print(f"integrity: sha256 {result.envelope['integrity']['value']}")

    step("2. The orchestrator verifies it before dispatching VIGIL")
    print("$ eidolons verify-envelope .eidolons/handoffs/scout-report.envelope.json")
    first = run_gate(result.envelope_path, root=root, mode="block", store=store)
    print(text_line(first, color), f"-> exit {first.exit_code}")

    step("3. VIGIL's own gate, before it reads a byte of the payload")
    print("$ eidolons verify-incoming .eidolons/handoffs/scout-report.md --as vigil")
    passed = receive(payload)

    step("4. An agent in the middle rewrites the payload in transit")
    write_bytes(payload, PAYLOAD.replace("without a lock", "safely; nothing to do").encode())
    print("payload now says: 'writes the cache safely; nothing to do'")

    step("5. VIGIL refuses it, with the seeds' exact line and the reason")
    print("$ eidolons verify-incoming .eidolons/handoffs/scout-report.md --as vigil")
    refused = receive(payload)
    print("$ eidolons verify-envelope .eidolons/handoffs/scout-report.envelope.json")
    second = run_gate(result.envelope_path, root=root, mode="block", store=store)
    print(text_line(second, color), f"-> exit {second.exit_code}")

    step("6. A high-trust hop: APIVR -> VIGIL needs HMAC-SHA-256 (ECL_HMAC_KEY)")
    change = handoffs / "change-summary.md"
    write_bytes(change, b"# Change summary\n\nThe cache write now takes a lock.\n")
    print(
        "$ ECL_HMAC_KEY=... eidolons emit .eidolons/handoffs/change-summary.md --from apivr "
        "--to vigil --performative PROPOSE --kind change-summary --hmac --ise '{...}' "
        f"--thread {result.envelope['thread_id']}"
    )
    hop = emit(
        change,
        sender=parse_agent("apivr@3.8.0", "--from"),
        recipient=parse_agent("vigil@1.9.0", "--to"),
        performative="PROPOSE",
        kind="change-summary",
        objective="Hand VIGIL the fix for the install.sh race.",
        root=root,
        thread_id=result.envelope["thread_id"],
        parent_id=result.envelope["message_id"],
        ise=ISE,
        key=HMAC_KEY,
        store=store,
        contracts=contracts,
    )
    print(f"integrity: hmac-sha256 {hop.envelope['integrity']['value']}")
    third = run_gate(hop.envelope_path, root=root, mode="block", key=HMAC_KEY, store=store)
    print(text_line(third, color), f"-> exit {third.exit_code}")
    high = receive(change, HMAC_KEY)

    step("7. The thread's trace records every decision")
    thread = result.envelope["thread_id"]
    print(f"$ eidolons trace show {thread}")
    for line in store.iter_thread(thread):
        if line.event is not None:
            print(_format(line.event, color))

    ok = (
        first.exit_code == 0
        and first.result.verdict is Verdict.PASS
        and bool(passed)
        and not refused
        and second.exit_code == 3
        and third.exit_code == 0
        and bool(high)
    )
    print("\nA payload rewritten in transit is never acted on." if ok else "\nDEMO FAILED")
    return 0 if ok else 70
