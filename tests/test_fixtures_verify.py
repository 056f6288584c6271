"""The twelve upstream conformance fixtures through the orchestrator gate, read in place.

Every payload verifies ``pass`` except ``missing-integrity`` (a deliberately wrong tag:
``tamper``); the HMAC fixture passes with the bats key and is ``no_key`` without it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from eidolons.ecl.envelope import parse_envelope
from eidolons.ecl.integrity import digest_bytes
from tests.conftest import (
    FIXTURE_HMAC_KEY,
    FIXTURE_NAMES,
    FIXTURES,
    clean_env,
    needs_fixtures,
    run_cli,
)

pytestmark = needs_fixtures

EXPECTED = {name: "pass" for name in FIXTURE_NAMES}
EXPECTED["missing-integrity"] = "tamper"
EXPECTED["conformant-high-trust-v2.1"] = "no_key"


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_fixture_verdict(name: str, tmp_path: Path) -> None:
    envelope = FIXTURES / name / "scout-report.envelope.json"
    r = run_cli("verify-envelope", envelope, "--block", "--json", "--root", tmp_path, cwd=tmp_path)
    assert r.json()["verdict"] == EXPECTED[name], r.out
    assert r.code == (0 if EXPECTED[name] == "pass" else 3)


def test_hmac_fixture_passes_with_the_key(tmp_path: Path) -> None:
    envelope = FIXTURES / "conformant-high-trust-v2.1" / "scout-report.envelope.json"
    r = run_cli(
        "verify-envelope",
        envelope,
        "--block",
        "--json",
        "--root",
        tmp_path,
        cwd=tmp_path,
        env=clean_env(ECL_HMAC_KEY=FIXTURE_HMAC_KEY),
    )
    assert r.code == 0 and r.json()["verdict"] == "pass"
    assert r.json()["actual"].startswith("305335")
    assert r.json()["payload_sha256"].startswith("5f17ef")


def test_hmac_vector_in_the_pure_core() -> None:
    folder = FIXTURES / "conformant-high-trust-v2.1"
    env = parse_envelope((folder / "scout-report.envelope.json").read_bytes())
    d = digest_bytes(
        (folder / "scout-report.md").read_bytes(), "hmac-sha256", FIXTURE_HMAC_KEY.encode()
    )
    assert d.value == env.integrity_value
    assert d.sha256 == env.artifact["sha256"]


def test_v1_compat_fixture_non_uuid_ids_have_no_warnings(tmp_path: Path) -> None:
    envelope = FIXTURES / "v1-on-v2-compat" / "scout-report.envelope.json"
    r = run_cli(
        "verify-envelope",
        envelope,
        "--block",
        "--strict",
        "--json",
        "--root",
        tmp_path,
        cwd=tmp_path,
    )
    assert r.code == 0 and r.json()["warnings"] == []
