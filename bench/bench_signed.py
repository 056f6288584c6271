"""The receiver deciding on a signed receipt against the unsigned receiver, same hand-off.

Usage::

    python bench/bench_signed.py [--rounds R]

Method
------
Two throw-away projects hold the same atlas -> vigil hand-off (same payload bytes): the
*unsigned* one has no trust store; the *signed* one has run ``eidolons keys init`` (its
orchestrator key in a private temporary ``XDG_CONFIG_HOME``), so its orchestrator pass
carries a DSSE receipt and its receiver accepts only that receipt. Both are passed by the
orchestrator gate first. Then, interleaved R times (default 30, after one warm-up round):

(a) ``eidolons verify-incoming PAYLOAD --as vigil --no-memory`` in the unsigned project,
(b) the same in the signed project (trust store read, ``cryptography`` imported, the
    sidecar and trace receipts verified),

and ``python -c pass`` for reference. Reported: medians, p90 and the ratio (b)/(a),
target <= 1.3x, plus, in-process (best of 200), the gate's decision alone
(``eidolons.gates.receiver.evaluate``) in each project and what the difference is made
of: importing ``cryptography``'s Ed25519 in a fresh interpreter, and one Ed25519
verification.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import child_env, console_script, fmt_ms, interleave, load_note, run_timed

BODY = b"# Scout report\n\n## Decision target\nWhere does install.sh race?\n"
TARGET = 1.3


def make_project(base: Path, name: str, signed: bool, config: Path) -> Path:
    from eidolons.cli.main import main

    root = base / name
    (root / ".eidolons").mkdir(parents=True)
    payload = root / "handoff" / "scout-report.md"
    payload.parent.mkdir()
    payload.write_bytes(BODY)
    os.environ["XDG_CONFIG_HOME"] = str(config)
    quiet = open(os.devnull, "w")
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = quiet
    try:
        if signed:
            assert main(["keys", "init", "--root", str(root)]) == 0
        assert main(["emit", str(payload), "--from", "atlas@1.4.2", "--to", "vigil@1.9.0",
                     "--performative", "PROPOSE", "--kind", "scout-report",
                     "--objective", "Scout report.", "--root", str(root)]) == 0  # fmt: skip
        envelope = payload.with_name("scout-report.envelope.json")
        assert main(["verify-envelope", str(envelope), "--block", "--root", str(root)]) == 0
    finally:
        sys.stdout, sys.stderr = saved
        quiet.close()
    return payload


def decide_in_process(payload: Path, root: Path, repeat: int) -> float:
    from eidolons.gates.receiver import evaluate
    from eidolons.io.contracts import ContractSet

    contracts = ContractSet.load(root)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = evaluate(payload, "vigil", root=root, contracts=contracts)
        best = min(best, time.perf_counter() - t0)
        assert result, result.failures
    return best


def crypto_import_ms() -> float:
    code = (
        "import time; t=time.perf_counter(); "
        "from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey; "
        "print(time.perf_counter()-t)"
    )
    runs = [
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout)
        for _ in range(5)
    ]
    return min(runs) * 1000


def verify_us() -> float:
    from eidolons.keys.receipts import Signer, verify

    signer = Signer.generate()
    sig = signer.sign(b"x" * 600)
    t0 = time.perf_counter()
    for _ in range(1000):
        verify(signer.public_raw, sig, b"x" * 600)
    return (time.perf_counter() - t0) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="eidolons-bench-signed-") as tmp:
        base = Path(tmp)
        config = base / "config"
        unsigned = make_project(base, "unsigned", False, config)
        signed = make_project(base, "signed", True, config)
        script, where = console_script()
        env = child_env({"XDG_CONFIG_HOME": str(config)})

        def gate(payload: Path) -> float:
            root = payload.parent.parent
            argv = [*script, "verify-incoming", str(payload), "--as", "vigil", "--no-memory"]
            return run_timed([*argv, "--root", str(root)], cwd=root, env=env)

        jobs = {
            "unsigned": lambda: gate(unsigned),
            "signed": lambda: gate(signed),
            "bare": lambda: run_timed([sys.executable, "-c", "pass"], cwd=base, env=env),
        }
        stats = interleave(jobs, args.rounds)
        os.environ["XDG_CONFIG_HOME"] = str(config)
        in_unsigned = decide_in_process(unsigned, unsigned.parent.parent, 200)
        in_signed = decide_in_process(signed, signed.parent.parent, 200)
    print(f"receiver gate ({where}), {args.rounds} interleaved rounds; {load_note()}")
    print(f"{'':44}{'median':>10}{'p90':>10}")
    for key, label in (
        ("unsigned", "(a) unsigned project (record in the trace)"),
        ("signed", "(b) signed project (DSSE receipt)"),
        ("bare", "    python -c pass"),
    ):
        s = stats[key]
        print(f"{label:44}{fmt_ms(s.median):>10}{fmt_ms(s.p90):>10}")
    ratio = stats["signed"].median / stats["unsigned"].median
    verdict = "met" if ratio <= TARGET else "MISSED"
    print(f"\nratio (b)/(a), whole gate: {ratio:.2f}x   target <= {TARGET}x: {verdict}")
    best = stats["signed"].best / stats["unsigned"].best
    print(f"ratio of minimums (b)/(a): {best:.2f}x")
    print(
        f"decision alone, in-process (best of 200): unsigned {in_unsigned * 1e3:.2f} ms, "
        f"signed {in_signed * 1e3:.2f} ms, ratio {in_signed / in_unsigned:.2f}x"
    )
    print(
        f"made of: import of cryptography's Ed25519 {crypto_import_ms():.1f} ms (fresh "
        f"interpreter, best of 5); one Ed25519 verification {verify_us():.0f} us"
    )
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
