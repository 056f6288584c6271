"""Shared test helpers: a throw-away project, the CLI run in-process through ``main(argv)``, and the
upstream conformance fixtures (read in place from ``../shared/ecl/conformance-fixtures``)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]

# The suite keeps compiled bytecode, in the pytest cache (never beside a source), even
# where PYTHONDONTWRITEBYTECODE is set: otherwise every worker recompiles every test
# module and every child interpreter (the CLI's end-to-end runs, each hook call of a real
# Claude Code) recompiles the package, about 6 s of processor time per worker.
_PYCACHE = str(REPO / ".pytest_cache" / "pycache")
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ["PYTHONPYCACHEPREFIX"] = _PYCACHE
sys.dont_write_bytecode = False
sys.pycache_prefix = _PYCACHE
# The suite's files live in memory where the system has a tmpfs with room for them (a
# container's 64 MiB /dev/shm has not): every trace append and key write is fsynced, and
# on a disk those waits are a quarter of the suite's time. The real-host tests keep their
# projects on disk (TESTS_DISK_TMPDIR): the host's sandbox mounts a /dev of its own.
_SHM = "/dev/shm"


def _roomy(path: str, need: int = 2 << 30) -> bool:
    try:
        fs = os.statvfs(path)
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK) and fs.f_bavail * fs.f_frsize >= need


if "TMPDIR" not in os.environ and _roomy(_SHM):
    os.environ["TESTS_DISK_TMPDIR"] = tempfile.gettempdir()
    os.environ["TMPDIR"] = _SHM
    tempfile.tempdir = None  # read TMPDIR again
DISK_TMPDIR = os.environ.get("TESTS_DISK_TMPDIR") or tempfile.gettempdir()
SHARED = Path(os.environ.get("EIDOLONS_SHARED", REPO.parent / "shared"))
FIXTURES = SHARED / "ecl" / "conformance-fixtures"
FIXTURE_NAMES = [
    "conformant-handoff",
    "conformant-high-trust-v2.1",
    "conformant-ise-v2",
    "conformant-ise-v2.1",
    "high-trust-no-ise-v2.1",
    "high-trust-sha256-v2",
    "ise-missing-hierarchy",
    "ise-verification-invalid-v2.1",
    "missing-integrity",
    "over-budget-context",
    "undeclared-edge",
    "v1-on-v2-compat",
]
FIXTURE_HMAC_KEY = "ecl-test-key-2.1"

needs_fixtures = pytest.mark.skipif(
    not FIXTURES.is_dir(), reason=f"upstream conformance fixtures not found at {FIXTURES}"
)


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def project_venv(project: Path) -> Path:
    """A venv inside ``project`` (as is common), whose interpreter imports this eidolons
    and its dependencies through a ``.pth``; returns that interpreter."""
    import site

    import eidolons

    venv = project / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    paths = [os.path.dirname(os.path.dirname(eidolons.__file__ or "")), *site.getsitepackages()]
    lib = next((venv / "lib").glob("python3*")) / "site-packages"
    (lib / "this-eidolons.pth").write_text("".join(f"{p}\n" for p in paths))
    return venv / "bin" / "python"


def clean_env(**extra: str | None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("EIDOLONS_", "ECL_")) and k != "NO_COLOR"
    }
    for key, value in extra.items():
        if value is not None:
            env[key] = value
    return env


class _Capture(io.TextIOWrapper):
    """A text stream over a byte buffer, as a real ``sys.stdout`` is (``.buffer`` works)."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8", errors="surrogateescape", newline="")

    def isatty(self) -> bool:
        return False

    def value(self) -> str:
        self.flush()
        raw = self.buffer.getvalue()  # type: ignore[attr-defined]
        return str(raw.decode("utf-8", "replace"))


def run_cli(
    *args: str | Path,
    cwd: Path,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    process: bool = False,
) -> Run:
    """Run ``eidolons ARGS`` in this process through ``main(argv)`` (the sigstore-python
    pattern): the working directory, the environment and the three standard streams are
    swapped for the call and restored after it. ``process=True`` spawns
    ``python -m eidolons`` instead, for what only a real process shows."""
    argv = [str(a) for a in args]
    environ = env if env is not None else clean_env()
    # `run ... -- COMMAND`: COMMAND writes to the inherited file descriptors, which only a
    # real process captures
    if process or (argv[:1] == ["run"] and "--" in argv):
        proc = subprocess.run(
            [sys.executable, "-m", "eidolons", *argv],
            cwd=cwd,
            env=environ,
            capture_output=True,
            text=True,
            input=stdin,
            timeout=60,
        )
        return Run(proc.returncode, proc.stdout, proc.stderr)
    from eidolons.cli.main import main

    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    out, err = _Capture(), _Capture()
    stdin_stream = io.TextIOWrapper(io.BytesIO((stdin or "").encode()), encoding="utf-8")
    try:
        set_environ(environ)
        os.chdir(cwd)
        sys.stdin, sys.stdout, sys.stderr = stdin_stream, out, err
        try:
            code = main(argv)
        except SystemExit as exc:  # pragma: no cover - main() returns, never exits
            code = exc.code if isinstance(exc.code, int) else 2
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        set_environ(saved_env)
    return Run(code, out.value(), err.value())


def set_environ(target: dict[str, str]) -> None:
    """Make ``os.environ`` equal ``target``, setting and unsetting only the variables that
    differ (clearing and refilling it costs a ``putenv`` a variable, twice a call)."""
    for key in [k for k in os.environ if k not in target]:
        del os.environ[key]
    for key, value in target.items():
        if os.environ.get(key) != value:
            os.environ[key] = value


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / ".eidolons").mkdir(parents=True)
    return root


@pytest.fixture
def cli(project: Path) -> Callable[..., Run]:
    def _run(*args: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> Run:
        return run_cli(*args, cwd=cwd or project, env=env)

    return _run


def read_trace(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def trace_files(root: Path) -> list[Path]:
    return sorted((root / ".eidolons" / ".trace").glob("*.jsonl"))


def emit_cmd(
    payload: str | Path,
    *extra: str | Path,
    sender: str = "atlas",
    to: str = "vigil",
    performative: str = "INFORM",
    kind: str = "scout-report",
    objective: str = "o",
) -> tuple[str | Path, ...]:
    """The arguments of ``eidolons emit PAYLOAD`` with the five required options, then
    ``extra``: ``cli(*emit_cmd(payload, "--hmac", sender="forge"), env=keyed)``."""
    return (
        "emit",
        payload,
        "--from",
        sender,
        "--to",
        to,
        "--performative",
        performative,
        "--kind",
        kind,
        "--objective",
        objective,
        *extra,
    )


def emit_payload(
    cli: Callable[..., Run],
    project: Path,
    name: str = "handoff/scout-report.md",
    body: str = "# Report\n\n## Decision target\nx\n",
    *extra: str,
    sender: str = "atlas@1.4.2",
    to: str = "vigil@1.9.0",
    performative: str = "PROPOSE",
    kind: str = "scout-report",
    objective: str = "Hand the scout report over.",
    env: dict[str, str] | None = None,
) -> tuple[Path, Path, dict[str, Any]]:
    """Write ``project/NAME`` and emit its envelope (``extra`` options after ``--json``);
    returns the payload, the envelope's path and the envelope. The one CLI-made hand-off
    of the tests; the dict-made one is :func:`tests._builders.envelope_for`."""
    payload = project / name
    payload.parent.mkdir(parents=True, exist_ok=True)
    payload.write_text(body, encoding="utf-8")
    r = cli(
        *emit_cmd(
            payload,
            "--json",
            *extra,
            sender=sender,
            to=to,
            performative=performative,
            kind=kind,
            objective=objective,
        ),
        **({"env": env} if env is not None else {}),
    )
    assert r.code == 0, r.err
    doc = r.json()
    return payload, Path(doc["envelope_path"]), doc["envelope"]


@pytest.fixture(autouse=True, scope="session")
def _host_config(tmp_path_factory: pytest.TempPathFactory) -> None:
    """This host's config directory (keys, pins, trace heads) is a temporary one for the
    session, never the user's: tests that need their own pass XDG_CONFIG_HOME."""
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path_factory.mktemp("xdg-config"))
