"""Pictures of a chain: Mermaid and Graphviz DOT source, and a swim-lane SVG drawn here.

Every label is untrusted, so each format escapes it for its own syntax after control
characters are made printable. One edge per hop, a refused hop drawn red with its code.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence

from eidolons._text import printable
from eidolons.trace.chain import UNKNOWN, Hop

_MERMAID_PLAIN = re.compile(r"[A-Za-z0-9 ._@/:,()+?-]")
REFUSED = "#c0392b"
NEUTRAL = "#37474f"
MAX_LABEL = 48


def _short(text: str, limit: int = MAX_LABEL) -> str:
    text = printable(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def agents(hops: Sequence[Hop]) -> list[str]:
    """Agent names in order of first appearance (sender before receiver)."""
    seen: dict[str, None] = {}
    for h in hops:
        seen.setdefault(h.sender or UNKNOWN, None)
        seen.setdefault(h.recipient or UNKNOWN, None)
    return list(seen)


def refusal(hop: Hop) -> str | None:
    """The code of the refusal that stands for the hop (:meth:`Hop.refusal`: probes by
    other receivers aside)."""
    last = hop.refusal()
    return None if last is None else (last.code or "REFUSED")


def edge_label(seq: int, hop: Hop) -> str:
    label = f"{seq}. {hop.performative or UNKNOWN} {hop.kind or UNKNOWN}"
    code = refusal(hop)
    return f"{label} REFUSED {code}" if code else label


def _mermaid_text(text: str) -> str:
    return "".join(c if _MERMAID_PLAIN.match(c) else f"#{ord(c)};" for c in _short(text))


def mermaid(hops: Sequence[Hop]) -> str:
    names = agents(hops)
    ids = {name: f"a{i}" for i, name in enumerate(names)}
    lines = ["flowchart LR"]
    lines += [f'  {ids[n]}["{_mermaid_text(n)}"]' for n in names]
    red = []
    for i, h in enumerate(hops):
        a, b = ids[h.sender or UNKNOWN], ids[h.recipient or UNKNOWN]
        lines.append(f'  {a} -->|"{_mermaid_text(edge_label(i + 1, h))}"| {b}')
        if refusal(h):
            red.append(str(i))
    if red:
        lines.append(f"  linkStyle {','.join(red)} stroke:{REFUSED},color:{REFUSED}")
    return "\n".join(lines) + "\n"


def _dot_text(text: str) -> str:
    return '"' + _short(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def dot(hops: Sequence[Hop]) -> str:
    lines = ["digraph ecl_chain {", "  rankdir=LR;", '  node [shape=box, style="rounded"];']
    lines += [f"  {_dot_text(n)};" for n in agents(hops)]
    for i, h in enumerate(hops):
        colour = f', color="{REFUSED}", fontcolor="{REFUSED}"' if refusal(h) else ""
        lines.append(
            f"  {_dot_text(h.sender or UNKNOWN)} -> {_dot_text(h.recipient or UNKNOWN)}"
            f" [label={_dot_text(edge_label(i + 1, h))}{colour}];"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


def _x(text: str) -> str:
    return html.escape(_short(text), quote=True)


LANE_W, ROW_H, TOP, SIDE = 190, 46, 58, 30
SVG_NS = ' xmlns="http://www.w3.org/2000/svg"'


def svg(hops: Sequence[Hop], *, title: str | None = None, standalone: bool = True) -> str:
    """The swim-lane picture as an ``<svg>`` element: a standalone document (with the SVG
    namespace) or, with ``standalone=False``, for inlining in HTML (no namespace URL)."""
    names = agents(hops)
    col = {name: SIDE + LANE_W // 2 + i * LANE_W for i, name in enumerate(names)}
    width = max(2 * SIDE + LANE_W * len(names), 420)
    height = TOP + ROW_H * (len(hops) + 1)
    out = [
        f'<svg{SVG_NS if standalone else ""} width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" class="ecl-chain" '
        'font-family="sans-serif" font-size="12">',
        f"<title>{_x(title or 'ECL hand-off chain')}</title>",
        "<defs>",
    ]
    for name, colour in (("ok", NEUTRAL), ("refused", REFUSED)):
        out.append(
            f'<marker id="arrow-{name}" viewBox="0 0 10 10" refX="10" refY="5" '
            'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
            f'<path d="M0,0 L10,5 L0,10 z" fill="{colour}"/></marker>'
        )
    out.append("</defs>")
    for name in names:
        x = col[name]
        out.append(
            f'<line x1="{x}" y1="{TOP - 8}" x2="{x}" y2="{height - 10}" stroke="#b0bec5" '
            'stroke-dasharray="4 4"/>'
        )
        out.append(
            f'<rect x="{x - LANE_W // 2 + 10}" y="10" width="{LANE_W - 20}" height="30" rx="8" '
            'fill="#eceff1" stroke="#546e7a"/>'
        )
        out.append(
            f'<text x="{x}" y="30" text-anchor="middle" font-weight="bold" class="agent">'
            f"{_x(_short(name, 24))}</text>"
        )
    for i, h in enumerate(hops):
        y = TOP + ROW_H * (i + 1) - 10
        a, b = col[h.sender or UNKNOWN], col[h.recipient or UNKNOWN]
        code = refusal(h)
        colour, marker = (REFUSED, "refused") if code else (NEUTRAL, "ok")
        cls = "hop refused" if code else "hop"
        out.append(f'<g class="{cls}" data-seq="{i + 1}">')
        if a == b:  # a hand-off to oneself: a small loop
            out.append(
                f'<path d="M{a},{y - 6} h30 v14 h-28" fill="none" stroke="{colour}" '
                f'stroke-width="1.6" marker-end="url(#arrow-{marker})"/>'
            )
        else:
            end = b - 6 if b > a else b + 6
            dash = ' stroke-dasharray="6 3"' if code else ""
            out.append(
                f'<line x1="{a}" y1="{y}" x2="{end}" y2="{y}" stroke="{colour}" '
                f'stroke-width="1.6" marker-end="url(#arrow-{marker})"{dash}/>'
            )
        mid = (a + b) // 2 if a != b else a + 40
        tokens = "" if h.tokens is None else f" · {h.tokens} tok"
        label = f"{i + 1}. {h.performative or UNKNOWN} · {h.kind or UNKNOWN}{tokens}"
        out.append(
            f'<text x="{mid}" y="{y - 6}" text-anchor="{"middle" if a != b else "start"}" '
            f'fill="{colour}">{_x(label)}</text>'
        )
        if code:
            out.append(
                f'<text x="{mid}" y="{y + 14}" text-anchor="middle" fill="{REFUSED}" '
                f'font-weight="bold">✗ REFUSED {_x(code)}</text>'
            )
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


RENDERERS: dict[str, Callable[[Sequence[Hop]], str]] = {
    "mermaid": mermaid,
    "dot": dot,
    "svg": lambda hops: '<?xml version="1.0" encoding="UTF-8"?>\n' + svg(hops),
}
