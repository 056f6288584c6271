"""``eidolons emit``: the envelope a sender writes must pass the gate and the schema."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from eidolons.gates.sender import uuid7
from eidolons.io.payload import default_envelope_path
from tests.conftest import Run, clean_env, emit_cmd, emit_payload, read_trace

Cli = Callable[..., Run]
UUID7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def test_uuid7_shape_and_order() -> None:
    ids = [uuid7() for _ in range(200)]
    assert all(UUID7.match(i) for i in ids)
    assert len(set(ids)) == 200
    assert ids[0][:13] <= ids[-1][:13]  # time-ordered prefix


@pytest.mark.parametrize(
    ("payload", "envelope"),
    [
        ("a/report.md", "a/report.envelope.json"),
        ("notes", "notes.envelope.json"),
        ("x.tar.gz", "x.tar.envelope.json"),
        ("dir.v2/readme", "dir.v2/readme.envelope.json"),
    ],
)
def test_sibling_naming(payload: str, envelope: str) -> None:
    assert default_envelope_path(Path(payload)) == Path(envelope)


@pytest.mark.parametrize("version", ["2.1", "2.0", "1.2", "1.0"])
def test_emitted_envelope_passes_gate_and_validates(cli: Cli, project: Path, version: str) -> None:
    from tests._schemas import envelope_schema_name, validation_errors

    _, envelope, doc = emit_payload(
        cli,
        project,
        "r.md",
        "# R\n",
        "--envelope-version",
        version,
        "--thread",
        "t-123",
        "--parent",
        "p-1",
        "--trust-level",
        "low",
        "--tokens-used",
        "12",
        "--token-budget",
        "4000",
        "--summary",
        "only the new bit",
        "--input-handle",
        "mission.md",
    )
    assert validation_errors(doc, envelope_schema_name(version)) == []
    assert json.loads(envelope.read_text()) == doc
    assert doc["envelope_version"] == version
    assert doc["thread_id"] == "t-123" and doc["parent_id"] == "p-1"
    assert UUID7.match(doc["message_id"])
    assert doc["constraints"] == {"trust_level": "low"}
    assert doc["context_delta"] == {
        "token_budget": 4000,
        "tokens_used": 12,
        "input_handles": ["mission.md"],
        "summary": "only the new bit",
    }
    assert doc["artifact"]["path"] == "r.md" and doc["artifact"]["size_bytes"] == 4
    assert doc["trace"]["host"] == "raw" and doc["trace"]["model"] == "unknown"
    assert cli("verify-envelope", envelope, "--block", "--strict").code == 0


def test_defaults_thread_is_message_and_host_model_from_env(cli: Cli, project: Path) -> None:
    (project / "p.md").write_text("x")
    r = cli(
        *emit_cmd("p.md", "--json", sender="atlas@1.4.2"),
        env=clean_env(ECL_HOST="claude-code", ECL_MODEL="m-1"),
    )
    doc = r.json()["envelope"]
    assert doc["thread_id"] == doc["message_id"] and doc["parent_id"] is None
    assert doc["to"] == {"eidolon": "vigil", "version": "n/a"}
    assert doc["trace"]["host"] == "claude-code" and doc["trace"]["model"] == "m-1"
    assert doc["envelope_version"] == "2.1"
    ev = read_trace(Path(r.json()["trace"]))
    assert ev == [ev[0]] and ev[0]["event"] == "emit"
    assert ev[0]["from"] == "atlas@1.4.2" and ev[0]["to"] == "vigil@n/a"
    assert ev[0]["payload_sha256"] == doc["artifact"]["sha256"]


def test_refuses_to_overwrite_without_force(cli: Cli, project: Path) -> None:
    _, envelope, first = emit_payload(cli, project, "r.md", "one")
    (project / "r.md").write_text("two")
    args = emit_cmd("r.md")
    r = cli(*args)
    assert r.code == 2 and "--force" in r.err
    assert json.loads(envelope.read_text()) == first
    assert cli(*args, "--force").code == 0
    assert json.loads(envelope.read_text())["message_id"] != first["message_id"]
    assert not list(project.glob(".eidolons-*.tmp"))


def test_out_option_and_artifact_path_relative_to_root(cli: Cli, project: Path) -> None:
    (project / "data").mkdir()
    (project / "data" / "p.md").write_text("x")
    r = cli(*emit_cmd("data/p.md", "--out", "envs/p.envelope.json", "--json"))
    assert r.code == 0, r.err
    assert r.json()["envelope"]["artifact"]["path"] == "data/p.md"
    assert cli("verify-envelope", project / "envs/p.envelope.json", "--block").code == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--performative", "SHOUT"], "--performative"),
        (["--from", "Atlas"], "--from"),
        (["--to", "vigil@1.2"], "--to"),
        (["--kind", "Bad Kind"], "--kind"),
        (["--objective", "x" * 241], "--objective"),
        (["--envelope-version", "2.2"], "--envelope-version"),
        (["--tokens-used", "5000"], "--token-budget"),
        (["--input-handle", "../x"], "--input-handle"),
    ],
)
def test_bad_arguments_are_usage_errors(
    cli: Cli, project: Path, args: list[str], message: str
) -> None:
    (project / "p.md").write_text("x")
    base = {
        "--from": "atlas",
        "--to": "vigil",
        "--performative": "INFORM",
        "--kind": "k",
        "--objective": "o",
    }
    for i in range(0, len(args), 2):
        base[args[i]] = args[i + 1]
    flat = [x for kv in base.items() for x in kv]
    r = cli("emit", "p.md", *flat)
    assert r.code == 2 and message in r.err and "Traceback" not in r.err
    assert not (project / "p.envelope.json").exists()


def test_missing_payload_and_fifo(cli: Cli, project: Path) -> None:
    import os

    r = cli(*emit_cmd("nope.md"))
    assert r.code == 2 and "No such file" in r.err  # malformed input: exit 2 (ADR 0003)
    os.mkfifo(project / "f.md")
    r = cli(*emit_cmd("f.md"))
    assert r.code == 2 and "not a regular file" in r.err


def test_payload_outside_root_and_envelope_dir_is_refused(
    cli: Cli, project: Path, tmp_path: Path
) -> None:
    (tmp_path / "o.md").write_text("x")
    r = cli(*emit_cmd(tmp_path / "o.md", "--out", "e.envelope.json"))
    assert r.code == 2 and "could not resolve" in r.err


def test_trace_failure_writes_nothing(cli: Cli, project: Path) -> None:
    (project / ".eidolons/.trace").mkdir(parents=True)
    (project / "p.md").write_text("x")
    r = cli(*emit_cmd("p.md", "--thread", "t1", "--trace", project / ".eidolons/.trace"))
    assert r.code == 2 and "trace" in r.err
    assert not (project / "p.envelope.json").exists()


def test_demo_runs(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    r = run_cli("demo", cwd=tmp_path)
    assert r.code == 0, r.err
    assert "[pass]" in r.out and "[tamper]" in r.out and "exit 3" in r.out
    assert "verify_fail" in r.out and "INTEGRITY_MISMATCH (refused)" in r.out


def test_high_trust_at_21_needs_hmac_and_ise(cli: Cli, project: Path) -> None:
    (project / "p.md").write_text("# p\n")
    r = cli(*emit_cmd("p.md", "--trust-level", "high", to="spectra", performative="PROPOSE"))
    assert r.code == 2 and "is high trust: add --hmac" in r.err and "--ise JSON" in r.err
    # the builder's own rules hold without the self-check too
    base = emit_cmd(
        "p.md", "--trust-level", "high", "--no-check", to="spectra", performative="PROPOSE"
    )
    r = cli(*base)
    assert r.code == 2 and "I-5" in r.err and "--hmac" in r.err
    keyed = clean_env(ECL_HMAC_KEY="k" * 32)
    r = cli(*base, "--hmac", env=keyed)
    assert r.code == 2 and "S-3" in r.err and "--ise" in r.err
    r = cli(*base, "--hmac", "--ise", '{"assertion_grade": "maybe"}', env=keyed)
    assert r.code == 2 and "ise.assertion_grade" in r.err
    r = cli(*base, "--hmac", "--ise", "[1]", env=keyed)
    assert r.code == 2 and "--ise must be a JSON object" in r.err
    ise = (
        '{"assertion_grade": "validated", "verification": {"fresh_context": true, '
        '"checker": "vigil", "transcript_access": "artifact-only"}}'
    )
    r = cli(*base, "--hmac", "--ise", ise, "--json", env=keyed)
    assert r.code == 0, r.err
    assert r.json()["envelope"]["ise"]["assertion_grade"] == "validated"
    assert not (project / ".eidolons-").exists()
    r = cli("check", "p.envelope.json", env=keyed)
    assert r.code == 0, r.out  # conformant: contract defaults filled edge_origin and budget
    # at 2.0 high trust with sha256 is only a SHOULD for the builder; the receiver refuses
    # it at every version, so only --no-check writes it, with a warning
    (project / "q.md").write_text("# q\n")
    q = emit_cmd(
        "q.md", "--trust-level", "high", "--envelope-version", "2.0", to="spectra",
        performative="PROPOSE",
    )  # fmt: skip
    assert cli(*q).code == 2
    r = cli(*q, "--no-check")
    assert r.code == 0 and "warning: --no-check: spectra will refuse this hand-off" in r.err


def test_contract_defaults_and_file_mode(cli: Cli, project: Path) -> None:
    (project / "p.md").write_text("# p\n")
    r = cli(*emit_cmd("p.md", "--json", "--no-check", sender="forge", kind="reasoning-report"))
    doc = r.json()["envelope"]
    assert doc["edge_origin"] == "roster" and doc["context_delta"]["token_budget"] == 3000
    mask = os.umask(0o022)
    os.umask(mask)
    assert (project / "p.envelope.json").stat().st_mode & 0o777 == 0o666 & ~mask  # not 0600
    (project / "q.md").write_text("# q\n")
    r = cli(*emit_cmd("q.md", "--json", "--token-budget", "10", sender="ramza", kind="spec"))
    assert r.code == 3 and "REFUSE: UNDECLARED_EDGE" in r.err  # no ramza -> vigil edge
    r = cli(
        *emit_cmd(
            "q.md", "--json", "--no-check", "--token-budget", "10", sender="ramza", kind="spec"
        )
    )
    assert [f["code"] for f in r.json()["refusals"]] == ["UNDECLARED_EDGE"]
    doc = r.json()["envelope"]
    assert "edge_origin" not in doc and doc["context_delta"]["token_budget"] == 10


def test_a_payload_name_that_is_not_utf8_is_a_usage_error(cli: Cli, project: Path) -> None:
    # artifact.path is JSON text: a name that no UTF-8 spells cannot be written into an
    # envelope; one line, exit 2, and nothing written (was an internal error, exit 70)
    name = os.fsdecode(b"r\xff.md")
    (project / name).write_text("# r\n")
    r = cli(*emit_cmd(name))
    assert r.code == 2, r.err
    assert "not valid UTF-8" in r.err and "internal error" not in r.err
    assert len(r.err.strip().splitlines()) == 1
    assert not list(project.glob("*.envelope.json"))
    assert not (project / ".eidolons" / ".trace").exists() or not any(
        (project / ".eidolons" / ".trace").iterdir()
    )


def _ise_example(text: str) -> list[str]:
    """The one ``--ise`` example in ``text`` (lines joined at a trailing ``\\``), as argv."""
    import shlex

    joined = text.replace("\\\n", " ")
    found = [line for line in joined.splitlines() if "eidolons emit" in line and "--ise" in line]
    assert len(found) == 1, found
    return shlex.split(found[0])


@pytest.mark.parametrize("where", ["emit --help", "README"])
def test_the_ise_example_is_accepted_as_written(cli: Cli, project: Path, where: str) -> None:
    from eidolons.cli.main import EXAMPLES
    from tests.conftest import REPO

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    argv = _ise_example("\n".join(EXAMPLES["emit"]) if where == "emit --help" else readme)
    assigned = dict(a.split("=", 1) for a in argv[: argv.index("eidolons")])
    argv = argv[argv.index("eidolons") + 1 :]
    (project / argv[1]).write_text("# Change summary\n")
    r = cli(*argv, env=clean_env(**assigned))
    assert r.code == 0, r.err
    doc = json.loads((project / argv[1]).with_suffix(".envelope.json").read_text())
    assert doc["ise"] == {"assertion_grade": "self-attested"}
    assert doc["integrity"]["method"] == "hmac-sha256"
