"""``eidolons contracts list|show`` through real subprocesses, as a user would run them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from contract_helpers import valid_contract, write_contract


def run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    # Hermetic: no EIDOLONS_* / ECL_* settings from the developer's shell leak in.
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("EIDOLONS_", "ECL_"))}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "eidolons", "contracts", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project root (has .eidolons/) with no contracts of its own."""
    (tmp_path / ".eidolons").mkdir()
    return tmp_path


def test_list_prints_one_line_per_edge(project: Path) -> None:
    result = run_cli("list", cwd=project)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 65
    line = next(line for line in lines if line.startswith("forge -> gilgamesh "))
    assert line.split() == [
        "forge", "->", "gilgamesh", "INFORM", "reasoning-report", "3000", "roster", "builtin"
    ]  # fmt: skip
    assert result.stderr == ""


def test_list_to_receiver(project: Path) -> None:
    result = run_cli("list", "--to", "vigil", cwd=project)
    assert result.returncode == 0, result.stderr
    senders = [line.split()[0] for line in result.stdout.splitlines()]
    assert senders == [
        "apivr", "atlas", "forge", "gilgamesh", "human", "idg", "kupo", "spectra", "vivi"
    ]  # fmt: skip
    apivr = result.stdout.splitlines()[0].split()
    assert apivr[3] == "PROPOSE,INFORM,ESCALATE,REQUEST,ACKNOWLEDGE"
    assert apivr[4] == "repair-failed-report,change-summary"


def test_list_json_is_to_dict_plus_source(project: Path) -> None:
    result = run_cli("list", "--to", "gilgamesh", "--json", cwd=project)
    assert result.returncode == 0, result.stderr
    records = json.loads(result.stdout)
    assert [r["from"] for r in records] == ["forge", "human", "orchestrator"]
    orchestrator = records[2]
    assert orchestrator["source"] == "builtin"
    assert orchestrator["performatives_allowed"] == ["DELEGATE", "REQUEST", "INFORM", "ACKNOWLEDGE"]
    assert orchestrator["artifacts"][0]["kind"] == "mission-contract"
    assert set(orchestrator) >= {"contract_version", "edge_origin", "context_delta", "notes"}


def test_show_text_and_json(project: Path) -> None:
    text = run_cli("show", "atlas", "vigil", cwd=project)
    assert text.returncode == 0, text.stderr
    assert "edge:              atlas -> vigil" in text.stdout
    assert "edge_origin:       implicit" in text.stdout
    assert "VIGIL receiver profile" in text.stdout
    data = run_cli("show", "atlas", "vigil", "--json", cwd=project)
    assert data.returncode == 0
    record = json.loads(data.stdout)
    assert record["source"] == "builtin"
    assert record["edge_origin"] == "implicit"


def test_show_unknown_edge_exits_1(project: Path) -> None:
    result = run_cli("show", "forge", "nobody", cwd=project)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == "eidolons: no contract for forge -> nobody\n"


def test_project_contracts_found_from_a_subdirectory(project: Path) -> None:
    path = write_contract(
        project / ".eidolons" / "contracts", valid_contract(from_="newcomer", to="gilgamesh")
    )
    sub = project / "deep" / "er"
    sub.mkdir(parents=True)
    result = run_cli("show", "newcomer", "gilgamesh", "--json", cwd=sub)
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["performatives_allowed"] == ["PROPOSE"]  # a new edge is taken as written
    assert Path(record["source"]).resolve() == path.resolve()


def test_root_option_and_environment(tmp_path: Path, project: Path) -> None:
    write_contract(project / ".eidolons" / "contracts", valid_contract(from_="newcomer"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    by_option = run_cli("show", "newcomer", "vigil", "--root", str(project), cwd=elsewhere)
    assert by_option.returncode == 0, by_option.stderr
    by_env = run_cli(
        "show", "newcomer", "vigil", cwd=elsewhere, env={"EIDOLONS_ROOT": str(project)}
    )
    assert by_env.returncode == 0, by_env.stderr
    missing = run_cli("list", "--root", str(tmp_path / "nope"), cwd=elsewhere)
    assert missing.returncode == 2
    assert missing.stderr.startswith("eidolons: --root ")


def test_contracts_option_narrows_project(project: Path, tmp_path: Path) -> None:
    first = write_contract(
        project / ".eidolons" / "contracts",
        valid_contract(performatives_allowed=["INFORM", "PROPOSE", "DECIDE"]),
    )
    extra = tmp_path / "extra"
    path = write_contract(extra, valid_contract(performatives_allowed=["RESUME", "PROPOSE"]))
    result = run_cli("list", "--to", "vigil", "--contracts", str(extra), "--json", cwd=project)
    assert result.returncode == 0, result.stderr
    atlas = next(r for r in json.loads(result.stdout) if r["from"] == "atlas")
    assert atlas["performatives_allowed"] == ["PROPOSE"]  # builtin ∩ project ∩ extra
    assert atlas["source"] == f"builtin + {first} + {path}"


def test_invalid_contract_exits_2_with_one_line_naming_the_file(project: Path) -> None:
    directory = project / ".eidolons" / "contracts"
    bad = write_contract(directory, valid_contract(edge_origin="implicit", notes=None))
    for args in (["list"], ["show", "forge", "vigil"], ["list", "--json"]):
        result = run_cli(*args, cwd=project)
        assert result.returncode == 2
        assert result.stdout == ""
        assert result.stderr.startswith(f"eidolons: {bad}: ")
        assert "notes" in result.stderr
        assert "Traceback" not in result.stderr
        assert result.stderr.count("\n") == 1


def test_duplicate_key_exits_2(project: Path) -> None:
    directory = project / ".eidolons" / "contracts"
    directory.mkdir()
    text = yaml.safe_dump(valid_contract(), sort_keys=False) + "to: gilgamesh\n"
    (directory / "atlas-to-vigil.yaml").write_text(text, encoding="utf-8")
    result = run_cli("list", cwd=project)
    assert result.returncode == 2
    assert "duplicate key 'to'" in result.stderr


def test_missing_contracts_dir_exits_2(project: Path) -> None:
    result = run_cli("list", "--contracts", "no-such-dir", cwd=project)
    assert result.returncode == 2
    assert result.stderr == "eidolons: no-such-dir: contracts directory does not exist\n"


@pytest.mark.parametrize(
    "args",
    [[], ["frobnicate"], ["show", "forge"], ["list", "--bogus"], ["show", "a", "b", "c"]],
)
def test_usage_errors_exit_2(project: Path, args: list[str]) -> None:
    result = run_cli(*args, cwd=project)
    assert result.returncode == 2
    assert "usage:" in result.stderr
    assert "Traceback" not in result.stderr
