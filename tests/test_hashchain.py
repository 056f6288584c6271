"""The hash-chained trace (ADR 0012): every line this tool appends carries ``seq`` and
``prev``; ``trace verify`` finds an edited, removed, inserted or reordered line."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from eidolons.ecl.events import GENESIS, verify_chain
from eidolons.trace.log import append_event
from tests.conftest import Run, clean_env, emit_payload, run_cli

Cli = Callable[..., Run]


def lines_of(path: Path) -> list[bytes]:
    return [x for x in path.read_bytes().split(b"\n") if x.strip()]


def test_every_appended_line_is_linked_to_the_one_before(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    for n in range(1, 5):
        append_event(path, {"event": "emit", "n": n, "seq": 99, "prev": "forged"})
    lines = lines_of(path)
    events = [json.loads(x) for x in lines]
    assert [e["seq"] for e in events] == [1, 2, 3, 4]  # a caller's own seq/prev is replaced
    assert events[0]["prev"] == GENESIS
    for before, event in zip(lines, events[1:], strict=False):
        assert event["prev"] == hashlib.sha256(before).hexdigest()
    assert verify_chain(lines).state == "intact"


def test_upstream_unchained_trace_still_reads_and_is_continued(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    upstream = b'{"ts":"2026-05-08T00:00:00Z","event":"emit","message_id":"m"}\n' * 2
    path.write_bytes(upstream)
    assert verify_chain(lines_of(path)).state == "unchained"
    append_event(path, {"event": "verify_pass"})
    report = verify_chain(lines_of(path))
    assert report.state == "partial" and report.unchained_prefix == 2 and report.ok
    last = json.loads(lines_of(path)[-1])
    assert (
        last["seq"] == 3
        and last["prev"] == hashlib.sha256(upstream[:-1].split(b"\n")[-1]).hexdigest()
    )


def test_concurrent_writers_keep_one_chain(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"

    def writer(w: int) -> None:
        for n in range(25):
            append_event(path, {"event": "emit", "writer": w, "n": n})

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    report = verify_chain(lines_of(path))
    assert report.state == "intact" and report.lines == 100 and report.chained == 100


def _chain(n: int) -> list[bytes]:
    lines: list[bytes] = []
    prev = GENESIS
    for i in range(1, n + 1):
        raw = json.dumps({"event": "emit", "i": i, "seq": i, "prev": prev}, separators=(",", ":"))
        lines.append(raw.encode())
        prev = hashlib.sha256(lines[-1]).hexdigest()
    return lines


@pytest.mark.parametrize(
    ("attack", "line", "why"),
    [
        ("edit", 3, "prev does not match line 2"),
        ("remove", 2, "seq 3 at line 2"),
        ("insert", 3, "line carries no seq/prev"),
        ("reorder", 2, "seq 3 at line 2"),
        ("damage", 3, "damaged line"),
        ("relink-edit", 4, "prev does not match line 3"),
    ],
)
def test_tampering_breaks_the_chain_where_it_happened(attack: str, line: int, why: str) -> None:
    lines = _chain(5)
    if attack == "edit":
        lines[1] = lines[1].replace(b'"i":2', b'"i":7')
    elif attack == "remove":
        del lines[1]
    elif attack == "insert":
        lines.insert(2, b'{"event":"verify_pass","gate":"orchestrator"}')
    elif attack == "reorder":
        lines[1], lines[2] = lines[2], lines[1]
    elif attack == "damage":
        lines[2] = b"{not json"
    elif attack == "relink-edit":  # edit line 3 and fix line 3's own link: line 4 still knows
        lines[2] = lines[2].replace(b'"i":3', b'"i":8')
    report = verify_chain(lines)
    assert report.state == "broken" and report.first_break is not None
    assert report.first_break[0] == line and why in report.first_break[1]


def test_first_line_must_start_from_zeros() -> None:
    lines = _chain(2)
    lines[0] = lines[0].replace(GENESIS.encode(), b"1" * 64)
    assert verify_chain(lines).first_break == (1, "prev of line 1 is not 64 zeros")


# ------------------------------------------------------------------------ trace verify CLI


def _handoff(cli: Cli, project: Path) -> Path:
    _, envelope, env = emit_payload(cli, project)
    assert cli("verify-envelope", envelope, "--mode", "block").code == 0
    return project / ".eidolons/.trace" / f"{env['thread_id']}.jsonl"


def test_trace_verify_reports_an_intact_chain(cli: Cli, project: Path) -> None:
    trace = _handoff(cli, project)
    r = cli("trace", "verify", trace.stem, "--block", "--json")
    assert r.code == 0, r.err
    (chain,) = r.json()["chains"]
    assert chain["state"] == "intact" and chain["lines"] == 2 and chain["first_break"] is None
    assert chain["receipts"] == [
        {
            "line": 2,
            "message_id": chain["receipts"][0]["message_id"],
            "verdict": "pass",
            "counted": True,
            "receipt": "none",
        }
    ]
    text = cli("trace", "verify", str(trace), "--block")
    assert text.code == 0 and "chain intact (2 lines)" in text.out


@pytest.mark.parametrize("attack", ["edit", "remove"])
def test_attack_edited_or_removed_trace_line_is_found(cli: Cli, project: Path, attack: str) -> None:
    trace = _handoff(cli, project)
    envelope = project / "handoff/scout-report.envelope.json"
    assert cli("verify-envelope", envelope, "--mode", "block").code == 0  # a third line
    lines = lines_of(trace)
    assert len(lines) == 3
    if attack == "edit":  # the emit line rewritten: line 2's prev no longer matches
        lines[0] = lines[0].replace(b'"event":"emit"', b'"event":"emit","note":"x"')
    else:  # the first verdict removed: line 3 now sits at line 2
        del lines[1]
    trace.write_bytes(b"".join(x + b"\n" for x in lines))
    r = cli("trace", "verify", trace.stem, "--block")
    assert r.code == 3 and "chain BROKEN at line 2" in r.out
    warn = cli("trace", "verify", trace.stem, "--mode", "warn", "--json")
    assert warn.code == 0 and warn.json()["chains"][0]["state"] == "broken"
    assert warn.json()["all_pass"] is False


def test_trace_verify_checks_each_verdicts_receipt(project: Path, tmp_path: Path) -> None:
    env = clean_env(XDG_CONFIG_HOME=str(tmp_path / "cfg"))

    def cli(*args: str | Path) -> Run:
        return run_cli(*args, cwd=project, env=env)

    assert cli("keys", "init").code == 0
    trace = _handoff(cli, project)
    r = cli("trace", "verify", trace.stem, "--block", "--json")
    assert r.code == 0 and r.json()["chains"][0]["receipts"][0]["receipt"] == "valid"
    # a pass line whose receipt belongs to another verdict: re-linked so the chain holds
    lines = lines_of(trace)
    forged = json.loads(lines[1])
    forged["verdict"], forged["event"] = "tamper", "verify_fail"
    body = {k: v for k, v in forged.items() if k not in ("seq", "prev")}
    trace.write_bytes(lines[0] + b"\n")
    append_event(trace, body)
    r = cli("trace", "verify", trace.stem, "--block", "--json")
    chain = r.json()["chains"][0]
    assert chain["state"] == "intact" and r.code == 3
    assert (
        chain["receipts"][0]["receipt"] == "invalid: the receipt's verdict differs from the line's"
    )


@pytest.mark.parametrize(
    "prefix",
    [
        b'{"event":"emit"}  \n',  # a line's own trailing spaces are part of its bytes
        b'{"event":"emit"}\n\n   \n',  # blank lines are not lines
        b'{"event":"emit","pad":"' + b"x" * 70_000 + b'"}\n',  # longer than one read block
        b'{"a":1}\n'
        + b'{"event":"emit","pad":"'
        + b"y" * (1024 * 1024 + 10)
        + b'"}\n',  # chunked count
        b"\n\n" + b'{"n":1}\n' * 3 + b"{torn",  # upstream lines, then a torn one
    ],
)
def test_link_after_any_last_line_matches_what_readers_see(tmp_path: Path, prefix: bytes) -> None:
    from eidolons.trace.log import read_raw_lines

    path = tmp_path / "t.jsonl"
    path.write_bytes(prefix)
    append_event(path, {"event": "verify_pass"})
    append_event(path, {"event": "receive"})
    lines = list(read_raw_lines(path))
    report = verify_chain(lines)
    assert report.ok and report.chained == 2, report.to_dict()


def test_attack_trace_swapped_between_reads_is_judged_on_one_read(
    cli: Cli, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that swaps the trace file while ``trace verify`` reads it must not pair the
    verdicts of one version with the intact chain of another: the file is opened once,
    and a later open (if any) finds the intact file put back."""
    import eidolons.trace.log as trace_mod

    payload, envelope, env = emit_payload(cli, project)
    payload.write_text("# Report\n\n## Decision target\ntampered\n", encoding="utf-8")
    assert cli("verify-envelope", envelope, "--mode", "warn").code == 0  # a verify_fail line
    trace = project / ".eidolons/.trace" / f"{env['thread_id']}.jsonl"
    append_event(trace, {"event": "note"})  # no hop of its own
    intact = trace.read_bytes()
    lines = lines_of(trace)
    fail = json.loads(lines[1])
    assert fail["event"] == "verify_fail"
    forged_line = dict(fail, event="verify_pass", verdict="pass")  # same seq/prev
    forged_line.pop("verify_failure_code", None)
    lines[1] = json.dumps(forged_line, separators=(",", ":")).encode()
    trace.write_bytes(b"".join(x + b"\n" for x in lines))  # line 3's prev now mismatches
    spare = trace.with_name("intact.tmp")
    spare.write_bytes(intact)

    real_open = trace_mod.open_trace_fd
    opened: list[Path] = []

    def racing_open(path: Path, flags: int, *, create: bool) -> int:
        fd = real_open(path, flags, create=create)
        if Path(path).name == trace.name and not opened:
            opened.append(Path(path))
            spare.replace(trace)  # the open descriptor keeps the forged file
        return fd

    monkeypatch.setattr(trace_mod, "open_trace_fd", racing_open)
    r = cli("trace", "verify", trace.stem, "--block", "--json")
    assert opened, "the trace was never opened"
    doc = r.json()
    (chain,) = doc["chains"]
    assert r.code == 3 and doc["all_pass"] is False, doc
    assert chain["state"] == "broken" and chain["first_break"]["line"] == 3
    # what the events said is what the chain covered: the forged pass, on a broken chain
    assert [x["verdict"] for x in chain["receipts"]] == ["pass"]


def test_trace_verify_of_nothing_is_an_input_error(cli: Cli, project: Path) -> None:
    """Nothing to verify (a thread with no trace, a missing file) exits 2, the gates'
    usage/input code, with one line that names the PATH: never 1, which no gate's exit
    vocabulary (0/2/3/70) has, and never 0."""
    _handoff(cli, project)
    for args in (["no-such-thread"], ["no-such-thread", "gone.jsonl"], ["../x/y"]):
        r = cli("trace", "verify", *args, "--block")
        assert r.code == 2, (args, r.err)
        (line,) = r.err.splitlines()
        assert line.startswith("eidolons: nothing to verify: ") and args[0] in line, line
        assert r.out == ""
    r = cli("trace", "verify", "no-such-thread", "--json")
    assert r.code == 2 and r.out == "" and len(r.err.splitlines()) == 1


def test_trace_verify_block_and_mode_warn_contradict(cli: Cli, project: Path) -> None:
    """One rule for ``--block`` against ``--mode`` (as verify-envelope and run say it):
    asking for both block and warn is a usage error, not a silent block."""
    trace = _handoff(cli, project)
    r = cli("trace", "verify", trace.stem, "--block", "--mode", "warn")
    assert r.code == 2 and r.err == "eidolons: --block contradicts --mode warn [USAGE]\n", r.err
    assert cli("trace", "verify", trace.stem, "--block", "--mode", "block").code == 0
    for command in (["verify-envelope", "x.envelope.json", "--block"], ["run", "--verify", "x"]):
        flag = "--block" if command[0] == "verify-envelope" else "--verify-block"
        r = cli(*command, *([] if flag == "--block" else [flag]), "--mode", "warn")
        assert r.code == 2 and r.err == f"eidolons: {flag} contradicts --mode warn [USAGE]\n"
