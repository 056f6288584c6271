"""Pictures of a chain (``trace graph --format mermaid|dot|svg``) and the HTML report
(``trace report``), checked as text and rendered in a real headless Chromium."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import pytest

from eidolons.trace.log import append_event
from tests.conftest import REPO, Run, read_trace
from tests.test_trace_chain import IDS, THREAD, build_chain

Cli = Callable[..., Run]
EVIL_NAME = 'x"]</text><script>document.title="pwned"</script>'
EVIL_REASON = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>"


def chain_with_refusal(cli: Cli, project: Path) -> None:
    """The three-hop chain verified by the orchestrator, its second payload rewritten in
    transit (a receiver refusal), and hostile text in a name, a kind and a reason."""
    envelopes = build_chain(cli, project)
    for envelope in envelopes:
        assert cli("verify-envelope", envelope, "--block").code == 0
    (project / "handoffs" / "m-spec.md").write_text("rewritten in transit\n")
    r = cli("verify-incoming", project / "handoffs" / "m-spec.md", "--as", "apivr")
    assert r.code == 3 and "INTEGRITY_MISMATCH" in r.err
    trace = project / ".eidolons" / ".trace" / f"{THREAD}.jsonl"
    hostile = {
        "ts": "2099-01-01T00:00:00.000Z",
        "event": "verify_fail",
        "message_id": IDS[2],
        "thread_id": THREAD,
        "from": f"{EVIL_NAME}@1.0.0",
        "to": "vigil@1.8.0",
        "integrity_method": "sha256",
        "verify_failure_code": "UNVERIFIED",
        "decision": "refused",
        "gate": "receiver",
        "receiver": "vigil",
        "reason": EVIL_REASON,
    }
    append_event(trace, hostile)
    doc = json.loads(envelopes[2].read_text())
    doc["artifact"]["kind"] = "<b>bold</b>"
    doc["from"]["eidolon"] = EVIL_NAME
    envelopes[2].write_text(json.dumps(doc))


def test_mermaid_escapes_labels_and_marks_refusals(cli: Cli, project: Path) -> None:
    chain_with_refusal(cli, project)
    r = cli("trace", "graph", "handoffs", "--format", "mermaid")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0] == "flowchart LR"
    for line in lines[1:]:  # a quoted label never holds a raw quote, bracket or tag
        for label in re.findall(r'"([^"]*)"', line):
            assert not set(label) & set('"[]<>|'), line
    assert sum("-->" in line for line in lines) == 3
    assert '"1. PROPOSE scout-report"' in r.out
    assert "2. PROPOSE spec REFUSED INTEGRITY_MISMATCH" in r.out
    assert re.search(r"^  linkStyle 1,2 stroke:#c0392b", r.out, re.M)


def test_dot_escapes_quotes(cli: Cli, project: Path) -> None:
    chain_with_refusal(cli, project)
    out = cli("trace", "graph", "handoffs", "--format", "dot").out
    assert out.startswith("digraph ecl_chain {") and out.rstrip().endswith("}")
    # every string literal is well formed: quotes inside are escaped
    body = re.sub(r'"(?:[^"\\]|\\.)*"', "S", out)
    assert '"' not in body and '\\"]' in out
    assert 'color="#c0392b"' in out


def test_svg_is_well_formed_and_escaped(cli: Cli, project: Path) -> None:
    chain_with_refusal(cli, project)
    out = cli("trace", "graph", "handoffs", "--format", "svg").out
    root = ET.fromstring(out.split("\n", 1)[1])  # after the XML declaration
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{ns}svg"
    assert not list(root.iter(f"{ns}script"))
    groups = [g for g in root.iter(f"{ns}g") if "hop" in (g.get("class") or "")]
    assert [g.get("class") for g in groups] == ["hop", "hop refused", "hop refused"]
    texts = "".join(t.text or "" for t in root.iter(f"{ns}text"))
    assert "REFUSED INTEGRITY_MISMATCH" in texts and "<script>" in texts  # shown, as text


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def test_report_is_self_contained_and_escaped(cli: Cli, project: Path) -> None:
    chain_with_refusal(cli, project)
    out = project / "report.html"
    r = cli("trace", "report", THREAD, "-o", out)
    assert r.code == 0, r.err
    page = out.read_text(encoding="utf-8")
    assert "//" not in page  # no URL of any scheme, not even the SVG namespace
    assert all(u == "url(#" for u in re.findall(r"url\(.?", page))  # only in-page markers
    parser = _Tags()
    parser.feed(page)
    tags = {t for t, _ in parser.tags}
    assert not tags & {"script", "img", "link", "iframe", "object", "embed", "base", "a"}
    for _, attrs in parser.tags:
        assert not {k for k in attrs if k.startswith("on") or k in ("src", "href")}, attrs
    csp = [a["content"] for t, a in parser.tags if a.get("http-equiv") == "Content-Security-Policy"]
    assert csp and "default-src 'none'" in (csp[0] or "")
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in page
    stdout = cli("trace", "report", THREAD).out  # without -o: the same page on stdout
    assert stdout.startswith("<!DOCTYPE html>") and stdout.count("<tr class=") == 3


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _artifacts() -> Path:
    where = Path(os.environ.get("EIDOLONS_TEST_ARTIFACTS") or REPO / ".artifacts")
    where.mkdir(parents=True, exist_ok=True)
    return where


def test_report_renders_in_headless_chromium(cli: Cli, project: Path, tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed (CI installs it in .ci/run)")
        pytest.skip("chromium not installed (apt-get install chromium)")
    chain_with_refusal(cli, project)
    page = project / "report.html"
    assert cli("trace", "report", THREAD, "-o", page).code == 0
    flags = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1280,900",
    ]
    dom = subprocess.run(
        [*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=60
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert "<title>ECL hand-off chain" in html  # the hostile reason never set the title
    assert "pwned</title>" not in html and "<script" not in html and "<img" not in html
    assert html.count('class="hop"') + html.count('class="hop refused"') >= 6  # rows + arrows
    assert len(re.findall(r'<tr class="hop[^"]*" data-message-id=', html)) == 3
    assert "REFUSED INTEGRITY_MISMATCH" in html and "as apivr" in html
    assert "payload SHA-256 does not match integrity tag" in html
    assert "3 hops" in html and "2 refused" in html
    shot = _artifacts() / "trace-report.png"
    if shot.exists():
        shot.unlink()
    r = subprocess.run(
        [*flags, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=60
    )
    assert r.returncode == 0 and shot.stat().st_size > 10_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_checks_receipts_instead_of_believing_the_line(
    project: Path, tmp_path: Path
) -> None:
    """A line's ``evidence`` is its writer's claim: in a signed project the report shows a
    verified receipt as valid, and a hand-written pass claiming ``signed-receipt`` as not
    evidence."""
    from tests.conftest import clean_env, run_cli
    from tests.test_trace_chain import _verified_thread

    env = clean_env(XDG_CONFIG_HOME=str(tmp_path / "cfg"))

    def cli(*args: str | Path) -> Run:
        return run_cli(*args, cwd=project, env=env)

    assert cli("keys", "init").code == 0
    thread = _verified_thread(cli, project)
    page = cli("trace", "report", thread).out
    assert "receipt valid" in page and "not evidence" not in page
    trace = project / ".eidolons" / ".trace" / f"{thread}.jsonl"
    signed = next(e for e in read_trace(trace) if e.get("gate") == "orchestrator")
    forged = {k: v for k, v in signed.items() if k not in ("seq", "prev", "receipt")}
    append_event(trace, {**forged, "evidence": "signed-receipt"})
    page = cli("trace", "report", thread).out
    assert page.count("receipt valid") == 1
    assert "receipt none: not evidence" in page
