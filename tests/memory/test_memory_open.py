"""What opening the local store relies on (ADR 0021): the C module ``_sqlite3`` is the very
module ``sqlite3`` re-exports, and the store's clock spells time as ``datetime`` does."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

from eidolons.memory import local, rules


def test_the_store_binding_is_the_public_sqlite3() -> None:
    bound = vars(local)["sqlite3"]  # the module the store imports as sqlite3 (not re-exported)
    for name in ("connect", "Connection", "Cursor", "Error", "OperationalError"):
        assert getattr(bound, name) is getattr(sqlite3, name), name
    assert bound.sqlite_version == sqlite3.sqlite_version


def test_now_is_datetime_isoformat_to_the_second() -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    now = rules._now()
    after = datetime.now(UTC).replace(microsecond=0)
    spelled = {t.isoformat(timespec="seconds").replace("+00:00", "Z") for t in (before, after)}
    assert now in spelled
    assert rules._parse_ts(now) == now


def test_the_hand_off_key_is_the_sha256_of_the_json_dumps_of_its_parts() -> None:
    # the key (ADR 0021) is written by ecl.grammar, not json: the same text, so the same key
    # for every store already holding one
    import hashlib
    import json

    for objective in ("Scout the repo.", 'é ü \u2028 \ud800 "q" \\ \x00', "", "日本語"):
        envelope = {
            "from": {"eidolon": "Atlas"},
            "to": {"eidolon": "VIGIL"},
            "performative": "PROPOSE",
            "artifact": {"kind": "scout-report", "sha256": "ab" * 32},
            "objective": objective,
        }
        parts = ["atlas", "vigil", "PROPOSE", "scout-report", objective, "ab" * 32]
        expected = hashlib.sha256(json.dumps(parts, ensure_ascii=True).encode()).hexdigest()
        assert rules.handoff_key(envelope) == expected, objective
