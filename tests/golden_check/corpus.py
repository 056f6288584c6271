"""The golden corpus of ``eidolons check``: a deterministic tree of valid and broken
envelopes, the runs of ``check`` made on it, and the recorder of their output.

The point: the checker is made faster, and its findings must stay
identical byte for byte for every input. ``expected.json.xz`` beside this file holds the
output (stdout and stderr as bytes, exit code) of every run in :data:`RUNS`, recorded with
the checker as it was **before** any speed work; ``tests/test_check_golden.py`` builds the
same corpus and compares. Re-record only for a deliberate change of output, and say so in
the commit:

    python -m tests.golden_check.corpus --record

What the corpus holds (:func:`build`):

- ``fixtures/``: a copy of the twelve upstream conformance fixtures and their contract;
- ``corpus/<group>/``: one directory per family of cases, each case a payload and an
  envelope derived from one valid 2.1 hand-off by one change: every envelope version
  (valid, variants, invalid, non-string), every performative, agent slugs, artifact paths
  (absent, empty, absolute, ``..``, non-string, unsafe, each resolution rule, symlinks in
  and out of the boundary, dangling links, directories, FIFOs), payloads present, absent,
  mismatched, over the size cap, integrity methods and values, HMAC (right key, wrong key,
  no key), trust levels with and without ise, every ise shape, context deltas and token
  counts of every type, edge origins, trace tiers, E-1 parse failures (duplicate keys,
  NaN, BOM, invalid UTF-8, lone surrogates, depth, size), contracts with and without a
  budget or sections, R-1 Markdown (setext, code, HTML, quotes, lists, front matter, line
  separators, CRLF, nesting), control characters and non-UTF-8 bytes in names and
  reasons;
- ``corpus/mixed/``: 240 envelopes combining several of those changes at once (seeded);
- ``outside/``: envelopes outside the project root (their own directory is the boundary).

Paths in the recorded output are the corpus root replaced by ``<ROOT>``.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import io
import json
import lzma
import os
import random
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
EXPECTED = HERE / "expected.json.xz"
KEY = "golden-corpus-key-0123456789abcdef"  # 34 bytes: no short-key warning
WRONG_KEY = "not-the-golden-corpus-key-0123456789"
FIXTURE_KEY = "ecl-test-key-2.1"
ROOT_TOKEN = "<ROOT>"

DROP: Any = object()

SECTIONS_MD = (
    "---\neidolon: atlas\nkind: scout-report\n---\n\n# Scout report\n\n"
    "## Decision target\nWhich writes race?\n\n## Findings\n- FINDING-001 `a.sh:42`\n\n"
    "## Gaps\n- none\n\n## Scope\nBounded.\n"
)

#: R-1 payloads: name -> Markdown text (or bytes)
MARKDOWN: dict[str, str | bytes] = {
    "atx": SECTIONS_MD,
    "setext": (
        "Decision target\n===============\n\nFindings\n--------\n\nGaps\n====\n\nScope\n-----\n"
    ),
    "missing-two": "# R\n\n## Decision target\n\n## Findings\n",
    "none": "no headings at all\n",
    "empty": "",
    "fenced": "## Decision target\n## Findings\n## Scope\n```\n## Gaps\n```\n",
    "tilde-fence": "## Decision target\n## Findings\n## Scope\n~~~md\n## Gaps\n~~~\n",
    "indented": "## Decision target\n## Findings\n## Scope\n\n    ## Gaps\n",
    "html": "## Decision target\n## Findings\n## Scope\n<div>\n## Gaps\n</div>\n",
    "comment": "## Decision target\n## Findings\n## Scope\n<!--\n## Gaps\n-->\n",
    "quote": "## Decision target\n## Findings\n## Scope\n> ## Gaps\n",
    "list": "## Decision target\n## Findings\n## Scope\n- ## Gaps\n",
    "ordered": "## Decision target\n## Findings\n## Scope\n1. ## Gaps\n",
    "u2028": "## Decision target\n## Findings\n## Scope\nintro\u2028## Gaps\n",
    "fs": "## Decision target\n## Findings\n## Scope\nintro\x1c## Gaps\n",
    "nel": "## Decision target\n## Findings\n## Scope\nintro\x85## Gaps\n",
    "front-matter-only": "---\n# Decision target\n# Findings\n# Gaps\n# Scope\n---\nbody\n",
    "front-matter-unclosed": "---\n# Decision target\n# Findings\n# Gaps\n# Scope\n",
    "front-matter-dots": "---\ntitle: x\n...\n# Decision target\n# Findings\n# Gaps\n# Scope\n",
    "front-matter-setext": "---\nGaps\n---\n# Decision target\n# Findings\n# Scope\n",
    "crlf": "# Decision target\r\n# Findings\r\n# Gaps\r\n# Scope\r\n",
    "cr": "# Decision target\r# Findings\r# Gaps\r# Scope\r",
    "variants": "# decision-target\n# FINDINGS\n#   Gaps   \n# scope #\n",
    "bold": "# Decision target\n# Findings\n# **Gaps**\n# Scope\n",
    "closing-hashes": "## Decision target ##\n## Findings ###\n## Gaps #\n## Scope\t#\n",
    "no-space": "#Decision target\n#Findings\n#Gaps\n#Scope\n",
    "seven-hashes": "####### Decision target\n# Findings\n# Gaps\n# Scope\n",
    "indent-3": "   # Decision target\n   # Findings\n   # Gaps\n   # Scope\n",
    "tabs": "#\tDecision\ttarget\n#\tFindings\n#\tGaps\n#\tScope\n",
    "reference-setext": "[foo]: /url\n===\n# Decision target\n# Findings\n# Gaps\n# Scope\n",
    "lazy": "> quote\nDecision target\n===\n# Findings\n# Gaps\n# Scope\n",
    "paragraph-setext": "a\nb\n---\n# Decision target\n# Findings\n# Gaps\n# Scope\n",
    "nested-quotes": ">" * 30 + " # Gaps\n# Decision target\n# Findings\n# Scope\n",
    "nested-lists": "".join("  " * i + "- x\n" for i in range(30))
    + "# Decision target\n# Findings\n# Gaps\n# Scope\n",
    "nul": "# Decision\x00target\n# Findings\n# Gaps\n# Scope\n",
    "unicode": "# Décision target\n# Findings\n# Gaps\n# Scope ✓\n",
    "escaped": "\\# Decision target\n# Findings\n# Gaps\n# Scope\n",
    "invalid-utf8": b"# Decision target\n# Findings\xff\xfe\n# Gaps\n# Scope\n",
    "bom": "\ufeff# Decision target\n# Findings\n# Gaps\n# Scope\n",
    "thematic": "# Decision target\n***\n# Findings\n- - -\n# Gaps\n___\n# Scope\n",
    "html-inline": "# Decision target\n# Findings\n<span>\n# Gaps\n</span>\n# Scope\n",
    "html-type7": "<custom-tag>\n# Gaps\n\n# Decision target\n# Findings\n# Scope\n",
    "long": SECTIONS_MD + "".join(f"\n## Extra {i}\n- item {i}\n" for i in range(60)),
}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _mac(key: str, data: bytes) -> str:
    return hmac.new(key.encode(), data, hashlib.sha256).hexdigest()


def base_envelope(payload: bytes, path: str, n: int) -> dict[str, Any]:
    """A valid 2.1 atlas -> spectra PROPOSE scout-report hand-off for ``payload``."""
    digest = _sha(payload)
    mid = f"01942d10-{n // 65536:04x}-7e04-9c5d-{n:012x}"
    return {
        "envelope_version": "2.1",
        "message_id": mid,
        "thread_id": mid,
        "parent_id": None,
        "from": {"eidolon": "atlas", "version": "1.5.1"},
        "to": {"eidolon": "spectra", "version": "4.3.1"},
        "performative": "PROPOSE",
        "edge_origin": "roster",
        "objective": f"Golden case {n}.",
        "artifact": {
            "kind": "scout-report",
            "schema_version": "2.0",
            "path": path,
            "sha256": digest,
            "size_bytes": len(payload),
        },
        "context_delta": {
            "token_budget": 4000,
            "tokens_used": 120,
            "input_handles": ["mission.md"],
            "summary": "Three race sites found.",
        },
        "constraints": {"trust_level": "standard"},
        "confidence": 0.9,
        "integrity": {"method": "sha256", "value": digest},
        "trace": {
            "ts": "2026-07-02T10:00:00Z",
            "host": "raw",
            "model": "golden",
            "tier": "standard",
        },
    }


def edit(doc: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of ``doc`` with ``changes``: ``a.b`` sets a nested field (parents made
    objects when absent; a non-object parent is replaced), :data:`DROP` removes."""
    out = copy.deepcopy(doc)
    for dotted, value in changes.items():
        node = out
        *parents, last = dotted.split(".")
        for key in parents:
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node = node[key]
        if value is DROP:
            node.pop(last, None)
        else:
            node[last] = copy.deepcopy(value)
    return out


HIGH_ISE = {
    "assertion_grade": "validated",
    "receiver_authorization": {"auto_route": True, "auto_merge": False, "auto_deploy": False},
    "verification": {"fresh_context": True, "checker": "vigil", "transcript_access": "none"},
}

#: group -> case name -> changes to the base envelope
GROUPS: dict[str, dict[str, dict[str, Any]]] = {
    "valid": {
        "base": {},
        "v20": {"envelope_version": "2.0"},
        "v21-patch": {"envelope_version": "2.1.3"},
        "inform": {"performative": "INFORM"},
        "refuse": {"performative": "REFUSE"},
        "parent": {"parent_id": "01942d10-0000-7e04-9c5d-000000000001"},
        "null-constraints": {"constraints": None},
        "no-constraints": {"constraints": DROP},
        "integral-float-tokens": {"context_delta.tokens_used": 120.0},
        "ise-21": {"ise": HIGH_ISE},
    },
    "warn": {
        "no-edge-origin": {"edge_origin": DROP},
        "empty-edge-origin": {"edge_origin": ""},
        "edge-origin-mismatch": {"edge_origin": "implicit"},
        "size-mismatch": {"artifact.size_bytes": 1},
        "size-string": {"artifact.size_bytes": "370"},
        "size-missing": {"artifact.size_bytes": DROP},
        "no-context-delta": {"context_delta": DROP},
        "null-context-delta": {"context_delta": None},
        "long-summary": {"context_delta.summary": "word " * 170},
        "long-unicode-summary": {"context_delta.summary": "é" * 401},
        "v20-high-sha256": {"envelope_version": "2.0", "constraints.trust_level": "high"},
        "v20-high-sha256-ise": {
            "envelope_version": "2.0",
            "constraints.trust_level": "high",
            "ise": HIGH_ISE,
        },
        "hmac": {"integrity.method": "hmac-sha256", "@mac": KEY},
        "hmac-wrong-key": {"integrity.method": "hmac-sha256", "@mac": WRONG_KEY},
        "hmac-high-21": {
            "integrity.method": "hmac-sha256",
            "@mac": KEY,
            "constraints.trust_level": "high",
            "ise": HIGH_ISE,
        },
    },
    "versions": {
        **{
            f"v-{v}": {"envelope_version": v}
            for v in ("1.0", "1.1", "1.2", "2.0", "2.1", "1.0.5", "2.0.7", "2.1.0", "1.2.3")
        },
        **{
            f"bad-{i}": {"envelope_version": v}
            for i, v in enumerate(
                ["2.2", "3.0", "2.1.x", "1.0.", "", "2", "1.3", " 2.1", "2.1\n", "02.1"]
            )
        },
        "number": {"envelope_version": 2.1},
        "int": {"envelope_version": 2},
        "null": {"envelope_version": None},
        "bool": {"envelope_version": True},
        "list": {"envelope_version": ["2.1"]},
        "absent": {"envelope_version": DROP},
        "v1-high": {"envelope_version": "1.1", "constraints.trust_level": "high"},
        "v1-high-ise": {"envelope_version": "1.2", "constraints.trust_level": "high", "ise": {}},
        "v1-ise-verification": {
            "envelope_version": "1.0",
            "ise": {"assertion_grade": "validated", "verification": {"checker": "BAD"}},
        },
    },
    "fields": {
        **{
            f"drop-{f}": {f: DROP}
            for f in (
                "message_id",
                "thread_id",
                "parent_id",
                "from",
                "to",
                "performative",
                "objective",
                "artifact",
                "integrity",
                "trace",
                "envelope_version",
            )
        },
        **{f"null-{f}": {f: None} for f in ("message_id", "objective", "parent_id", "trace")},
        "drop-many": {"message_id": DROP, "objective": DROP, "trace": DROP},
        **{
            f"perf-{p}": {"performative": p}
            for p in (
                "DELEGATE",
                "REQUEST",
                "DECIDE",
                "ESCALATE",
                "CRITIQUE",
                "ACKNOWLEDGE",
                "RESUME",
                "propose",
                "BOGUS",
                "",
            )
        },
        "perf-number": {"performative": 7},
        "perf-list": {"performative": ["PROPOSE"]},
        "perf-newline": {"performative": "PROPOSE\n[OK]   E-4 MUST forged"},
        "from-upper": {"from.eidolon": "Atlas"},
        "from-digit": {"from.eidolon": "1atlas"},
        "from-newline": {"from.eidolon": "atlas\nvigil"},
        "from-number": {"from.eidolon": 5},
        "from-string": {"from": "atlas"},
        "to-missing": {"to.eidolon": DROP},
        "to-dash": {"to.eidolon": "spec-tra"},
        "to-unknown": {"to.eidolon": "nobody"},
        "tier-trance": {"trace.tier": "trance"},
        "tier-bad": {"trace.tier": "deep"},
        "tier-missing": {"trace.tier": DROP},
        "tier-number": {"trace.tier": 1},
        "trace-string": {"trace": "standard"},
        "edge-origin-number": {"edge_origin": 3},
        "edge-origin-false": {"edge_origin": False},
        "escape-in-origin": {"edge_origin": "roster\x1b[2K"},
    },
    "paths": {
        "absent": {"artifact.path": DROP},
        "empty": {"artifact.path": ""},
        "absolute": {"artifact.path": "/etc/passwd"},
        "dotdot": {"artifact.path": "../outside/secret.md"},
        "dotdot-inner": {"artifact.path": "a/../p-dotdot-inner.md"},
        "dots-in-name": {"artifact.path": "x..y.md"},
        "number": {"artifact.path": 42},
        "list": {"artifact.path": ["p.md"]},
        "false": {"artifact.path": False},
        "backslash": {"artifact.path": "sub\\p.md"},
        "nul": {"artifact.path": "p\x00.md"},
        "missing-file": {"artifact.path": "nowhere.md"},
        "basename-rule": {"artifact.path": "no/such/dir/p-basename-rule.md"},
        "root-rule": {"artifact.path": "rootdocs/shared.md", "@payload": "root"},
        "name-rule": {"artifact.path": "elsewhere.md", "@payload": "name"},
        "subdir": {"artifact.path": "sub/p-subdir.md", "@payload": "subdir"},
        "link-inside": {"artifact.path": "link-inside.md", "@payload": "link-inside"},
        "link-outside": {"artifact.path": "link-outside.md", "@payload": "link-outside"},
        "link-dangling": {"artifact.path": "link-dangling.md", "@payload": "link-dangling"},
        "link-loop": {"artifact.path": "link-loop.md", "@payload": "link-loop"},
        "dir": {"artifact.path": "adir.md", "@payload": "dir"},
        "fifo": {"artifact.path": "fifo.md", "@payload": "fifo"},
        "mismatch": {"integrity.value": "0" * 64},
        "txt": {"artifact.path": "p-txt.txt", "@payload": "txt"},
        "upper-md": {"artifact.path": "p-upper-md.MD", "@payload": "upper"},
        "markdown-suffix": {"artifact.path": "p-markdown-suffix.markdown", "@payload": "markdown"},
        "big": {"@payload": "big"},
    },
    "integrity": {
        "method-md5": {"integrity.method": "md5"},
        "method-missing": {"integrity.method": DROP},
        "method-number": {"integrity.method": 256},
        "method-upper": {"integrity.method": "SHA256"},
        "value-upper": {"@upper": True},
        "value-short": {"integrity.value": "abc"},
        "value-missing": {"integrity.value": DROP},
        "value-number": {"integrity.value": 12345},
        "value-null": {"integrity.value": None},
        "integrity-string": {"integrity": "sha256"},
        "hmac-no-mac": {"integrity.method": "hmac-sha256"},
        "high-21-sha256": {"constraints.trust_level": "high", "ise": HIGH_ISE},
        "high-21-no-ise": {"constraints.trust_level": "high"},
        "high-21-hmac-no-ise": {
            "constraints.trust_level": "high",
            "integrity.method": "hmac-sha256",
            "@mac": KEY,
        },
        "high-20-md5": {
            "envelope_version": "2.0",
            "constraints.trust_level": "high",
            "integrity.method": "md5",
        },
        "trust-low": {"constraints.trust_level": "low"},
        "trust-number": {"constraints.trust_level": 3},
        "trust-false": {"constraints.trust_level": False},
        "trust-HIGH": {"constraints.trust_level": "HIGH"},
        "high-on-apivr-vigil": {
            "to.eidolon": "vigil",
            "from.eidolon": "apivr",
            "artifact.kind": "change-summary",
        },
    },
    "ise": {
        "ise-null": {"ise": None},
        "ise-false": {"ise": False},
        "ise-true": {"ise": True},
        "ise-string": {"ise": "yes"},
        "ise-list": {"ise": ["validated"]},
        "ise-zero": {"ise": 0},
        "ise-empty": {"ise": {}},
        **{
            f"grade-{i}": {"ise": {"assertion_grade": g}}
            for i, g in enumerate(
                [
                    "unverified",
                    "self-attested",
                    "validated",
                    "human-reviewed",
                    "Validated",
                    "bogus",
                    "",
                    5,
                    None,
                    ["validated"],
                    True,
                ]
            )
        },
        "authz-null": {"ise": {"assertion_grade": "validated", "receiver_authorization": None}},
        "authz-string": {"ise": {"assertion_grade": "validated", "receiver_authorization": "x"}},
        "authz-list": {"ise": {"assertion_grade": "validated", "receiver_authorization": [1]}},
        "authz-true": {"ise": {"assertion_grade": "validated", "receiver_authorization": True}},
        "authz-strings": {
            "ise": {
                "assertion_grade": "validated",
                "receiver_authorization": {
                    "auto_route": "true",
                    "auto_merge": "false",
                    "auto_deploy": "null",
                },
            }
        },
        "authz-mixed": {
            "ise": {
                "assertion_grade": "validated",
                "receiver_authorization": {"auto_route": 1, "auto_merge": None, "auto_deploy": [0]},
            }
        },
        "authz-objects": {
            "ise": {
                "assertion_grade": "validated",
                "receiver_authorization": {"auto_route": {"a": 1}, "auto_merge": 0.5},
            }
        },
        **{
            f"verif-{name}": {"ise": {"assertion_grade": "validated", "verification": v}}
            for name, v in {
                "ok": {"fresh_context": False, "checker": "vigil", "transcript_access": "none"},
                "empty": {},
                "null": None,
                "false": False,
                "string": "full",
                "list": [1],
                "fresh-string": {
                    "fresh_context": "true",
                    "checker": "vigil",
                    "transcript_access": "none",
                },
                "fresh-number": {"fresh_context": 1, "checker": "a", "transcript_access": "none"},
                "checker-bad": {
                    "fresh_context": True,
                    "checker": "Vigil!",
                    "transcript_access": "none",
                },
                "checker-number": {
                    "fresh_context": True,
                    "checker": 7,
                    "transcript_access": "none",
                },
                "access-full": {
                    "fresh_context": True,
                    "checker": "vigil",
                    "transcript_access": "full",
                },
                "access-number": {
                    "fresh_context": True,
                    "checker": "vigil",
                    "transcript_access": 0,
                },
                "all-bad": {"fresh_context": [], "checker": "", "transcript_access": ""},
                "only-checker": {"checker": "x"},
            }.items()
        },
        "v20-ise-bad-verif": {
            "envelope_version": "2.0",
            "ise": {"assertion_grade": "validated", "verification": {"checker": "BAD"}},
        },
        "ise-high-grade-missing": {"constraints.trust_level": "high", "ise": {"x": 1}},
    },
    "context": {
        "over-budget": {"context_delta.tokens_used": 5000, "context_delta.token_budget": 200},
        "over-contract": {"context_delta.tokens_used": 4500, "context_delta.token_budget": 9000},
        "at-budget": {"context_delta.tokens_used": 4000},
        "negative": {"context_delta.tokens_used": -1},
        "float": {"context_delta.tokens_used": 1.5},
        "string": {"context_delta.tokens_used": "12"},
        "bool": {"context_delta.tokens_used": True},
        "false": {"context_delta.tokens_used": False},
        "null": {"context_delta.tokens_used": None},
        "missing-used": {"context_delta.tokens_used": DROP},
        "missing-budget": {"context_delta.token_budget": DROP},
        "budget-string": {"context_delta.token_budget": "4000"},
        "budget-negative": {"context_delta.token_budget": -5},
        "budget-float": {"context_delta.token_budget": 4000.0},
        "huge": {"context_delta.tokens_used": 10**30, "context_delta.token_budget": 10**31},
        "big-float": {"context_delta.tokens_used": 1e300},
        "delta-list": {"context_delta": [1, 2]},
        "delta-string": {"context_delta": "none"},
        "delta-zero": {"context_delta": 0},
        "delta-empty": {"context_delta": {}},
        "summary-number": {"context_delta.summary": 12345},
        "summary-object": {"context_delta.summary": {"a": "b" * 900}},
        "summary-surrogate": {"context_delta.summary": "\ud800" * 10},
        "summary-200": {"context_delta.summary": "x" * 799},
        "summary-201": {"context_delta.summary": "x" * 800},
    },
    "contracts": {
        "no-contract": {"to.eidolon": "ramza"},
        "perf-not-on-edge": {"performative": "DELEGATE"},
        "kind-not-on-edge": {"artifact.kind": "spec"},
        "kind-number": {"artifact.kind": 1},
        "kind-missing": {"artifact.kind": DROP},
        "atlas-vigil": {"to.eidolon": "vigil", "edge_origin": "implicit"},
        "project-edge": {
            "from.eidolon": "probe",
            "to.eidolon": "sink",
            "artifact.kind": "probe-report",
            "context_delta.tokens_used": 999999,
        },
        "project-edge-sections": {
            "from.eidolon": "probe",
            "to.eidolon": "sink",
            "artifact.kind": "probe-notes",
            "@payload": "md:missing-two",
        },
        **{f"md-{name}": {"@payload": f"md:{name}"} for name in MARKDOWN},
        "md-no-contract": {"to.eidolon": "nobody", "@payload": "md:none"},
        "md-txt-on-sections": {"artifact.path": "p-md-txt-on-sections.txt", "@payload": "txt"},
    },
}

#: E-1 cases: name -> raw envelope bytes (the payload is written as usual)
RAW: dict[str, Callable[[dict[str, Any]], bytes]] = {
    "not-json": lambda e: b"{not json",
    "empty-file": lambda e: b"",
    "whitespace": lambda e: b"  \n",
    "array": lambda e: b"[1, 2, 3]",
    "string": lambda e: b'"envelope"',
    "null": lambda e: b"null",
    "duplicate-key": lambda e: json.dumps(e).encode()[:-1] + b', "performative": "DECIDE"}',
    "duplicate-integrity": lambda e: (
        json.dumps(e).encode()[:-1]
        + b', "integrity": {"method": "sha256", "value": "'
        + b"0" * 64
        + b'"}}'
    ),
    "nan": lambda e: json.dumps(e).encode()[:-1] + b', "confidence2": NaN}',
    "infinity": lambda e: json.dumps(e).encode()[:-1] + b', "x": -Infinity}',
    "bom": lambda e: b"\xef\xbb\xbf" + json.dumps(e).encode(),
    "invalid-utf8": lambda e: json.dumps(e).encode()[:-1] + b', "x": "\xff\xfe"}',
    "lone-surrogate": lambda e: json.dumps(e).encode()[:-1] + b', "x": "\\ud800"}',
    "deep": lambda e: json.dumps(e).encode()[:-1] + b', "x": ' + b"[" * 40 + b"]" * 40 + b"}",
    "trailing": lambda e: json.dumps(e).encode() + b" x",
    "two-docs": lambda e: json.dumps(e).encode() * 2,
    "big-envelope": lambda e: json.dumps({**e, "pad": "x" * 3000}).encode(),
    "control-in-string": lambda e: json.dumps(e).encode()[:-1] + b', "x": "a\x01b"}',
    "unicode-escape": lambda e: json.dumps(e, ensure_ascii=True).encode(),
    "non-ascii-fields": lambda e: json.dumps(
        {**e, "performative": "PRÖPOSE"}, ensure_ascii=False
    ).encode(),
    "crlf-indent": lambda e: json.dumps(e, indent=4).replace("\n", "\r\n").encode(),
}


def _payload_for(md: str | bytes, n: int) -> bytes:
    text = md if isinstance(md, bytes) else md.encode("utf-8", "surrogatepass")
    return text + f"\n<!-- case {n} -->\n".encode() if text else text


def _write_case(
    folder: Path, name: str, n: int, changes: dict[str, Any], root: Path, outside: Path
) -> None:
    changes = dict(changes)
    special = changes.pop("@payload", None)
    mac_key = changes.pop("@mac", None)
    upper = changes.pop("@upper", False)
    md: str | bytes = SECTIONS_MD
    if isinstance(special, str) and special.startswith("md:"):
        md = MARKDOWN[special[3:]]
    payload = _payload_for(md, n)
    if special == "big":
        payload = SECTIONS_MD.encode() + b"x" * 5000 + b"\n"
    if special in ("txt", "upper", "markdown"):
        text = "Decision target\nFindings\nGaps\nScope\n" if special == "txt" else SECTIONS_MD
        payload = text.encode()
    pname = f"p-{name}.md"
    env = base_envelope(payload, pname, n)
    if mac_key is not None:
        env["integrity"]["value"] = _mac(mac_key, payload)
    if upper:
        env["integrity"]["value"] = env["integrity"]["value"].upper()
    env = edit(env, changes)
    folder.mkdir(parents=True, exist_ok=True)
    apath = env.get("artifact", {}).get("path") if isinstance(env.get("artifact"), dict) else None
    target = folder / pname
    if special == "root":
        (root / "rootdocs").mkdir(exist_ok=True)
        (root / "rootdocs" / "shared.md").write_bytes(payload)
    elif special == "name":
        (folder / f"{name}").write_bytes(payload)
    elif special == "subdir":
        (folder / "sub").mkdir(exist_ok=True)
        (folder / "sub" / pname).write_bytes(payload)
    elif special == "link-inside":
        target.write_bytes(payload)
        os.symlink(pname, folder / "link-inside.md")
    elif special == "link-outside":
        (outside / "secret.md").write_bytes(payload)
        os.symlink(outside / "secret.md", folder / "link-outside.md")
    elif special == "link-dangling":
        os.symlink("does-not-exist.md", folder / "link-dangling.md")
    elif special == "link-loop":
        os.symlink("link-loop.md", folder / "link-loop.md")
    elif special == "dir":
        (folder / "adir.md").mkdir()
    elif special == "fifo":
        os.mkfifo(folder / "fifo.md")
    elif special in ("txt", "upper", "markdown") and isinstance(apath, str):
        (folder / apath).write_bytes(payload)
    else:
        target.write_bytes(payload)
    # the envelope's own name decides the envelope-name rule: `<name>.envelope.json`
    (folder / f"{name}.envelope.json").write_text(json.dumps(env, indent=2) + "\n")


MIXED_POOL: list[tuple[str, str]] = [
    (g, c)
    for g in ("warn", "versions", "fields", "integrity", "ise", "context", "contracts")
    for c in GROUPS[g]
    if "@payload" not in GROUPS[g][c]
]


def build(root: Path, fixtures: Path | None) -> None:
    """Write the whole corpus under ``root`` (which must not exist or be empty)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / ".eidolons" / "contracts").mkdir(parents=True)
    _project_contracts(root / ".eidolons" / "contracts")
    outside = root.parent / (root.name + "-outside")
    if outside.exists():
        shutil.rmtree(outside)
    outside.mkdir()
    n = 0
    for group, cases in GROUPS.items():
        for name, changes in cases.items():
            n += 1
            _write_case(root / "corpus" / group, name, n, changes, root, outside)
    raw_dir = root / "corpus" / "e1"
    raw_dir.mkdir(parents=True)
    for name, make in RAW.items():
        n += 1
        payload = _payload_for(SECTIONS_MD, n)
        (raw_dir / f"p-{name}.md").write_bytes(payload)
        raw = make(base_envelope(payload, f"p-{name}.md", n))
        (raw_dir / f"{name}.envelope.json").write_bytes(raw)
    rng = random.Random(20261201)
    mixed = root / "corpus" / "mixed"
    for i in range(240):
        n += 1
        combined: dict[str, Any] = {}
        for _ in range(rng.choice((1, 2, 2, 3, 4))):
            g, c = rng.choice(MIXED_POOL)
            combined.update(GROUPS[g][c])
        _write_case(mixed / f"batch-{i // 60}", f"m{i:03d}", n, combined, root, outside)
    names = root / "corpus" / "names"
    for i, name in enumerate(["bad\nname", "esc\x1b[31mred", "tab\there", "space name", "ünï"]):
        n += 1
        _write_case(names, name, n, {"performative": "PROPOSE"} if i % 2 else {}, root, outside)
    raw_name = os.fsencode(str(names)) + b"/caf\xe9.envelope.json"
    payload = _payload_for(SECTIONS_MD, n + 1)
    (names / "p-cafe.md").write_bytes(payload)
    with open(raw_name, "wb") as fh:
        fh.write(json.dumps(base_envelope(payload, "p-cafe.md", n + 1)).encode())
    # not envelopes: a link and a directory named like one, a file without the suffix
    os.symlink("space name.envelope.json", names / "link.envelope.json")
    (names / "dir.envelope.json").mkdir()
    (names / "dir.envelope.json" / "inner.envelope.json").write_bytes(b"{}")
    (names / "notes.json").write_bytes(b"{}")
    # the version marker of a directory PATH
    (root / "corpus" / "versions" / "ECL_VERSION").write_text("2.0\n")
    # an envelope outside the project root: its own directory is the boundary
    payload = _payload_for(SECTIONS_MD, 9001)
    (outside / "p-out.md").write_bytes(payload)
    (outside / "out.envelope.json").write_text(json.dumps(base_envelope(payload, "p-out.md", 9001)))
    (outside / "escape.envelope.json").write_text(
        json.dumps(base_envelope(payload, "../" + root.name + "/rootdocs/shared.md", 9002))
    )
    (outside / "root-rule.envelope.json").write_text(
        json.dumps(base_envelope(payload, "rootdocs/shared.md", 9003))
    )
    if fixtures is not None and fixtures.is_dir():
        shutil.copytree(fixtures, root / "fixtures", symlinks=True)


def _project_contracts(directory: Path) -> None:
    import yaml

    doc = {
        "contract_version": "1.0",
        "from": "probe",
        "to": "sink",
        "edge_origin": "emitted-request",
        "performatives_allowed": ["PROPOSE", "INFORM"],
        "artifacts": [
            {"kind": "probe-report", "schema_ref": "x.json"},
            {
                "kind": "probe-notes",
                "schema_ref": "x.json",
                "required_sections": ["decision_target", "findings", "gaps", "scope"],
            },
        ],
        "trust_level": "standard",
        "notes": "golden corpus: an edge without a token budget",
    }
    (directory / "probe-to-sink.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


# --------------------------------------------------------------------------- runs

#: name -> (argv after ``check``, extra environment). ``{R}`` is the corpus root,
#: ``{O}`` the directory outside it.
RUNS: dict[str, tuple[list[str], dict[str, str]]] = {
    "text": (["{R}/corpus"], {}),
    "quiet": (["{R}/corpus", "-q"], {}),
    "json": (["{R}/corpus", "--json"], {}),
    "level-must": (["{R}/corpus", "--level", "MUST"], {}),
    "level-should-strict": (["{R}/corpus", "--level", "should", "--strict"], {}),
    "json-strict-key": (["{R}/corpus", "--json", "--strict"], {"ECL_HMAC_KEY": KEY}),
    "text-key": (["{R}/corpus"], {"ECL_HMAC_KEY": KEY}),
    "quiet-wrong-key": (["{R}/corpus", "-q"], {"ECL_HMAC_KEY": WRONG_KEY}),
    "json-caps": (
        ["{R}/corpus", "--json"],
        {"EIDOLONS_MAX_PAYLOAD_BYTES": "600", "EIDOLONS_MAX_ENVELOPE_BYTES": "1200"},
    ),
    "fixtures-text": (["{R}/fixtures", "--contracts", "{R}/fixtures/_contracts"], {}),
    "fixtures-json-key": (
        ["{R}/fixtures", "--contracts", "{R}/fixtures/_contracts", "--json"],
        {"ECL_HMAC_KEY": FIXTURE_KEY},
    ),
    "fixtures-quiet": (["{R}/fixtures", "-q", "--contracts", "{R}/fixtures/_contracts"], {}),
    "several-paths": (
        ["{R}/corpus/valid", "{O}", "{R}/corpus/valid/base.envelope.json", "{R}/corpus/names"],
        {},
    ),
    "several-paths-json": (["{O}", "{R}/corpus/valid", "--json"], {}),
    "target-version": (["{R}/corpus/valid", "--target-version", "2.0"], {}),
    "ecl-version-file": (["{R}/corpus/versions", "--json"], {}),
    "fail-on-must": (["{R}/corpus/warn", "--fail-on", "must"], {}),
    "fail-on-must-fail": (["{R}/corpus/fields", "--fail-on", "MUST", "-q"], {}),
    "exit-zero": (["{R}/corpus/fields", "--exit-zero"], {}),
    "one-file": (["{R}/corpus/valid/base.envelope.json", "--json"], {}),
    "usage-missing": (["{R}/nowhere"], {}),
    "usage-level": (["{R}/corpus/valid", "--level", "info"], {}),
    "usage-quiet-json": (["{R}/corpus/valid", "-q", "--json"], {}),
    "usage-not-envelope": (["{R}/corpus/names/notes.json"], {}),
    "usage-empty": (["{R}/rootdocs"], {}),
    "usage-target-version": (["{R}/corpus/valid", "--target-version", "3"], {}),
    "usage-no-path": ([], {}),
    "usage-fail-on": (["{R}/corpus/valid", "--fail-on", "never"], {}),
    "usage-unknown-option": (["{R}/corpus/valid", "--frobnicate"], {}),
    "usage-bad-contracts": (["{R}/corpus/valid", "--contracts", "{R}/nowhere"], {}),
}
for _group in GROUPS:
    RUNS[f"group-{_group}"] = (["{R}/corpus/" + _group], {})
    RUNS[f"group-{_group}-key"] = (["{R}/corpus/" + _group, "-q"], {"ECL_HMAC_KEY": KEY})
RUNS["group-e1"] = (["{R}/corpus/e1", "--json"], {})
RUNS["group-mixed-quiet"] = (["{R}/corpus/mixed", "-q"], {"ECL_HMAC_KEY": KEY})


class _Capture(io.TextIOWrapper):
    def __init__(self) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8", errors="surrogateescape", newline="")

    def isatty(self) -> bool:
        return False

    def raw_bytes(self) -> bytes:
        self.flush()
        return bytes(self.buffer.getvalue())  # type: ignore[attr-defined]


def _base_env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("EIDOLONS_", "ECL_")) and k != "NO_COLOR"
    }


def run_one(argv: list[str], extra_env: dict[str, str], cwd: Path) -> tuple[int, bytes, bytes]:
    """``eidolons check ARGV`` in this process (as ``tests/conftest.run_cli``), with the
    environment ``extra_env`` on top of the cleaned one; stdout and stderr as bytes."""
    from eidolons.cli.main import main

    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved = sys.stdin, sys.stdout, sys.stderr
    out, err = _Capture(), _Capture()
    try:
        os.environ.clear()
        os.environ.update({**_base_env(), **extra_env})
        os.chdir(cwd)
        sys.stdin = io.TextIOWrapper(io.BytesIO(b""), encoding="utf-8")
        sys.stdout, sys.stderr = out, err
        try:
            code = main(["check", *argv])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
        return code, out.raw_bytes(), err.raw_bytes()
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


def run_all(
    root: Path, only: list[str] | None = None, jobs: int | None = None
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every run of :data:`RUNS` on the corpus at ``root``: ``(name, {"argv", "code",
    "stdout", "stderr"})`` with the root replaced by :data:`ROOT_TOKEN` (the outside
    directory is ``<ROOT>-outside``). ``jobs``: run each with ``--jobs N`` put first (the
    recorded ``argv`` stays the run's own); None: the command's default."""
    outside = root.parent / (root.name + "-outside")
    root_b = os.fsencode(str(root))
    for name, (argv, extra) in RUNS.items():
        if only is not None and name not in only:
            continue
        if name.startswith("fixtures") and not (root / "fixtures").is_dir():
            continue
        real = [a.replace("{R}", str(root)).replace("{O}", str(outside)) for a in argv]
        code, out, err = run_one(
            real if jobs is None else ["--jobs", str(jobs), *real], extra, root
        )
        token = ROOT_TOKEN.encode()
        yield (
            name,
            {
                "argv": argv,
                "env": extra,
                "code": code,
                "stdout": out.replace(root_b, token),
                "stderr": err.replace(root_b, token),
            },
        )


def encode(runs: dict[str, dict[str, Any]]) -> bytes:
    """The runs as xz-compressed JSON; output bytes as text decoded with
    ``surrogateescape`` (lossless for any bytes, and it compresses)."""
    doc = {
        name: {
            **r,
            "stdout": r["stdout"].decode("utf-8", "surrogateescape"),
            "stderr": r["stderr"].decode("utf-8", "surrogateescape"),
        }
        for name, r in runs.items()
    }
    raw = json.dumps(doc, indent=1, sort_keys=True).encode()
    return lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME)


def decode(blob: bytes) -> dict[str, dict[str, Any]]:
    doc = json.loads(lzma.decompress(blob))
    return {
        name: {
            **r,
            "stdout": r["stdout"].encode("utf-8", "surrogateescape"),
            "stderr": r["stderr"].encode("utf-8", "surrogateescape"),
        }
        for name, r in doc.items()
    }


def main(argv: list[str]) -> int:
    import argparse
    import tempfile

    p = argparse.ArgumentParser(description="the golden corpus of eidolons check")
    p.add_argument("--record", action="store_true", help=f"write {EXPECTED.name}")
    p.add_argument("--keep", metavar="DIR", help="build the corpus in DIR and keep it")
    p.add_argument("--fixtures", default=str(HERE.parents[2] / "shared/ecl/conformance-fixtures"))
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="eidolons-golden-") as tmp:
        root = Path(args.keep).resolve() if args.keep else Path(tmp).resolve() / "project"
        build(root, Path(args.fixtures))
        if not (root / "fixtures").is_dir():
            print(f"fixtures not found at {args.fixtures}", file=sys.stderr)
            return 1
        if args.record:
            runs = dict(run_all(root))
            EXPECTED.write_bytes(encode(runs))
            print(f"recorded {len(runs)} runs to {EXPECTED}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
