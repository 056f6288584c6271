"""Shared helpers for the scripts in ``bench/`` (not a benchmark itself).

Everything here is about measuring fairly on a noisy machine:

- :func:`interleave` runs every command once per round, in an order rotated each round, so
  slow drift (thermal, other tenants, page cache) spreads evenly over all of them;
- results are reported as medians, p90s and RATIOS against a baseline measured in the same
  invocation, never as absolute targets;
- :func:`emit_handoff` and :func:`record_pass` set up the demo's ATLAS -> VIGIL hand-off
  with its orchestrator pass on record, :func:`filler_event` pads a trace;
- :func:`make_project` builds a throw-away project with an emitted envelope through the
  library (:func:`eidolons.gates.sender.emit`), exactly as a sender would;
- :func:`make_clean_venv` builds a throw-away virtual environment that sees the project's
  source and dependencies but runs none of the interpreter's site-packages ``.pth`` hooks,
  so start-up can also be compared against a *clean* interpreter start.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
import venv
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MiB = 1024 * 1024

# Variables that would change what the gate does; removed from every child's environment.
_SCRUBBED = (
    "EIDOLONS_ROOT",
    "EIDOLONS_ECL_VERIFY_MODE",
    "EIDOLONS_MAX_PAYLOAD_BYTES",
    "EIDOLONS_MAX_ENVELOPE_BYTES",
    "ECL_HMAC_KEY",
    "PYTHONPROFILEIMPORTTIME",
    "PYTHONDONTWRITEBYTECODE",
)


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for measured children: ours minus the gate's knobs."""
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env["NO_COLOR"] = "1"
    if extra:
        env.update(extra)
    return env


@dataclass(frozen=True, slots=True)
class Command:
    """One measured subprocess."""

    key: str  # short label, e.g. "a"
    label: str
    argv: tuple[str, ...]
    info: bool = False  # informational row (not part of a target)


@dataclass(frozen=True, slots=True)
class Stats:
    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p90(self) -> float:
        if len(self.samples) < 2:
            return self.samples[0]
        return statistics.quantiles(self.samples, n=10, method="inclusive")[-1]

    @property
    def best(self) -> float:
        return min(self.samples)


def run_timed(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    expect: int | None = 0,
    stdin: bytes | None = None,
) -> float:
    """Wall time (seconds) of one subprocess fed ``stdin`` (else nothing), output
    discarded. Checks its exit code."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        list(argv),
        input=stdin,
        cwd=cwd,
        env=dict(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    elapsed = time.perf_counter() - t0
    if expect is not None and proc.returncode != expect:
        err = proc.stderr.decode(errors="replace").strip()
        raise SystemExit(f"bench: {' '.join(argv)} exited {proc.returncode}, not {expect}: {err}")
    return elapsed


def interleave(
    jobs: Mapping[str, Callable[[], float]], rounds: int, warmup: int = 1
) -> dict[str, Stats]:
    """Run each job once per round, rotating the order every round; drop ``warmup`` rounds."""
    keys = list(jobs)
    samples: dict[str, list[float]] = {k: [] for k in keys}
    for r in range(warmup + rounds):
        shift = r % len(keys)
        for key in keys[shift:] + keys[:shift]:
            elapsed = jobs[key]()
            if r >= warmup:
                samples[key].append(elapsed)
    return {k: Stats(tuple(v)) for k, v in samples.items()}


def make_project(base: Path, payload_bytes: bytes | None = None, *, size: int = 0) -> Path:
    """A project under ``base`` with ``payload.bin`` and its emitted envelope.

    The payload is ``payload_bytes`` if given, else ``size`` random bytes (written in 16 MiB
    blocks). Returns the envelope path.
    """
    from eidolons.ecl.envelope import AgentRef
    from eidolons.gates.sender import emit

    project = base / "project"
    (project / ".eidolons").mkdir(parents=True)
    payload = project / "payload.bin"
    with open(payload, "wb") as fh:
        if payload_bytes is not None:
            fh.write(payload_bytes)
        else:
            left = size
            while left:
                block = os.urandom(min(left, 16 * MiB))
                fh.write(block)
                left -= len(block)
    result = emit(
        payload,
        sender=AgentRef("atlas", "1.0.0"),
        recipient=AgentRef("vigil", "1.0.0"),
        performative="INFORM",  # an edge and kind the shipped contracts allow
        kind="scout-report",
        objective="benchmark payload",
        root=project,
        env={},
        check=False,  # only the orchestrator gate reads it: a 256 MiB report is over budget
    )
    return result.envelope_path


#: The body of the benches' hand-off: the demo's ATLAS scout report, in short.
SCOUT_REPORT = b"# Scout report\n\n## Decision target\nWhere does install.sh race?\n"


def emit_handoff(
    root: Path,
    name: str,
    body: bytes = SCOUT_REPORT,
    *,
    objective: str = "Scout report.",
    thread_id: str | None = None,
) -> Any:
    """Write ``body`` to ``root/name`` and emit its envelope through the library, as the
    demo's ATLAS hands VIGIL a scout report (PROPOSE, kind ``scout-report``). Returns the
    :class:`eidolons.gates.sender.EmitResult`."""
    from eidolons.gates.sender import emit, parse_agent

    payload = root / name
    payload.write_bytes(body)
    return emit(
        payload,
        sender=parse_agent("atlas@1.4.2", "--from"),
        recipient=parse_agent("vigil@1.9.0", "--to"),
        performative="PROPOSE",
        kind="scout-report",
        objective=objective,
        root=root,
        thread_id=thread_id,
    )


def record_pass(envelope: Path, root: Path) -> None:
    """Run the orchestrator gate (block mode) on ``envelope`` so the receiver finds a
    recorded ``verify_pass``; a bench set-up that does not pass stops the bench."""
    from eidolons.gates.orchestrator import run_gate

    outcome = run_gate(envelope, root=root, mode="block")
    assert outcome.exit_code == 0, outcome.result.message


def filler_event(thread_id: str, ts: str) -> dict[str, Any]:
    """A well-formed orchestrator ``verify_pass`` to pad a trace with (set its
    ``message_id`` per line)."""
    return {
        "ts": ts,
        "event": "verify_pass",
        "message_id": "",
        "thread_id": thread_id,
        "from": "atlas@1.4.2",
        "to": "vigil@1.9.0",
        "performative": "INFORM",
        "integrity_method": "sha256",
        "gate": "orchestrator",
        "verdict": "pass",
        "integrity_value": "0" * 64,
        "payload_sha256": "0" * 64,
        "verifier": "eidolons@bench",
    }


def console_script() -> tuple[list[str], str]:
    """How to launch the installed ``eidolons`` console script, and where it was found.

    Prefers the script next to ``sys.executable`` (a shim found on PATH, e.g. pyenv's,
    would add its own start-up), then PATH, then ``sys.executable -m eidolons``.
    """
    bindir = Path(sys.executable).parent
    for name in ("eidolons", "eidolons.exe"):
        candidate = bindir / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return [str(candidate)], f"{candidate} (next to sys.executable)"
    found = shutil.which("eidolons")
    if found:
        return [found], f"{found} (PATH; may be a shim with its own start-up cost)"
    return [sys.executable, "-m", "eidolons"], "not found; fell back to `python -m eidolons`"


def package_src_dir() -> Path:
    """The directory holding the imported ``eidolons`` package (``src/`` when editable)."""
    import eidolons

    return Path(eidolons.__file__).resolve().parent.parent


#: the installed console launcher (``bin/eidolons``, ADR 0022) with its shebang rewritten,
#: as pip writes it
_LAUNCHER = Path(__file__).resolve().parents[1] / "bin" / "eidolons"


def make_clean_venv(base: Path, src: Path) -> tuple[Path, Path]:
    """A venv whose site-packages holds one ``.pth`` with plain directory lines: ``src``
    and this interpreter's site-packages (for the dependencies). Plain lines only extend
    ``sys.path``; the ``.pth`` hooks of the base site-packages do not run. Also writes the
    ``eidolons`` console launcher as pip installs it (shebang rewritten).

    Returns (python, console script).
    """
    env_dir = base / "clean-venv"
    venv.EnvBuilder(with_pip=False, symlinks=os.name != "nt").create(env_dir)
    bindir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    python = bindir / ("python.exe" if os.name == "nt" else "python")
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    base_sites = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    lines = [str(src), *sorted(base_sites)]
    Path(purelib, "_eidolons_bench.pth").write_text("\n".join(lines) + "\n")
    script = bindir / "eidolons"
    body = _LAUNCHER.read_text().split("\n", 1)[1]
    script.write_text(f"#!{python}\n{body}")
    script.chmod(0o755)
    return python, script


@dataclass(frozen=True, slots=True)
class ImportRow:
    name: str
    depth: int
    self_us: int
    cumulative_us: int


def parse_importtime(stderr: str) -> list[ImportRow]:
    """Rows of ``-X importtime`` output (``import time: self | cumulative | name``)."""
    rows: list[ImportRow] = []
    for line in stderr.splitlines():
        if not line.startswith("import time:"):
            continue
        parts = line[len("import time:") :].split("|")
        if len(parts) != 3 or not parts[0].strip().isdigit():
            continue  # the header line
        raw_name = parts[2].rstrip()
        name = raw_name.lstrip()
        depth = (len(raw_name) - len(name) - 1) // 2
        rows.append(ImportRow(name, depth, int(parts[0]), int(parts[1])))
    return rows


def load_note() -> str:
    """The 1-minute load average against the CPU count, with a warning when other work
    is competing for the CPUs (medians then inflate; minimums are more robust)."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return "load average: unavailable"
    cpus = os.cpu_count() or 1
    note = f"load average {load:.2f} on {cpus} CPUs"
    if load > 0.5 * cpus:
        note += " (busy: other work competes; prefer the ratio of minimums)"
    return note


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f}"
