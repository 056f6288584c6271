"""Local ingest: the server's validation and reason codes, idempotency, trust tiers, the
field mapping and the excerpt bound, and several processes sharing one store."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from eidolons.ecl.envelope import REQUIRED_FIELDS
from eidolons.memory import (
    INGEST_BAD_ENVELOPE,
    INGEST_PAYLOAD_HASH_MISMATCH,
    INPUT_VALIDATION,
    UNSUPPORTED_ENVELOPE_VERSION,
)
from eidolons.memory.local import LocalMemory
from eidolons.memory.rules import LocalLimits

from .conftest import PROJECT, make_handoff, mutate


def count(store: LocalMemory) -> int:
    stats = store.stats()
    return int(stats.get("crystals", 0))


def payload_json(store: LocalMemory, ident: str) -> dict[str, Any]:
    with sqlite3.connect(store.path) as conn:
        row = conn.execute("SELECT payload_json FROM crystals WHERE id = ?", (ident,)).fetchone()
    return dict(json.loads(row[0]))


# -- refusals --------------------------------------------------------------------------

ENVELOPE, PAYLOAD = make_handoff()
HEX = "ab" * 32

REFUSALS: list[tuple[str, Any, str]] = [
    ("envelope_is_a_string", "not an envelope", INGEST_BAD_ENVELOPE),
    ("envelope_is_a_list", [ENVELOPE], INGEST_BAD_ENVELOPE),
    (
        "version_missing",
        mutate(ENVELOPE, "envelope_version", delete=True),
        UNSUPPORTED_ENVELOPE_VERSION,
    ),
    ("version_3", mutate(ENVELOPE, "envelope_version", "3.0"), UNSUPPORTED_ENVELOPE_VERSION),
    ("version_bare_major", mutate(ENVELOPE, "envelope_version", "2"), UNSUPPORTED_ENVELOPE_VERSION),
    ("version_number", mutate(ENVELOPE, "envelope_version", 2.0), UNSUPPORTED_ENVELOPE_VERSION),
    (
        "version_v_prefix",
        mutate(ENVELOPE, "envelope_version", "v2.0"),
        UNSUPPORTED_ENVELOPE_VERSION,
    ),
    *[
        (f"missing_{name}", mutate(ENVELOPE, name, delete=True), INGEST_BAD_ENVELOPE)
        for name in REQUIRED_FIELDS
        if name != "envelope_version"
    ],
    ("null_objective", mutate(ENVELOPE, "objective", None), INGEST_BAD_ENVELOPE),
    ("null_trace", mutate(ENVELOPE, "trace", None), INGEST_BAD_ENVELOPE),
    ("artifact_not_object", mutate(ENVELOPE, "artifact", "x"), INGEST_BAD_ENVELOPE),
    *[
        (
            f"artifact_missing_{sub}",
            mutate(ENVELOPE, f"artifact.{sub}", delete=True),
            INGEST_BAD_ENVELOPE,
        )
        for sub in ("kind", "schema_version", "path", "sha256", "size_bytes")
    ],
    (
        "integrity_missing_method",
        mutate(ENVELOPE, "integrity.method", delete=True),
        INGEST_BAD_ENVELOPE,
    ),
    (
        "integrity_missing_value",
        mutate(ENVELOPE, "integrity.value", delete=True),
        INGEST_BAD_ENVELOPE,
    ),
    ("from_missing_version", mutate(ENVELOPE, "from.version", delete=True), INGEST_BAD_ENVELOPE),
    ("to_missing_eidolon", mutate(ENVELOPE, "to.eidolon", delete=True), INGEST_BAD_ENVELOPE),
    ("message_id_not_string", mutate(ENVELOPE, "message_id", 7), INGEST_BAD_ENVELOPE),
    ("integrity_value_differs", mutate(ENVELOPE, "integrity.value", HEX), INGEST_BAD_ENVELOPE),
    (
        "integrity_method_unknown",
        mutate(ENVELOPE, "integrity.method", "ed25519"),
        INGEST_BAD_ENVELOPE,
    ),
    (
        "hmac_value_not_hex",
        mutate(mutate(ENVELOPE, "integrity.method", "hmac-sha256"), "integrity.value", "XYZ"),
        INGEST_BAD_ENVELOPE,
    ),
    # version is checked before the fields, the envelope before the payload digest
    ("bad_version_and_fields", {"envelope_version": "9.9"}, UNSUPPORTED_ENVELOPE_VERSION),
    (
        "bad_envelope_and_digest",
        mutate(ENVELOPE, "integrity.value", HEX),
        INGEST_BAD_ENVELOPE,
    ),
]


@pytest.mark.parametrize(
    ("envelope", "code"), [(env, code) for _, env, code in REFUSALS], ids=[r[0] for r in REFUSALS]
)
def test_refused_envelope_carries_reason_code_and_stores_nothing(
    store: LocalMemory, envelope: Any, code: str
) -> None:
    result = store.ingest(envelope, PAYLOAD)
    assert result["error"] == code
    assert result["message"]
    assert result["backend"] == "local"
    assert "id" not in result
    assert not store.path.exists()  # a refusal does not even create the store


def test_payload_digest_mismatch_bytes(store: LocalMemory) -> None:
    result = store.ingest(ENVELOPE, PAYLOAD + b"tampered")
    assert result["error"] == INGEST_PAYLOAD_HASH_MISMATCH
    assert count(store) == 0


def test_payload_digest_mismatch_string(store: LocalMemory) -> None:
    result = store.ingest(ENVELOPE, PAYLOAD.decode() + " ")
    assert result["error"] == INGEST_PAYLOAD_HASH_MISMATCH


def test_string_payload_is_hashed_as_utf8(store: LocalMemory) -> None:
    envelope, raw = make_handoff(payload="Café — naïve ünïcode\n")
    assert store.ingest(envelope, raw.decode("utf-8"))["status"] == "ingested"


def test_base64_string_payload_is_hashed_as_the_transport_string(store: LocalMemory) -> None:
    # The server hashes the raw transport string, before base64 decoding: reproduced.
    import base64

    envelope, raw = make_handoff(payload=b"\x00\xffbinary")
    result = store.ingest(envelope, base64.b64encode(raw).decode(), payload_encoding="base64")
    assert result["error"] == INGEST_PAYLOAD_HASH_MISMATCH


def test_object_payload_skips_the_digest_binding(store: LocalMemory) -> None:
    result = store.ingest(ENVELOPE, {"anything": "goes"})
    assert result["status"] == "ingested"
    assert payload_json(store, result["id"])["encoding_context"]["native_artifact"] == {
        "anything": "goes"
    }


@pytest.mark.parametrize(
    ("payload", "encoding"), [(None, "utf8"), (42, "utf8"), (PAYLOAD, "rot13")]
)
def test_bad_arguments_are_input_validation_errors(
    store: LocalMemory, payload: Any, encoding: str
) -> None:
    result = store.ingest(ENVELOPE, payload, payload_encoding=encoding)
    assert result["error"] == INPUT_VALIDATION
    assert result["message"].startswith("Input validation error: ")


@pytest.mark.parametrize("version", ["1.0", "1.0.3", "1.2", "2.0", "2.1", "2.1.7"])
def test_supported_versions(store: LocalMemory, version: str) -> None:
    envelope, raw = make_handoff(version=version)
    result = store.ingest(envelope, raw)
    assert result["status"] == "ingested"
    assert result["envelope_version"] == version
    assert f"env:{version}" in payload_json(store, result["id"])["tags"]


def test_null_parent_id_is_allowed(store: LocalMemory) -> None:
    assert store.ingest(mutate(ENVELOPE, "parent_id", None), PAYLOAD)["status"] == "ingested"


def test_hmac_envelope_is_accepted(store: LocalMemory) -> None:
    # integrity.value is the HMAC; artifact.sha256 stays the plain digest (spec §6).
    envelope = mutate(mutate(ENVELOPE, "integrity.method", "hmac-sha256"), "integrity.value", HEX)
    assert store.ingest(envelope, PAYLOAD)["status"] == "ingested"


# -- success shape, idempotency --------------------------------------------------------


def test_success_shape(store: LocalMemory) -> None:
    result = store.ingest(ENVELOPE, PAYLOAD)
    assert list(result) == [
        "status",
        "id",
        "layer",
        "trust_tier",
        "validation_state",
        "source_eidolon",
        "artifact_kind",
        "envelope_version",
        "commit_status",
        "scope_normalized",
        "backend",
    ]
    assert result["status"] == "ingested"
    assert result["layer"] == "episodic"
    assert result["source_eidolon"] == "atlas"
    assert result["artifact_kind"] == "scout-report"
    assert result["commit_status"] == "committed"
    assert result["scope_normalized"] is True


def test_repeat_ingest_is_idempotent(store: LocalMemory) -> None:
    first = store.ingest(ENVELOPE, PAYLOAD)
    second = store.ingest(ENVELOPE, PAYLOAD)
    assert second["id"] == first["id"]
    assert (first["commit_status"], second["commit_status"]) == ("committed", "merged")
    assert count(store) == 1


def test_idempotent_across_store_objects(tmp_path: Path) -> None:
    first = LocalMemory(tmp_path / "s", project=PROJECT)
    other = LocalMemory(tmp_path / "s", project=PROJECT)
    try:
        a = first.ingest(ENVELOPE, PAYLOAD)
        b = other.ingest(ENVELOPE, PAYLOAD)
        assert a["id"] == b["id"]
        assert b["commit_status"] == "merged"
    finally:
        first.close()
        other.close()


def test_same_message_id_new_payload_is_a_new_crystal(store: LocalMemory) -> None:
    envelope2, raw2 = make_handoff(payload=b"second version", message_id=ENVELOPE["message_id"])
    a = store.ingest(ENVELOPE, PAYLOAD)
    b = store.ingest(envelope2, raw2)
    assert a["id"] != b["id"]
    assert b["commit_status"] == "committed"
    assert count(store) == 2


def test_a_re_emitted_hand_off_is_not_ingested_twice(store: LocalMemory) -> None:
    # same bytes, sender, receiver, act, kind and objective; a new message id and thread
    other, raw = make_handoff(payload=PAYLOAD)
    assert other["message_id"] != ENVELOPE["message_id"]
    first, again = store.ingest(ENVELOPE, PAYLOAD), store.ingest(other, raw)
    assert again["id"] == first["id"] and again["commit_status"] == "merged"
    assert count(store) == 1


@pytest.mark.parametrize(
    "change",
    [{"objective": "Another objective."}, {"kind": "spec"}, {"sender": "spectra"}],
)
def test_same_payload_as_another_hand_off_is_a_new_crystal(
    store: LocalMemory, change: dict[str, str]
) -> None:
    other, raw = make_handoff(payload=PAYLOAD, **change)
    assert store.ingest(ENVELOPE, PAYLOAD)["id"] != store.ingest(other, raw)["id"]
    assert count(store) == 2


def test_gated_ingest_is_validated_and_upgrades_an_earlier_unverified_one(
    store: LocalMemory,
) -> None:
    plain = store.ingest(ENVELOPE, PAYLOAD)
    assert (plain["trust_tier"], plain["validation_state"]) == ("T1", "unverified")
    gated = store.ingest(ENVELOPE, PAYLOAD, gated=True)
    assert (gated["id"], gated["validation_state"]) == (plain["id"], "validated")
    assert store.ingest(ENVELOPE, PAYLOAD)["validation_state"] == "validated"  # never lowered
    unknown, raw = make_handoff(sender="stranger", payload=b"x")
    assert store.ingest(unknown, raw, gated=True)["validation_state"] == "quarantined"


# -- trust tiers -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sender", "trace_tier", "tier", "state"),
    [
        ("atlas", "standard", "T1", "unverified"),
        ("ATLAS", "standard", "T1", "unverified"),
        ("vigil", "trance", "T1", "unverified"),
        ("atlas", "T3", "T3", "quarantined"),
        ("atlas", "T2", "T2", "unverified"),
        ("atlas", "T0", "T1", "unverified"),  # a declared tier never raises trust
        ("host", "standard", "T0", "unverified"),
        ("cortex", "T2", "T2", "unverified"),
        ("host-llm", "t1", "T1", "unverified"),
        ("mallory", "standard", "T3", "quarantined"),
        ("mallory", "T0", "T3", "quarantined"),
        ("human", "standard", "T3", "quarantined"),
        ("gilgamesh", "standard", "T3", "quarantined"),  # not in the server's roster revision
    ],
)
def test_trust_tier_is_min_trust(
    store: LocalMemory, sender: str, trace_tier: str, tier: str, state: str
) -> None:
    envelope, raw = make_handoff(sender=sender, tier=trace_tier)
    result = store.ingest(envelope, raw)
    assert (result["trust_tier"], result["validation_state"]) == (tier, state)
    source = payload_json(store, result["id"])["provenance"]["source"]
    assert source == {"T0": "human", "T1": "verified_agent"}.get(tier, "unverified_agent")


# -- mapping and bounds ----------------------------------------------------------------


def test_field_mapping(store: LocalMemory) -> None:
    envelope, raw = make_handoff(objective="Hand over the trace writer spec.", kind="spec")
    result = store.ingest(envelope, raw)
    stored = payload_json(store, result["id"])
    assert stored["summary"] == "spec: Hand over the trace writer spec."
    assert stored["scope"] == {
        "project": PROJECT,
        "project_raw": envelope["thread_id"],
        "sensitivity_tag": "internal",
    }
    assert stored["provenance"]["author_agent"] == "atlas"
    assert stored["provenance"]["task_id"] == envelope["thread_id"]
    assert stored["provenance"]["created_at"] == "2026-07-01T12:00:00Z"
    assert stored["tags"] == ["spec", "from:atlas", "env:2.0"]
    context = stored["encoding_context"]
    assert context["native_artifact"] == raw.decode()
    assert context["source_message_id"] == envelope["message_id"]
    assert context["source_performative"] == "PROPOSE"
    with sqlite3.connect(store.path) as conn:
        row = conn.execute(
            "SELECT content_ref, agent_class_visibility FROM crystals WHERE id = ?",
            (result["id"],),
        ).fetchone()
    payload_text = json.dumps(stored, ensure_ascii=False, sort_keys=True)
    assert row[0] == hashlib.sha256(payload_text.encode()).hexdigest()
    assert row[1] is None  # visible to every agent class, as on the server


def test_empty_objective_summary_is_the_kind(store: LocalMemory) -> None:
    envelope, raw = make_handoff(objective="")
    assert payload_json(store, store.ingest(envelope, raw)["id"])["summary"] == "scout-report"


def test_summary_is_capped(tmp_path: Path) -> None:
    memory = LocalMemory(tmp_path / "s", project=PROJECT, limits=LocalLimits(summary_chars=20))
    envelope, raw = make_handoff(objective="x" * 100)
    result = memory.ingest(envelope, raw)
    assert len(payload_json(memory, result["id"])["summary"]) == 20
    memory.close()


def test_only_the_bounded_excerpt_is_searchable(store: LocalMemory) -> None:
    limit = store.limits.excerpt_chars
    body = "early zebraword " + "filler " * (limit // 7) + " latequagga"
    assert body.index("latequagga") > limit
    envelope, raw = make_handoff(objective="A report.", payload=body)
    store.ingest(envelope, raw)
    assert store.recall({}, "zebraword")["records"]
    assert store.recall({}, "latequagga")["records"] == []


def test_binary_payload_is_kept_as_base64(store: LocalMemory) -> None:
    envelope, raw = make_handoff(payload=b"\x89PNG\x00\xff\xfe")
    result = store.ingest(envelope, raw)
    context = payload_json(store, result["id"])["encoding_context"]
    assert context["native_artifact_encoding"] == "base64"


def test_large_payload_is_not_kept_verbatim(tmp_path: Path) -> None:
    memory = LocalMemory(tmp_path / "s", project=PROJECT, limits=LocalLimits(native_max_bytes=100))
    envelope, raw = make_handoff(payload=b"y" * 101)
    result = memory.ingest(envelope, raw)
    context = payload_json(memory, result["id"])["encoding_context"]
    assert context["native_artifact"] is None
    assert "native_artifact_omitted" in context
    memory.close()


def test_store_is_created_lazily_in_wal_mode(tmp_path: Path) -> None:
    memory = LocalMemory(tmp_path / "deep" / "store", project=PROJECT)
    memory.recall({}, "anything")
    memory.stats()
    assert not (tmp_path / "deep").exists()  # reads never create the store
    memory.ingest(ENVELOPE, PAYLOAD)
    with sqlite3.connect(memory.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    memory.close()


def test_unwritable_store_is_a_skip_not_an_exception(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    memory = LocalMemory(blocker / "store", project=PROJECT)
    result = memory.ingest(ENVELOPE, PAYLOAD)
    assert result["status"] == "skipped"
    assert result["backend"] == "unavailable"


# -- several processes on one store ----------------------------------------------------


def _worker(store_dir: str, worker: int, n: int) -> list[str]:
    memory = LocalMemory(Path(store_dir), project=PROJECT)
    ids = []
    for i in range(n):
        envelope, raw = make_handoff(
            objective=f"Worker {worker} hand-off {i}.", payload=f"w{worker} i{i}"
        )
        result = memory.ingest(envelope, raw)
        assert result["status"] == "ingested", result
        ids.append(result["id"])
        assert "error" not in memory.recall({}, f"worker {worker}")
    memory.close()
    return ids


def test_several_processes_share_one_store(tmp_path: Path) -> None:
    store_dir = tmp_path / "shared"
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(4) as pool:
        results = pool.starmap(_worker, [(str(store_dir), w, 25) for w in range(4)])
    ids = [ident for batch in results for ident in batch]
    assert len(set(ids)) == 100
    memory = LocalMemory(store_dir, project=PROJECT)
    assert count(memory) == 100
    memory.close()
