"""``eidolons trace report``: one self-contained HTML page of a chain (hops in, text out).

No script, font, image or URL, and a ``default-src 'none'`` CSP; every field is untrusted,
so each is made printable then HTML-escaped.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from eidolons._text import plural, printable
from eidolons.trace.chain import UNKNOWN, Decision, Hop
from eidolons.trace.chain.render import refusal, svg
from eidolons.trace.chain.views import COST_NOTE

CSS = """
body { font-family: sans-serif; margin: 2em; color: #263238; background: #fff; }
h1 { font-size: 1.4em; margin-bottom: .2em; }
.sub { color: #546e7a; margin-top: 0; }
.summary span { display: inline-block; margin-right: 1.5em; }
.picture { overflow-x: auto; border: 1px solid #cfd8dc; border-radius: 6px; padding: .5em;
  margin: 1em 0; }
table { border-collapse: collapse; width: 100%; font-size: .92em; }
th, td { border-bottom: 1px solid #e0e0e0; padding: .45em .5em; text-align: left;
  vertical-align: top; }
th { background: #eceff1; }
tr.refused td { background: #fdecea; }
.decision { display: block; margin: .1em 0; }
.pass { color: #1e7d32; font-weight: bold; }
.fail { color: #c0392b; font-weight: bold; }
.warned { color: #b26a00; font-weight: bold; }
.none { color: #90a4ae; }
.reason { color: #c0392b; }
.evidence { font-family: monospace; }
code { font-size: .95em; }
.note { color: #546e7a; font-size: .9em; margin-top: 1.5em; }
"""

CSP = "default-src 'none'; style-src 'unsafe-inline'"


def _e(value: object) -> str:
    return html.escape(printable(str(value)), quote=True)


def _evidence(d: Decision, trusted: bool) -> str:
    """The evidence the line claims, beside what its receipt turned out to be."""
    claimed = f'<span class="evidence">{_e(d.evidence or "unsigned")}</span>'
    status = d.receipt_status
    if status is None:  # a receiver's line: what it says it decided on
        return f"evidence: {claimed}"
    if status == "valid":
        return f'evidence: {claimed} <span class="pass">receipt valid</span>'
    if trusted:  # a receiver of this project would not accept it
        return (
            f'evidence claimed: {claimed} <span class="fail">receipt {_e(status)}: '
            "not evidence</span>"
        )
    return f'evidence: {claimed} <span class="none">receipt {_e(status)}</span>'


def _decision(d: Decision, trusted: bool) -> str:
    when = f" <small>{d.duration_ms} ms</small>" if d.duration_ms is not None else ""
    who = f" as {_e(d.receiver)}" if d.receiver else ""
    who += f" <small>on {_e(d.host)}</small>" if d.host else ""
    if d.passed:
        return (
            f'<span class="decision"><span class="pass">pass</span>{who}{when}'
            f" — {_evidence(d, trusted)}</span>"
        )
    cls = "fail" if d.refused else "warned"
    label = "REFUSED" if d.refused else "failed (warned)"
    reason = f' <span class="reason">{_e(d.reason)}</span>' if d.reason else ""
    return (
        f'<span class="decision"><span class="{cls}">{label} {_e(d.code or d.verdict)}</span>'
        f"{who}{when}{reason}</span>"
    )


def _decisions(hop: Hop, gate: str, trusted: bool) -> str:
    found = hop.decided(gate)
    forged = "".join(
        f'<span class="decision"><span class="warned">not counted: {_e(d.verdict)}</span> '
        f'<span class="reason">{_e(d.record.get("not_counted"))}</span></span>'
        for d in hop.uncounted
        if d.gate == gate
    )
    probes = "".join(
        f'<span class="decision probe"><span class="none">probe by {_e(d.receiver)}: '
        f"{_e(d.code or d.verdict)}</span> <small>(not the addressee)</small></span>"
        for d in hop.probes
        if d.gate == gate
    )
    if not found:
        return '<span class="none">none on record</span>' + forged + probes
    return "".join(_decision(d, trusted) for d in found) + forged + probes


def render_report(
    hops: Sequence[Hop], *, thread: str, generated: str, tool: str, trusted: bool = False
) -> str:
    """The page. ``trusted``: the project has a trust store, so an orchestrator verdict
    without a valid receipt is marked as no evidence (receipts checked by the caller,
    :mod:`eidolons.trace.chain.evidence`)."""
    refused = sum(1 for h in hops if refusal(h))
    total = sum(h.tokens or 0 for h in hops)
    rows = []
    for seq, h in enumerate(hops, 1):
        cls = ' class="hop refused"' if refusal(h) else ' class="hop"'
        tokens = "—" if h.tokens is None else _e(h.tokens)
        rows.append(
            f'<tr{cls} data-message-id="{_e(h.message_id)}">'
            f"<td>{seq}</td>"
            f"<td><b>{_e(h.sender or UNKNOWN)}</b> → <b>{_e(h.recipient or UNKNOWN)}</b></td>"
            f"<td>{_e(h.performative or UNKNOWN)}</td>"
            f"<td>{_e(h.kind or UNKNOWN)}<br><code>{_e(h.path or '')}</code></td>"
            f"<td>{tokens}</td>"
            f"<td>{_decisions(h, 'orchestrator', trusted)}</td>"
            f"<td>{_decisions(h, 'receiver', trusted)}</td>"
            f"<td><code>{_e(h.message_id)}</code></td>"
            "</tr>"
        )
    title = f"ECL hand-off chain — thread {thread}"
    picture = svg(hops, title=title, standalone=False)
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{_e(title)}</title>",
            f"<style>{CSS}</style>",
            "</head>",
            "<body>",
            f'<h1>ECL hand-off chain</h1><p class="sub">thread <code>{_e(thread)}</code></p>',
            '<p class="summary">'
            f'<span id="hop-count">{plural(len(hops), "hop")}</span>'
            f'<span id="refusal-count" class="{"fail" if refused else "pass"}">'
            f"{refused} refused</span>"
            f"<span>{total} tokens (self-reported estimate)</span></p>",
            f'<div class="picture">{picture}</div>',
            '<table id="hops"><thead><tr><th>#</th><th>who → whom</th><th>performative</th>'
            "<th>artifact</th><th>tokens (est.)</th><th>orchestrator gate</th>"
            "<th>receiver gate</th><th>message id</th></tr></thead><tbody>",
            *rows,
            "</tbody></table>",
            f'<p class="note">Tokens: {_e(COST_NOTE)}. Evidence says what a pass rested on; '
            "<code>unsigned</code> means nothing an agent in the pipeline could not have "
            f"written itself. Generated {_e(generated)} by {_e(tool)}.</p>",
            "</body>",
            "</html>",
            "",
        ]
    )
