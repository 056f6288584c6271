"""``eidolons demo``: the whole idea in one command, in a throw-away project.

ATLAS hands a scout report to VIGIL: emit the envelope, verify it (pass), rewrite one
byte of the payload in transit, verify again (refused, exit 3 in block mode), and show
the thread's trace.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = "run a self-contained demonstration: emit, verify, tamper, verify, show the trace"

PAYLOAD = """\
# Scout report: install.sh $HOME race

## Decision target
Where does install.sh write to $HOME, and which writes can race?

## Findings
- FINDING-001: `cli/install.sh:42` writes the cache without a lock.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--keep", metavar="DIR", help="run in DIR (created) and keep it, instead of a temp dir"
    )


def run(args: argparse.Namespace) -> int:
    import tempfile

    from eidolons.commands._common import use_color
    from eidolons.commands._trace_chain import event_line as _format
    from eidolons.ecl.verdict import Verdict
    from eidolons.emit import emit, parse_agent
    from eidolons.gates.orchestrator import run_gate, text_line
    from eidolons.tracestore.jsonl import JsonlStore

    color = use_color(sys.stdout)

    def step(text: str) -> None:
        print(f"\n\x1b[1m{text}\x1b[0m" if color else f"\n{text}")

    if args.keep:
        root = Path(args.keep).resolve()
        root.mkdir(parents=True, exist_ok=True)
        ctx = None
    else:
        ctx = tempfile.TemporaryDirectory(prefix="eidolons-demo-")
        root = Path(ctx.name).resolve()
    try:
        (root / ".eidolons").mkdir(exist_ok=True)
        store = JsonlStore(root)  # the demo's own project, whatever store is configured
        payload = root / "handoff" / "scout-report.md"
        payload.parent.mkdir(parents=True, exist_ok=True)
        payload.write_text(PAYLOAD, encoding="utf-8")
        print(f"demo project: {root}")

        step("1. ATLAS emits the envelope for its scout report")
        print(
            "$ eidolons emit handoff/scout-report.md --from atlas@1.4.2 --to vigil@1.9.0 "
            "--performative PROPOSE --kind scout-report --objective '...'"
        )
        result = emit(
            payload,
            sender=parse_agent("atlas@1.4.2", "--from"),
            recipient=parse_agent("vigil@1.9.0", "--to"),
            performative="PROPOSE",
            kind="scout-report",
            objective="Hand the install.sh race scout report to VIGIL for debugging.",
            root=root,
            edge_origin="implicit",
            store=store,
        )
        print(f"envelope: {result.envelope_path.relative_to(root)}")
        print(f"integrity: sha256 {result.envelope['integrity']['value']}")

        step("2. The orchestrator verifies it before dispatching VIGIL")
        print("$ eidolons verify-envelope handoff/scout-report.envelope.json --block")
        first = run_gate(result.envelope_path, root=root, mode="block", store=store)
        print(text_line(first, color), f"-> exit {first.exit_code}")

        step("3. An agent in the middle rewrites the payload in transit")
        tampered = PAYLOAD.replace("without a lock", "safely; nothing to do")
        payload.write_text(tampered, encoding="utf-8")
        print("payload now says: 'writes the cache safely; nothing to do'")

        step("4. The gate recomputes the digest and refuses")
        print("$ eidolons verify-envelope handoff/scout-report.envelope.json --block")
        second = run_gate(result.envelope_path, root=root, mode="block", store=store)
        print(text_line(second, color), f"-> exit {second.exit_code}")

        step("5. The thread's trace records both decisions")
        thread = result.envelope["thread_id"]
        print(f"$ eidolons trace show {thread}")
        for line in store.iter_thread(thread):
            if line.event is not None:
                print(_format(line.event, color))

        ok = first.exit_code == 0 and first.result.verdict is Verdict.PASS and second.exit_code == 3
        print("\nA payload rewritten in transit is never acted on." if ok else "\nDEMO FAILED")
        return 0 if ok else 1
    finally:
        if ctx is not None:
            ctx.cleanup()
