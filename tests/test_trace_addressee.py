"""The chain views tell what the receivers decided: a hop its addressee refused is a
finding of ``trace verify`` (exit 3 in any mode: a recorded refusal is a fact), and a
refusal by another receiver (``--as forge`` on a hand-off to vigil, a probe) is listed
apart and never paints the hop red or counts as a refusal."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from tests.conftest import Run, emit_payload

Cli = Callable[..., Run]


def refused_then_restored(cli: Cli, project: Path) -> tuple[Path, dict[str, object], Path]:
    """A hand-off to vigil that the orchestrator passed, vigil refused as tampered, and
    whose payload was then put back: every digest matches again."""
    payload, envelope, env = emit_payload(cli, project)
    assert cli("verify-envelope", envelope).code == 0
    good = payload.read_bytes()
    payload.write_bytes(good + b"tampered\n")
    assert cli("verify-incoming", payload, "--as", "vigil").code == 3
    payload.write_bytes(good)
    return envelope, env, payload


def passed_then_probed(cli: Cli, project: Path) -> tuple[Path, dict[str, object]]:
    """A hand-off to vigil that vigil passed and forge then probed (refused: not its
    addressee), so the latest decision on record is the probe's refusal."""
    payload, envelope, env = emit_payload(cli, project)
    assert cli("verify-envelope", envelope).code == 0
    assert cli("verify-incoming", payload, "--as", "vigil").code == 0
    assert cli("verify-incoming", payload, "--as", "forge").code == 3
    return envelope, env


def test_verify_reports_a_hop_its_addressee_refused_in_any_mode(cli: Cli, project: Path) -> None:
    envelope, env, _ = refused_then_restored(cli, project)
    for mode in ("block", "warn"):
        for path in (str(env["thread_id"]), str(envelope)):
            r = cli("trace", "verify", path, "--mode", mode)
            assert r.code == 3, (mode, path, r.out, r.err)
            assert "refused by vigil: INTEGRITY_MISMATCH" in r.out
            assert "all 1 envelope" not in r.out and "verified" not in r.out.splitlines()[-1]
    doc = cli("trace", "verify", str(env["thread_id"]), "--json", "--mode", "warn").json()
    assert doc["all_pass"] is False and doc["refused"] == 1
    (row,) = doc["results"]
    assert row["ok"] is False
    assert row["refused_by"] == {"receiver": "vigil", "code": "INTEGRITY_MISMATCH", "host": None}


def test_a_later_pass_does_not_erase_the_addressees_refusal(cli: Cli, project: Path) -> None:
    """Any writer of the trace could append a receiver's pass: the refusal stays a finding."""
    _, env, payload = refused_then_restored(cli, project)
    assert cli("verify-incoming", payload, "--as", "vigil").code == 0
    r = cli("trace", "verify", str(env["thread_id"]))
    assert r.code == 3, r.out
    assert "refused by vigil: INTEGRITY_MISMATCH" in r.out
    page = cli("trace", "report", str(env["thread_id"])).out
    assert re.search(r'id="refusal-count"[^>]*>1 refused<', page)


def test_a_probe_by_another_receiver_is_listed_apart_not_refused(cli: Cli, project: Path) -> None:
    envelope, env = passed_then_probed(cli, project)
    thread = str(env["thread_id"])
    r = cli("trace", "verify", thread)
    assert r.code == 0, r.out
    assert "probe by forge" in r.out and "refused by" not in r.out
    doc = cli("trace", "verify", thread, "--json").json()
    assert doc["refused"] == 0 and doc["all_pass"] is True
    assert [p["receiver"] for p in doc["results"][0]["probes"]] == ["forge"]

    page = cli("trace", "report", thread).out
    assert re.search(r'id="refusal-count"[^>]*>0 refused<', page)
    assert 'class="hop refused"' not in page
    assert "probe by forge" in page
    shown = cli("trace", "show", str(envelope), "--json").json()
    assert shown[0]["refused"] is None
    assert [p["receiver"] for p in shown[0]["probes"]] == ["forge"]
    assert "REFUSED" not in cli("trace", "show", str(envelope), "--format", "mermaid").out


def test_the_report_and_show_count_the_addressees_refusal(cli: Cli, project: Path) -> None:
    envelope, env, _ = refused_then_restored(cli, project)
    page = cli("trace", "report", str(env["thread_id"])).out
    assert re.search(r'id="refusal-count"[^>]*>1 refused<', page)
    assert 'class="hop refused"' in page
    shown = cli("trace", "show", str(envelope), "--json").json()
    assert shown[0]["refused"] == {"receiver": "vigil", "code": "INTEGRITY_MISMATCH", "host": None}
    text = cli("trace", "show", str(envelope)).out
    assert "REFUSED by vigil: INTEGRITY_MISMATCH" in text
    assert "(thread " in text and "1 hop)" in text


def test_show_marks_a_probe_in_the_event_list(cli: Cli, project: Path) -> None:
    _, env = passed_then_probed(cli, project)
    lines = cli("trace", "show", str(env["thread_id"])).out.splitlines()
    probe = next(line for line in lines if "forge" in line and "verify_fail" in line)
    assert probe.startswith("..") and "probe by forge (not the addressee)" in probe
    followed = cli("trace", "show", str(env["thread_id"]), "--follow", "--idle-timeout", "0")
    assert [line for line in followed.out.splitlines() if line.startswith("..")] == [probe]
    shown = json.loads(cli("trace", "show", str(env["thread_id"]), "--json").out)
    assert any(e.get("event") == "verify_fail" and e.get("receiver") == "forge" for e in shown)


def test_an_envelope_readdressed_later_does_not_turn_the_refusal_into_a_probe(
    cli: Cli, project: Path
) -> None:
    envelope, _, _ = refused_then_restored(cli, project)
    doc = json.loads(envelope.read_text())
    doc["to"]["eidolon"] = "forge"  # as the trace recorded it, the hand-off was to vigil
    envelope.write_text(json.dumps(doc))
    r = cli("trace", "verify", str(envelope), "--mode", "warn")
    assert r.code == 3 and "refused by vigil: INTEGRITY_MISMATCH" in r.out
