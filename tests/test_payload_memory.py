"""One copy of a payload in memory, and none when its bytes are not handed over, measured
with ``tracemalloc`` around the in-process ``main(argv)`` and, for the peak resident size,
in a child process.

The edge is a project contract (``atlas -> zeta``) with no budget and no required
sections, so nothing but ``--print-payload`` needs the bytes: every builtin edge has a
token budget that a 32 MiB payload exceeds. stdout goes to a real file, so the capture
itself holds no copy of what is printed.
"""

from __future__ import annotations

import io
import os
import sys
import tracemalloc
from pathlib import Path

import pytest

from tests.conftest import clean_env, emit_cmd, run_cli

MiB = 1024 * 1024
SIZE = 32 * MiB
ENV = clean_env(EIDOLONS_MEMORY="off")
EDGE = """\
contract_version: "1.0"
from: atlas
to: zeta
edge_origin: implicit
performatives_allowed: [INFORM]
artifacts:
  - kind: blob
    schema_ref: x.json
trust_level: standard
notes: a test edge with no budget and no required sections
"""


def peak_of(argv: list[str], cwd: Path, out: Path) -> tuple[int, int]:
    """``(exit code, peak bytes allocated)`` of ``eidolons ARGV`` run in this process,
    its stdout written to the file ``out``."""
    from eidolons.cli.main import main

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    saved = sys.stdin, sys.stdout, sys.stderr
    with out.open("wb") as raw:
        stdout = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        try:
            os.environ.clear()
            os.environ.update(ENV)
            os.chdir(cwd)
            sys.stdin, sys.stdout, sys.stderr = io.StringIO(), stdout, io.StringIO()
            tracemalloc.start()
            try:
                code = main(argv)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            stdout.flush()
        finally:
            sys.stdin, sys.stdout, sys.stderr = saved
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
            stdout.detach()
    return code, peak


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A project with a 32 MiB payload emitted on ``atlas -> zeta``; returns the
    project, the payload and its envelope (not yet verified by the orchestrator)."""
    root = tmp_path_factory.mktemp("mem") / "proj"
    (root / ".eidolons" / "contracts").mkdir(parents=True)
    (root / ".eidolons" / "contracts" / "atlas-to-zeta.yaml").write_text(EDGE)
    payload = root / "big.txt"
    payload.write_bytes(b"0123456789abcdef" * (SIZE // 16))
    emit = emit_cmd(payload, sender="atlas", to="zeta", kind="blob")
    r = run_cli(*emit, cwd=root, env=ENV)
    assert r.code == 0, r.err
    return root, payload, root / "big.envelope.json"


def test_the_orchestrator_streams_the_hash(big: tuple[Path, Path, Path], tmp_path: Path) -> None:
    root, _, envelope = big
    code, peak = peak_of(["verify-envelope", str(envelope)], root, tmp_path / "out")
    assert code == 0
    assert peak < 4 * MiB, f"verify-envelope peaked at {peak / MiB:.1f} MiB on 32 MiB"


def test_the_receiver_holds_no_copy_unless_it_hands_the_bytes_over(
    big: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    root, payload, envelope = big
    assert run_cli("verify-envelope", envelope, cwd=root, env=ENV).code == 0
    out = tmp_path / "out"
    argv = ["verify-incoming", str(payload), "--as", "zeta"]
    code, peak = peak_of(argv, root, out)
    assert code == 0
    assert out.read_bytes() == b""
    assert peak < 4 * MiB, f"verify-incoming peaked at {peak / MiB:.1f} MiB on 32 MiB"
    code, peak = peak_of([*argv, "--print-payload"], root, out)
    assert code == 0
    assert out.read_bytes() == payload.read_bytes()
    assert peak < 1.5 * SIZE, f"--print-payload peaked at {peak / MiB:.1f} MiB on 32 MiB"


BUDGET_EDGE = EDGE.replace("atlas\nto: zeta", "atlas\nto: eta").replace(
    "trust_level:",
    "context_delta:\n  token_budget_max: 1000000000\n  required_handles: []\ntrust_level:",
)
RSS_SCRIPT = """\
import os, resource, subprocess, sys
gate = "import sys; from eidolons.cli.main import main; sys.exit(main(sys.argv[1:]))"
argv = [sys.executable, "-c", gate, *sys.argv[1:]]
with open(os.devnull, "wb") as out:
    code = subprocess.run(argv, stdout=out, stderr=subprocess.DEVNULL).returncode
print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""


def peak_rss(argv: list[str], cwd: Path) -> tuple[int, int]:
    """``(exit code, peak resident bytes)`` of ``eidolons ARGV`` in a child process (each
    measured in a fresh parent, so RUSAGE_CHILDREN holds that one child alone)."""
    import subprocess

    r = subprocess.run(
        [sys.executable, "-c", RSS_SCRIPT, *argv], cwd=cwd, env=ENV, capture_output=True, text=True
    )
    code, peak = r.stdout.split()
    return int(code), int(peak)


@pytest.mark.parametrize("edge", ["zeta", "eta"], ids=["no-budget", "budget"])
def test_the_receiver_holds_one_copy_at_its_peak(tmp_path: Path, edge: str) -> None:
    """A 100 MiB payload handed over (``--print-payload``) costs the gate at most 1.5x its
    size above the gate's own cost on a tiny payload, and one only judged costs no copy,
    on an edge with a token budget too (its characters are counted while it is hashed)."""
    root = tmp_path / "proj"
    (root / ".eidolons" / "contracts").mkdir(parents=True)
    contract = EDGE if edge == "zeta" else BUDGET_EDGE
    (root / ".eidolons" / "contracts" / f"atlas-to-{edge}.yaml").write_text(contract)
    size = 100 * MiB
    peaks = []
    for name, n in (("tiny.txt", 1024), ("big.txt", size)):
        payload = root / name
        with payload.open("wb") as fh:
            block = "0123456789abcdé\n".encode() * (MiB // 17)
            while fh.tell() + len(block) <= n:
                fh.write(block)
            fh.write(b"x" * (n - fh.tell()))
        assert (
            run_cli(
                *emit_cmd(payload, sender="atlas", to=edge, kind="blob"), cwd=root, env=ENV
            ).code
            == 0
        )
        envelope = root / (payload.stem + ".envelope.json")
        assert run_cli("verify-envelope", envelope, cwd=root, env=ENV).code == 0
        code, peak = peak_rss(["verify-incoming", name, "--as", edge, "--print-payload"], root)
        assert code == 0
        peaks.append(peak)
    base, peak = peaks
    code, judged = peak_rss(["verify-incoming", "big.txt", "--as", edge], root)
    assert code == 0
    print(
        f"peak RSS: {base / MiB:.1f} MiB on 1 KiB, {peak / MiB:.1f} MiB on 100 MiB handed "
        f"over, {judged / MiB:.1f} MiB on 100 MiB judged only"
    )
    assert peak < base + 1.5 * size, f"{(peak - base) / MiB:.0f} MiB above the base on 100 MiB"
    # not handed over: hashed (and its characters counted) through one small buffer
    assert judged < base + 16 * MiB, f"{(judged - base) / MiB:.0f} MiB above the base"


@pytest.mark.parametrize(
    "data",
    [b"", b"plain", "é€".encode() * 3, b"\xff\xfe\xc3", ("é" * MiB).encode() + b"\xe2\x82"],
    ids=["empty", "ascii", "utf8", "invalid", "split-across-slices"],
)
def test_the_budget_counts_characters_as_a_whole_decode_would(data: bytes) -> None:
    from eidolons.ecl.receiver import utf8_length

    assert utf8_length(data) == utf8_length(bytearray(data)) == len(data.decode("utf-8", "replace"))
