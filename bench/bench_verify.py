"""Start-up benchmark: one ``eidolons verify-envelope --block --json`` against a bare
interpreter start, plus (unless ``--no-hash``) the hashing benchmark of ``bench_hash.py``.

Usage::

    python bench/bench_verify.py [--quick] [--rounds N] [--no-hash] [--no-venv] [--src DIR]

Method
------
A temporary project is created with a small payload (1 KiB) and its envelope, emitted
through the library (:func:`eidolons.gates.sender.emit`). Then these commands are each run N
times (default 40, ``--quick`` 12) as subprocesses with output discarded, *interleaved*:
every round runs each command once, in an order rotated every round, after one discarded
warm-up round, so drift hits all rows alike. The wall time of each run is taken around
``subprocess.run``; the spawn overhead is in every row, so it cancels out of the ratios.

(a) ``python -c pass``                  baseline: bare interpreter start (``sys.executable``)
(b) ``python -S -c pass``               informational: start without ``site``
(c) ``eidolons verify-envelope ENV --block --json``  the console script (the target row)
(d) ``python -m eidolons verify-envelope ENV --block --json``
(e) clean venv: ``python -c pass``      informational, see below
(f) clean venv: ``eidolons verify-envelope ENV --block --json``
(g) the same as (c) in a project after ``eidolons init`` (trust store: the gate signs a
    DSSE receipt, so ``cryptography`` loads), informational
(h) ``python -c "from cryptography.hazmat.primitives.asymmetric import ed25519"``: the
    floor of (g), informational

The target is median(c) / median(a) <= 2.5 ("a single verification within 2.5x of bare
interpreter start-up"). Only ratios are meaningful; absolute times vary between machines
and runs.

Rows (e) and (f) use a throw-away venv that sees the same source and dependencies but not
the ``.pth`` start-up hooks of this interpreter's site-packages (which any installed
package, or the host, may add and which every start pays for, inflating baseline (a)).
Their ratio (f)/(e) is the start-up cost of the tool against a clean interpreter. With
``--src DIR`` the venv runs the package found in DIR instead, so a candidate change to
``src/`` can be measured without installing it.

The verification writes its trace event each run, as the real gate does (appending is
O(1), so later runs do not get slower). Each run's exit code is checked (must be 0).

Last, ``python -X importtime`` is run on commands (c) and (f) (with ``--no-trace``; three
runs each, keeping each module's minimum, as one run on a busy machine is noisy) and the
largest imports are listed, so it is visible what dominates start-up. In (c), modules
that a ``.pth`` hook already imported during ``site`` are charged to ``site``; (f) shows
what the tool costs on a clean interpreter.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path

from _benchlib import (
    Command,
    ImportRow,
    Stats,
    child_env,
    console_script,
    fmt_ms,
    interleave,
    load_note,
    make_clean_venv,
    make_project,
    package_src_dir,
    parse_importtime,
    run_timed,
)

TARGET_RATIO = 2.5
CRYPTO_FLOOR = "from cryptography.hazmat.primitives.asymmetric import ed25519"


def signed_project(base: Path, script: list[str]) -> tuple[dict[str, str], Path]:
    """A project after ``eidolons init`` (a trust store, an orchestrator key in a throw-away
    ``XDG_CONFIG_HOME``) with one emitted hand-off: the gate signs a DSSE receipt there."""
    project = base / "signed"
    (project / ".git").mkdir(parents=True)
    env = child_env({"XDG_CONFIG_HOME": str(base / "signed-config")})
    for argv in (
        [*script, "init", "--root", str(project)],
        [
            *script,
            "emit",
            ".eidolons/handoffs/report.md",
            "--from",
            "atlas@1.4.2",
            "--to",
            "vigil@1.9.0",
            "--performative",
            "PROPOSE",
            "--kind",
            "scout-report",
            "--objective",
            "Scout report.",
        ],
    ):
        if argv[len(script)] == "emit":
            (project / ".eidolons" / "handoffs" / "report.md").write_bytes(
                b"hello, eidolons\n" * 64
            )
        subprocess.run(argv, cwd=project, env=env, check=True, capture_output=True)
    return env, project / ".eidolons" / "handoffs" / "report.envelope.json"


def startup_commands(
    envelope: Path, script: list[str], venv: tuple[Path, Path] | None
) -> list[Command]:
    py = sys.executable
    verify = ("verify-envelope", str(envelope), "--block", "--json")
    cmds = [
        Command("a", "python -c pass (baseline)", (py, "-c", "pass")),
        Command("b", "python -S -c pass", (py, "-S", "-c", "pass"), info=True),
        Command("c", "eidolons verify-envelope (console script)", (*script, *verify)),
        Command("d", "python -m eidolons verify-envelope", (py, "-m", "eidolons", *verify)),
    ]
    if venv is not None:
        vpy, vscript = venv
        cmds += [
            Command("e", "clean venv: python -c pass", (str(vpy), "-c", "pass"), info=True),
            Command(
                "f",
                "clean venv: eidolons verify-envelope",
                (str(vpy), str(vscript), *verify),
                info=True,
            ),
        ]
    return cmds


def python_script_args(script: list[str]) -> list[str]:
    """Arguments after ``python`` that run the console script (``-m eidolons`` when the
    script is not a Python file, e.g. a shell shim)."""
    if script[0] == sys.executable:
        return script[1:]
    try:
        with open(script[0], "rb") as fh:
            first = fh.readline()
    except OSError:
        first = b""
    return script if first.startswith(b"#!") and b"python" in first else ["-m", "eidolons"]


def print_table(cmds: list[Command], stats: dict[str, Stats]) -> None:
    base = stats["a"].median
    print(f"{'':4}{'command':44}{'median ms':>10}{'p90 ms':>9}{'min ms':>9}{'x (a)':>8}")
    for c in cmds:
        s = stats[c.key]
        ratio = s.median / base
        print(
            f"({c.key}) {c.label:44}{fmt_ms(s.median):>10}{fmt_ms(s.p90):>9}"
            f"{fmt_ms(s.best):>9}{ratio:>7.2f}x"
        )


def verdict(ratio: float) -> str:
    return "MET" if ratio <= TARGET_RATIO else "MISSED"


def print_importtime(python: str, argv: list[str], cwd: Path, runs: int = 3) -> None:
    """``-X importtime`` of one command, ``runs`` times; each module's minimum is kept
    (one run on a busy machine is noisy)."""
    best: dict[tuple[str, int], ImportRow] = {}
    for _ in range(runs):
        proc = subprocess.run(
            [python, "-X", "importtime", *argv],
            cwd=cwd,
            env=child_env(),
            capture_output=True,
            text=True,
        )
        for row in parse_importtime(proc.stderr):
            key = (row.name, row.depth)
            seen = best.get(key)
            if seen is None:
                best[key] = row
            else:
                best[key] = ImportRow(
                    row.name,
                    row.depth,
                    min(seen.self_us, row.self_us),
                    min(seen.cumulative_us, row.cumulative_us),
                )
    rows = list(best.values())
    if not rows:
        print("  (no -X importtime output)")
        return
    top = [r for r in rows if r.depth == 0]
    total = sum(r.cumulative_us for r in top)
    print(f"  all imports: {total / 1000:.1f} ms (minimum per module over {runs} runs)")
    show_imports(
        "top 10 by cumulative time (top-level imports; nested ones are counted in them):",
        sorted(top, key=lambda r: r.cumulative_us, reverse=True)[:10],
    )
    show_imports(
        "top 10 by self time (any depth):",
        sorted(rows, key=lambda r: r.self_us, reverse=True)[:10],
    )


def show_imports(title: str, items: list[ImportRow]) -> None:
    print(f"  {title}")
    print(f"    {'module':40}{'self ms':>9}{'cumul ms':>10}")
    for r in items:
        name = ("  " * r.depth + r.name)[:40]
        print(f"    {name:40}{r.self_us / 1000:>9.1f}{r.cumulative_us / 1000:>10.1f}")


def run_startup(rounds: int, use_venv: bool, src: Path | None) -> None:
    script, where = console_script()
    with tempfile.TemporaryDirectory(prefix="eidolons-bench-") as tmp:
        base = Path(tmp)
        envelope = make_project(base, b"hello, eidolons\n" * 64)
        cwd = envelope.parent
        venv = make_clean_venv(base, src or package_src_dir()) if use_venv else None
        cmds = startup_commands(envelope, script, venv)
        env = child_env()
        jobs = {c.key: partial(run_timed, c.argv, cwd=cwd, env=env) for c in cmds}
        signed_env, signed_envelope = signed_project(base, script)
        verify = ("verify-envelope", str(signed_envelope), "--block", "--json")
        cmds.append(
            Command("g", "after `eidolons init`: verify-envelope (signs)", (*script, *verify))
        )
        cmds.append(
            Command(
                "h",
                "python -c 'import ed25519' (cryptography floor)",
                (sys.executable, "-c", CRYPTO_FLOOR),
                info=True,
            )
        )
        jobs["g"] = partial(run_timed, cmds[-2].argv, cwd=signed_envelope.parent, env=signed_env)
        jobs["h"] = partial(run_timed, cmds[-1].argv, cwd=cwd, env=env)
        print("== start-up: one verification vs bare interpreter start ==")
        print(f"interpreter:    {sys.executable} ({sys.version.split()[0]})")
        print(f"console script: {where}")
        if venv is not None:
            print(f"clean venv src: {src or package_src_dir()}")
        print(f"payload: 1 KiB; {rounds} interleaved runs per row (+1 warm-up round)")
        print(f"before: {load_note()}\n")
        stats = interleave(jobs, rounds)
        print_table(cmds, stats)
        print(f"after:  {load_note()}\n")
        print(f"{'ratio':10}{'medians':>9}{'minimums':>10}")
        pairs = [("c", "a", True), ("d", "a", False), ("g", "a", False), ("h", "a", False)]
        if venv is not None:
            pairs.append(("f", "e", True))
        for num, den, judged in pairs:
            med = stats[num].median / stats[den].median
            low = stats[num].best / stats[den].best
            note = f"   target <= {TARGET_RATIO}x: {verdict(med)}" if judged else ""
            print(f"({num})/({den}){med:>11.2f}x{low:>9.2f}x{note}")
        print(
            "(c)/(a): the target as specified; (f)/(e): the same against a clean interpreter "
            "(no site-packages .pth hooks)"
        )
        if venv is not None:
            hooks = stats["a"].best - stats["e"].best
            print(f".pth hooks of this interpreter add ~{hooks * 1000:.0f} ms to (a) (minimums)")
        verify = ["verify-envelope", str(envelope), "--block", "--json", "--no-trace"]
        print("\n== python -X importtime, command (c) with --no-trace ==")
        print_importtime(sys.executable, [*python_script_args(script), *verify], cwd)
        if venv is not None:
            print("\n== python -X importtime, command (f) with --no-trace (clean venv) ==")
            print_importtime(str(venv[0]), [str(venv[1]), *verify], cwd)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs, 64 MiB hash payload")
    parser.add_argument("--rounds", type=int, help="runs per start-up row (default 40, quick 12)")
    parser.add_argument("--no-hash", action="store_true", help="skip the hashing benchmark")
    parser.add_argument("--no-venv", action="store_true", help="skip the clean-venv rows")
    parser.add_argument("--src", type=Path, help="source dir for the clean venv (default: ours)")
    args = parser.parse_args(argv)
    rounds = args.rounds or (12 if args.quick else 40)
    if rounds < 1:
        parser.error("--rounds must be >= 1")
    if args.src is not None and not (args.src / "eidolons" / "__init__.py").is_file():
        parser.error(f"--src {args.src}: no eidolons/__init__.py there")
    run_startup(rounds, not args.no_venv, args.src.resolve() if args.src else None)
    if not args.no_hash:
        from bench_hash import run_hash

        print()
        run_hash(quick=args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
