"""The receiver's early SKIP (ADR 0022): an artifact with no envelope that the project does
not know as a hand-off is decided before the gate, the contracts, the trace store or
``json`` are imported; every case the early decision cannot settle goes to the full path,
which decides exactly as before. The cheap rules agree with the ones they stand in for."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import pytest

from eidolons.gates.receiver import IncomingResult
from eidolons.gates.skip import skip_line, skipped_json
from eidolons.io.paths import (
    envelope_candidates,
    index_path,
    is_relative_to,
    lies_under,
    rules_out,
    spellings,
)
from eidolons.io.payload import AmbiguousEnvelope, default_envelope_path, find_envelope
from tests.conftest import Run, clean_env, emit_payload, trace_files

Cli = Callable[..., Run]

LAUNCH = (
    "import sys; from eidolons.cli.main import main; code = main(sys.argv[1:]); "
    "print(' '.join(sorted(sys.modules)), file=sys.stderr); sys.exit(code)"
)
#: what the early SKIP must not import (each was on this path before ADR 0022)
NOT_IMPORTED = (
    "re",
    "argparse",
    "typing",
    "enum",
    "json",
    "pathlib",
    "dataclasses",
    "hashlib",
    "sqlite3",
    "tomllib",
    "functools",  # with collections, about 2.6 ms: the heading cache is a plain dict
    "eidolons.io.config",
    "eidolons.io.contracts",
    "eidolons.ecl.contract",
    "eidolons.ecl.receiver",
    "eidolons.gates.receiver",
    "eidolons.memory",
    "eidolons.io.payload",
    "eidolons.trace.log",
    "eidolons.trace.store",
)


@pytest.fixture
def traced(cli: Cli, project: Path) -> Path:
    """A project with a verified hand-off on record (so a trace and the payload index
    exist) and a file with no envelope at its root."""
    _, envelope, _ = emit_payload(cli, project)
    assert cli("verify-envelope", envelope, "--block").code == 0
    assert Path(index_path(str(project))).is_file()  # the host's payload index (ADR 0018)
    (project / "notes.txt").write_text("not a hand-off\n")
    return project


def launch(root: Path, *args: str, env: dict[str, str] | None = None) -> tuple[Run, set[str]]:
    """``verify-incoming ARGS`` in a fresh interpreter; the run and the modules it loaded."""
    proc = subprocess.run(
        [sys.executable, "-c", LAUNCH, "verify-incoming", *args],
        cwd=root,
        env=env or clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    *lines, modules = proc.stderr.rstrip("\n").split("\n")
    return Run(proc.returncode, proc.stdout, "\n".join(lines)), set(modules.split())


@pytest.mark.parametrize("mode", ["text", "json"])
def test_a_file_with_no_envelope_is_skipped_before_the_gate_is_imported(
    traced: Path, mode: str
) -> None:
    extra = ("--json",) if mode == "json" else ()
    run, modules = launch(traced, "notes.txt", "--as", "vigil", *extra)
    assert run.code == 0, run.err
    if mode == "json":
        said = {**skipped_json("vigil", "notes.txt"), "notes": []}  # the gate's, and notes
        assert json.loads(run.out) == said
        assert run.out == json.dumps(said, indent=2) + "\n"
        assert run.err == ""
    else:
        assert run.out == ""
        assert run.err == skip_line("vigil", "notes.txt")
    assert sorted(m for m in NOT_IMPORTED if m in modules) == []


def test_the_early_skip_prints_what_the_full_path_prints(cli: Cli, traced: Path) -> None:
    modes: tuple[tuple[str, ...], ...] = ((), ("--json",))
    early = [cli("verify-incoming", "notes.txt", "--as", "vigil@1.9.0", *x) for x in modes]
    # "./notes.txt" is not spelled as the gate prints it: the full path decides, the same way
    full = [cli("verify-incoming", "./notes.txt", "--as", "vigil@1.9.0", *x) for x in modes]
    assert [(r.code, r.out, r.err) for r in early] == [(r.code, r.out, r.err) for r in full]
    assert early[0].err.strip() == skip_line("vigil", "notes.txt")


def test_skipped_json_is_the_gate_s_own(tmp_path: Path) -> None:
    for artifact in ("notes.txt", "/abs/dir/n\u00e9e.md", "a\nb"):
        result = IncomingResult("skipped", "vigil", Path(artifact))
        assert skipped_json("vigil", str(Path(artifact))) == result.to_json()
        assert skip_line("vigil", str(Path(artifact))) == result.status_lines()[0]


# --- every doubt goes to the full path, which refuses -----------------------------------


def refused(r: Run) -> bool:
    return r.code == 3 and "REFUSE: UNVERIFIED" in r.err


def test_a_payload_the_trace_names_is_refused_when_its_envelope_is_gone(
    cli: Cli, project: Path
) -> None:
    payload, envelope, _ = emit_payload(cli, project, "notes/report.md")
    assert cli("verify-envelope", envelope, "--block").code == 0
    envelope.unlink()
    assert refused(cli("verify-incoming", payload, "--as", "vigil"))
    assert not rules_out(str(payload), str(project.resolve()))


def test_traces_past_the_scan_bound_refuse_as_the_full_search_does(cli: Cli, traced: Path) -> None:
    # the index can tell, but the full search cannot read the traces within its bound:
    # a sparse 300 MiB trace file (costs no disk) makes it refuse, so the early SKIP must not
    with (traced / ".eidolons" / ".trace" / "huge.jsonl").open("wb") as fh:
        fh.truncate(300 * 1024 * 1024)
    r = cli("verify-incoming", "notes.txt", "--as", "vigil")
    assert refused(r) and "cannot rule it out" in r.err
    r = cli("verify-incoming", "notes.txt", "--as", "vigil", env=clean_env(
        EIDOLONS_MAX_TRACE_SCAN_BYTES="10"))  # fmt: skip
    assert refused(r)


@pytest.mark.parametrize("where", ["trace-file", "trace-dir", "state-dir"])
def test_a_linked_trace_refuses_as_the_full_search_does(
    cli: Cli, traced: Path, tmp_path: Path, where: str
) -> None:
    state = traced / ".eidolons"
    if where == "trace-file":
        target = trace_files(traced)[0]
        os.symlink(target, state / ".trace" / "linked.jsonl")
    else:
        moved = tmp_path / f"moved-{where}"
        source = state / ".trace" if where == "trace-dir" else state
        source.rename(moved)
        os.symlink(moved, source)
    r = cli("verify-incoming", "notes.txt", "--as", "vigil")
    assert r.code == 3, r.err
    assert not rules_out(str(traced / "notes.txt"), str(traced.resolve()))


def test_an_index_that_cannot_tell_goes_to_the_full_rule(cli: Cli, traced: Path) -> None:
    index = Path(index_path(str(traced)))
    index.write_bytes(b"")  # headerless: cannot tell
    assert not rules_out(str(traced / "notes.txt"), str(traced.resolve()))
    assert cli("verify-incoming", "notes.txt", "--as", "vigil").code == 0  # the full rule
    index.unlink()  # missing while traces exist: cannot tell
    assert not rules_out(str(traced / "notes.txt"), str(traced.resolve()))


def test_configuration_and_stores_go_to_the_full_rule(cli: Cli, traced: Path) -> None:
    plain, root = str(traced / "notes.txt"), str(traced.resolve())
    assert rules_out(plain, root)
    (traced / ".eidolons" / "config.toml").write_text('[handoffs]\ndirs = ["."]\n')
    assert not rules_out(plain, root)
    assert refused(cli("verify-incoming", "notes.txt", "--as", "vigil"))
    (traced / ".eidolons" / "config.toml").unlink()
    saved = dict(os.environ)
    try:
        for name, value in (("EIDOLONS_HANDOFF_DIRS", "."), ("EIDOLONS_TRACE_DSN", "x")):
            os.environ[name] = value
            assert not rules_out(plain, root)
            del os.environ[name]
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert refused(cli("verify-incoming", "notes.txt", "--as", "vigil", env=clean_env(
        EIDOLONS_HANDOFF_DIRS=".")))  # fmt: skip
    (traced / ".eidolons" / "trace-store.json").write_text("{}")
    assert not rules_out(plain, root)
    assert cli("verify-incoming", "notes.txt", "--as", "vigil").code == 3


def test_a_file_in_a_hand_off_directory_is_refused(cli: Cli, traced: Path) -> None:
    inside = traced / ".eidolons" / "handoffs" / "x.md"
    inside.parent.mkdir()
    inside.write_text("x")
    assert not rules_out(str(inside), str(traced.resolve()))
    assert refused(cli("verify-incoming", inside, "--as", "vigil"))
    link = traced / "link.md"  # a link elsewhere to it: its resolved spelling is inside
    link.symlink_to(inside)
    assert refused(cli("verify-incoming", link, "--as", "vigil"))


def test_usage_errors_are_the_full_path_s(cli: Cli, traced: Path) -> None:
    r = cli("verify-incoming", "notes.txt", "--as", "Vigil")
    assert r.code == 2 and "not an eidolon slug" in r.err
    r = cli("verify-incoming", "notes.txt", "--as", "vigil", "--json", "--print-payload")
    assert r.code == 2
    r = cli("verify-incoming", "gone.txt", "--as", "vigil")
    assert r.code == 2 and "does not exist" in r.err
    r = cli("verify-incoming", "notes.txt", "--as", "vigil", env=clean_env(
        EIDOLONS_MAX_PAYLOAD_BYTES="many"))  # fmt: skip
    assert r.code == 2
    r = cli("verify-incoming", "notes.txt", "--as", "vigil", "--require-envelope")
    assert refused(r)


def test_a_root_found_by_falling_back_is_said_as_before(tmp_path: Path) -> None:
    bare = tmp_path / "nomarker"
    bare.mkdir()
    (bare / "notes.txt").write_text("x")
    r, _ = launch(bare, "notes.txt", "--as", "vigil")
    assert r.code == 0 and "using it as the project root" in r.err and "SKIP" in r.err


# --- the cheap rules agree with the ones they stand in for ------------------------------

NAMES = ["r.md", "r", ".r", ".r.md", "..r", "...r", "r.", "r..", "a.b.c", "..", "...", "x.y."]


@pytest.mark.parametrize("name", NAMES)
def test_envelope_candidates_are_find_envelope_s(tmp_path: Path, name: str) -> None:
    artifact = tmp_path / name
    sibling, appended = envelope_candidates(str(artifact))
    assert sibling == str(default_envelope_path(artifact))
    assert appended == str(artifact) + ".envelope.json"
    for made in (sibling, appended):
        Path(made).write_text("{}")
        try:
            found = find_envelope(artifact)
        except AmbiguousEnvelope:
            found = None
        assert found is not None or (Path(sibling).exists() and Path(appended).exists())
        assert found is None or str(found) in (sibling, appended)
        Path(made).unlink()


PATHS = ["/", "//", "/a", "/a/b", "/ab", "//a", "//a/b", "/a/b/c", "/a/bc"]


def test_is_relative_to_is_pathlib_s() -> None:
    for path in PATHS:
        for base in PATHS:
            expect = PurePosixPath(path).is_relative_to(PurePosixPath(base))
            assert is_relative_to(path, base) is expect, (path, base)


def test_lies_under_is_the_pathlib_rule(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "d" / "in").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "out").symlink_to(tmp_path / "d")
    for path in ["d/x", "d/in/x", "out/x", "elsewhere/x", "dx", "d/../dx", "d", "out"]:
        full = tmp_path / path
        for directory in ["d", "elsewhere", "d/in", "out"]:
            base = tmp_path / directory
            lexical = Path(os.path.abspath(full))
            ways = [lexical, Path(os.path.realpath(lexical.parent)) / lexical.name]
            ways.append(Path(os.path.realpath(lexical)))
            bases = [Path(os.path.abspath(base)), Path(os.path.realpath(base))]
            expect = any(p.is_relative_to(b) for p in ways for b in bases)
            assert lies_under(str(full), str(base)) is expect, (path, directory)
            assert [Path(s) for s in spellings(str(full))] == list(dict.fromkeys(ways))


@pytest.mark.parametrize("name", NAMES)
def test_the_hook_s_trigger_is_the_gate_s(tmp_path: Path, name: str) -> None:
    from eidolons.hosts.hook.events import has_envelope

    artifact = tmp_path / name
    assert not has_envelope(str(artifact))
    Path(default_envelope_path(artifact)).write_text("{}")  # "..r" -> ".envelope.json"
    assert has_envelope(str(artifact)) and find_envelope(artifact) is not None


# --- the verified hand-off: what its path no longer imports (ADR 0022) -------------------


def test_the_receiver_records_are_not_dataclasses() -> None:
    from tests._imports import SRC, parse_module

    for name in ("ecl/receiver.py", "gates/receiver.py", "memory/__init__.py"):
        imports = parse_module(name, SRC / "eidolons" / name).imports
        assert not {"dataclasses", "typing"} & imports, name
    for name in ("memory/rules.py", "memory/local.py"):
        assert "dataclasses" not in parse_module(name, SRC / "eidolons" / name).imports, name


def test_a_verified_hand_off_with_memory_off_imports_no_memory_nor_crypto(
    cli: Cli, traced: Path
) -> None:
    payload = traced / "handoff" / "scout-report.md"
    run, modules = launch(traced, str(payload), "--as", "vigil", "--no-memory")
    assert run.code == 0 and "PASS" in run.err, run.err
    unwanted = {
        "eidolons.memory",
        "cryptography",  # the sender signature check (no trust store here)
        "sqlite3",
        "uuid",
        "dataclasses",
        "typing",
    }
    unwanted |= {"pathlib", "json", "re", "hashlib", "_hashlib"}  # ADR 0022
    assert sorted(unwanted & modules) == []


def test_a_repeated_reception_with_memory_on_does_not_import_uuid(cli: Cli, traced: Path) -> None:
    payload = traced / "handoff" / "scout-report.md"
    first, modules = launch(traced, str(payload), "--as", "vigil", "--json")
    assert first.code == 0 and json.loads(first.out)["ingest"]["status"] == "ingested"
    again, modules = launch(traced, str(payload), "--as", "vigil", "--json")
    assert again.code == 0, again.err
    assert json.loads(again.out)["ingest"]["commit_status"] == "merged"
    assert "eidolons.memory.local" in modules
    assert not {"uuid", "platform", "dataclasses", "inspect", "typing", "_hashlib"} & modules


def test_a_reception_with_memory_on_opens_the_store_without_pathlib(cli: Cli, traced: Path) -> None:
    # ADR 0021: the store is opened, created (first reception) and merged into (second)
    # on strings; threading, base64, contextlib and sqlite3's datetime adapters are not
    # needed; a merge builds no crystal, so it parses no date and writes no JSON
    payload = traced / "handoff" / "scout-report.md"
    unwanted = {"pathlib", "fnmatch", "urllib.parse", "ipaddress", "threading", "base64"}
    unwanted |= {"contextlib", "sqlite3", "sqlite3.dbapi2"}
    for merge in (False, True):
        run, modules = launch(traced, str(payload), "--as", "vigil")
        assert run.code == 0 and "PASS" in run.err, run.err
        assert "eidolons.memory.local" in modules and "_sqlite3" in modules
        assert sorted((unwanted | ({"datetime", "json"} if merge else set())) & modules) == []
    store = traced / ".eidolons" / "memory" / "memory.sqlite3"
    with sqlite3.connect(store) as conn:  # one crystal, validated, stored once
        rows = conn.execute("SELECT validation_state, access_count FROM crystals").fetchall()
    assert [state for state, _ in rows] == ["validated"]


@pytest.mark.parametrize(
    "module, name",
    [("ecl/envelope.py", "GateResult"), ("ecl/rules/integrity.py", "PayloadFacts")],
)
def test_the_named_tuples_declare_the_same_fields_twice(module: str, name: str) -> None:
    # the type checker's NamedTuple and the interpreter's namedtuple (no typing at start-up)
    import ast
    import importlib

    from tests._imports import SRC

    tree = ast.parse((SRC / "eidolons" / module).read_text())
    declared = next(
        n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == f"_{name}"
    )
    fields = [s.target.id for s in declared.body if isinstance(s, ast.AnnAssign)]  # type: ignore[union-attr]
    defaults = [s.target.id for s in declared.body if isinstance(s, ast.AnnAssign) and s.value]  # type: ignore[union-attr]
    cls = getattr(importlib.import_module("eidolons." + module[:-3].replace("/", ".")), name)
    assert list(cls._fields) == fields
    assert sorted(cls._field_defaults) == sorted(defaults)
    assert all(v is None for v in cls._field_defaults.values())
    assert cls.__name__ == name and repr(cls(*range(len(fields)))).startswith(f"{name}(")
