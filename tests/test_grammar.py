"""The one grammar (ADR 0002): every lexical rule once, whole-string, judged the same by
every gate, ``check`` and ``emit``. Tables of raw values, then the regressions the
copies used to disagree on (``atlas\\n``, ``notes..v2.md``, ``r.md/``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eidolons.ecl import grammar
from tests._builders import rewrite
from tests.conftest import Run, emit_payload, read_trace

Cli = Callable[..., Run]
NAME, BODY = "handoff/scout-report.md", "# Report\n\n## Decision target\nx\n"

TABLE: list[tuple[Callable[[Any], bool], list[Any], list[Any]]] = [
    (
        grammar.is_slug,
        ["atlas", "a", "x-1", "gilgamesh"],
        ["atlas\n", "\natlas", "Atlas", "1atlas", "", "at las", "atlas\r", None, 3],
    ),
    (
        grammar.is_envelope_version,
        ["1.0", "1.2", "2.0", "2.1", "2.1.7"],
        ["2.1\n", "2.2", "3.0", "2.1.", "v2.1", "", 2.1],
    ),
    (grammar.is_v21_version, ["2.1", "2.1.3"], ["2.1\n", "2.10", "2.0"]),
    (grammar.is_agent_version, ["1.4.2", "n/a"], ["1.4.2\n", "1.4", "n/a\n", "N/A"]),
    (grammar.is_schema_version, ["1.0", "1.0.2"], ["1", "1.0\n", "1.0.2.3"]),
    (grammar.is_hex64, ["0" * 64, "a" * 64], ["0" * 64 + "\n", "A" * 64, "0" * 63, "0" * 65]),
    (grammar.is_extension_field, ["x_acme_flag"], ["x_acme\n", "x_", "y_acme"]),
    (grammar.is_rfc3339, ["2026-11-30T07:23:17.931Z"], ["2026-11-30T07:23:17Z\n", "2026-11-30"]),
    (grammar.is_safe_file_name, ["t1", "01a2-b.c_d"], ["t1\n", ".hidden", "a/b", "", "x" * 201]),
    (
        grammar.is_safe_relative_path,
        ["r.md", "handoff/r.md", "a.b/c.md"],
        [
            "r.md/",
            "r.md/.",
            "r.md//",
            "./r.md",
            "a//r.md",
            "notes..v2.md",
            "../r.md",
            "a/../r.md",
            "/r.md",
            "a\\r.md",
            "r.md\n",
            "r\x00.md",
            "r\x1b.md",
            "",
            None,
        ],
    ),
]


@pytest.mark.parametrize(
    "rule, value, expected",
    [(rule, v, True) for rule, good, _ in TABLE for v in good]
    + [(rule, v, False) for rule, _, bad in TABLE for v in bad],
    ids=lambda x: repr(x)[:30] if not callable(x) else x.__name__,
)
def test_rule_table(rule: Callable[[Any], bool], value: Any, expected: bool) -> None:
    assert rule(value) is expected


def test_no_pattern_is_compiled_outside_the_grammar() -> None:
    """The copies were the bug: no module but the grammar compiles a slug, version or
    digest pattern (the contract validator is generated from the JSON Schema)."""
    src = Path(grammar.__file__).resolve().parents[1]
    offenders = []
    for path in src.rglob("*.py"):
        if path.name in ("grammar.py", "_contract_schema.py"):
            continue
        for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "re.compile(" not in line or "re.compile(rb" in line:
                continue  # str patterns only (a bytes pattern over a file format is not one)
            for needle in ("[a-z][a-z0-9-]*", "[0-9a-f]{64}", r"2\.[01]", r"\d+\.\d+\.\d+"):
                if needle in line:
                    offenders.append(f"{path.relative_to(src)}:{no}: {needle}")
    assert offenders == []


# ------------------------------------------------------------------ regressions


@pytest.mark.parametrize("command", ["verify-incoming", "run"])
def test_receiver_name_with_a_newline_is_a_usage_error(
    cli: Cli, project: Path, command: str
) -> None:
    """``--as $'vigil\\n'`` passed the ``re.match``+``$`` copy and split the refusal line."""
    payload, envelope, _ = emit_payload(cli, project)
    args = (
        ("verify-incoming", payload, "--as", "vigil\n")
        if command == "verify-incoming"
        else ("run", "--verify", envelope, "--as", "vigil\n", "--mode", "block")
    )
    r = cli(*args)
    assert r.code == 2 and "is not an eidolon slug" in r.err
    assert "REFUSE" not in r.err


def test_sender_with_a_newline_is_refused_by_emit(cli: Cli, project: Path) -> None:
    (project / "r.md").write_text("# r\n")
    r = cli(
        "emit", "r.md", "--from", "atlas\n", "--to", "vigil", "--performative", "INFORM",
        "--kind", "scout-report", "--objective", "o",
    )  # fmt: skip
    assert r.code == 2 and "eidolon must match" in r.err


def test_thread_id_with_a_newline_is_traced_under_unknown(cli: Cli, project: Path) -> None:
    """A thread id ``t1\\n`` made a trace file ``t1\\n.jsonl`` where ``$`` let it pass."""
    _, envelope, _ = emit_payload(cli, project, NAME, BODY, "--no-trace")
    rewrite(envelope, thread_id="t1\n")
    cli("verify-envelope", envelope, "--mode", "warn")
    names = sorted(p.name for p in (project / ".eidolons" / ".trace").iterdir())
    assert names == ["unknown.jsonl"]


def test_sender_slug_with_a_newline_is_refused_by_receiver_and_check(
    cli: Cli, project: Path
) -> None:
    payload, envelope, _ = emit_payload(cli, project)
    rewrite(envelope, from__eidolon="atlas\n")
    r = cli("verify-incoming", payload, "--as", "vigil")
    first = r.err.splitlines()[0]  # the refusal line stays one line: the newline escaped
    assert r.code == 3 and first == "[vigil-verify-incoming] REFUSE: SCHEMA_INVALID from atlas\\n"
    r = cli("check", envelope, "--json")
    e5 = [g for g in r.json()["results"] if g["id"] == "E-5"]
    assert e5 and e5[0]["status"] == "fail"


def test_dotdot_inside_a_name_is_judged_the_same_by_the_gate_and_check(
    cli: Cli, project: Path
) -> None:
    """``notes..v2.md`` passed the orchestrator's per-component rule and failed ``check``'s
    E-6. One rule now, the spec's: no ``..`` anywhere."""
    payload, envelope, _ = emit_payload(cli, project, NAME, BODY, "--no-trace")
    odd = payload.with_name("notes..v2.md")
    payload.rename(odd)
    rewrite(envelope, artifact__path="notes..v2.md")
    r = cli("verify-envelope", envelope, "--json", "--mode", "block")
    assert r.code == 2 and r.json()["verdict"] == "malformed"
    r = cli("check", envelope, "--json")
    e6 = [g for g in r.json()["results"] if g["id"] == "E-6"]
    assert e6[0]["status"] == "fail" and e6[0]["reason"] == "contains '..': notes..v2.md"
    r = cli("emit", odd, "--from", "atlas", "--to", "vigil", "--performative", "INFORM",
            "--kind", "scout-report", "--objective", "o", "--force")  # fmt: skip
    assert r.code == 2 and "not a safe relative path" in r.err


@pytest.mark.parametrize("path", ["scout-report.md/", "scout-report.md/.", "scout-report.md//"])
def test_trailing_slash_forms_are_malformed_everywhere(cli: Cli, project: Path, path: str) -> None:
    """``r.md/`` resolved to ``r.md`` for hashing but skipped the required-section check
    (not a ``.md`` name): now malformed for every reader, before any hashing."""
    payload, envelope, _ = emit_payload(cli, project, NAME, BODY, "--no-trace")
    rewrite(envelope, artifact__path=f"handoff/{path}")
    r = cli("verify-envelope", envelope, "--json", "--mode", "block")
    assert r.code == 2 and r.json()["verdict"] == "malformed"
    r = cli("verify-incoming", payload, "--as", "vigil", "--json")
    assert r.code == 3 and r.json()["failure_code"] == "SCHEMA_INVALID"
    r = cli("check", envelope, "--json")
    assert r.code == 2
    i2 = [g for g in r.json()["results"] if g["id"] == "I-2"]
    assert i2[0]["status"] == "fail" and "not a safe relative path" in i2[0]["reason"]
    # the refusal hand-back (ADR 0017) has its own thread, holding only its emit event
    traces = [read_trace(f) for f in sorted((project / ".eidolons/.trace").iterdir())]
    gates = [t for t in traces if [e["event"] for e in t] != ["emit"]]
    assert [[e["event"] for e in t] for t in gates] == [["verify_fail", "verify_fail"]]
