"""Benchmark of the embedded memory (issue 4, section 4). Not a test.

On a store of N (default 10,000) synthetic hand-offs, generated deterministically from a
seed and ingested one by one through ``LocalMemory.ingest`` (each its own transaction, as a
gate would), it reports:

- ingest throughput (hand-offs per second);
- recall latency p50/p95 of the full ``recall`` (validation, both arms, fusion, packing,
  redaction, access bump) against a plain FTS5 ``MATCH ... ORDER BY rank LIMIT 5`` on the
  same database, twice: with all the query's words OR-ed (the naive query), and with the
  same pruned words recall's BM25 arm uses (so the ratio is the cost of everything else);
- recall@5 of the fused ranking against BM25 alone on a labelled set written here: 26
  queries whose relevant hand-offs are planted among the noise (half natural-language,
  half identifier/path fragments).

Targets (issue 4): recall p95 well under the 205 ms the real CRYSTALIUM reports; fused
recall@5 at least BM25's.

Run: ``python bench/bench_memory.py`` (about a minute on 2 cores); ``--n 2000`` for a quick
look; ``--keep DIR`` to keep the store.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eidolons.memory.local import LocalMemory
from eidolons.memory.ranking import fts_or, word_terms

SENDERS = ["atlas", "spectra", "apivr", "idg", "forge", "vigil", "kupo", "vivi", "gilgamesh"]
KINDS = [
    "scout-report",
    "spec",
    "change-summary",
    "doc-report",
    "reasoning-report",
    "edit-proposal",
]
VERBS = ["parse", "verify", "load", "emit", "route", "build", "merge", "fetch", "index", "flush"]
NOUNS = ["Envelope", "Ledger", "Trace", "Contract", "Payload", "Header", "Token", "Budget"]
NOUNS += ["Route", "Cache", "Session", "Queue"]
SUFFIXES = ["Handler", "Writer", "Reader", "Error", "", "Config"]
DIRS = ["src/eidolons", "services/billing", "lib/net", "pkg/api", "tools/ci", "app/web"]
TOPICS = [
    "integrity check",
    "trace writer",
    "contract loader",
    "payload digest",
    "retry budget",
    "session cache",
    "queue backlog",
    "token refresh",
    "route table",
    "schema migration",
    "release checklist",
    "login flow",
    "error handling",
    "deploy pipeline",
    "billing report",
]
WORDS = (
    "the a of to and in for on with that this is was be by as at from it an are or not we "
    "report change review fix bug test gate handoff receiver sender check pass fail module "
    "function file path update config value error retry cache queue session token budget "
    "deploy release build merge index flush load parse verify route emit ledger trace "
    "contract payload header schema digest integrity cluster node service api client server"
).split()


@dataclass(frozen=True)
class Needle:
    """One labelled fact planted in ``copies`` hand-offs, with two queries for it."""

    objective: str
    body: str
    text_query: str
    ident_query: str
    copies: int = 1


NEEDLES = [
    Needle(
        "Investigate shard rebalancing stalls in the cluster planner.",
        "quarantineOrphanShards() in services/cluster/shard_planner.py never yields.",
        "shard rebalancing stalls",
        "OrphanShards",
        2,
    ),
    Needle(
        "Review the dead-letter replay tool for duplicated deliveries.",
        "The replay loop in tools/dlq/replay_worker.py calls redeliverPoisonBatch twice.",
        "dead-letter replay duplicated deliveries",
        "dlq/replay_worker.py",
    ),
    Needle(
        "Spec the tenant isolation boundary for exported metrics.",
        "Metric labels leak via exportTenantGauges; see lib/metrics/tenant_export.go.",
        "tenant isolation exported metrics",
        "TenantGauges",
        2,
    ),
    Needle(
        "Audit certificate pinning on the mobile login client.",
        "pinnedCertFingerprints is empty in app/mobile/tls_pinning.kt for release builds.",
        "certificate pinning mobile login",
        "tls_pinning.kt",
    ),
    Needle(
        "Summarise the flaky snapshot comparison in the render tests.",
        "assertPixelSnapshotWithin tolerance differs on CI; tests/render/snapshot_cmp.py.",
        "flaky snapshot comparison render tests",
        "PixelSnapshot",
    ),
    Needle(
        "Propose a backoff policy for the webhook fan-out.",
        "webhookFanoutScheduler retries immediately; config key fanout.max_jitter_ms.",
        "backoff policy webhook fan-out",
        "fanout.max_jitter_ms",
        2,
    ),
    Needle(
        "Document the archival sweep for cold object storage.",
        "sweepColdObjects moves blobs to glacier tier us-west-2-archive weekly.",
        "archival sweep cold object storage",
        "us-west-2-archive",
    ),
    Needle(
        "Explain the clock skew failures in token validation.",
        "validateJwtNotBefore rejects tokens when skew exceeds 90s; auth/skew_guard.rs.",
        "clock skew token validation failures",
        "skew_guard.rs",
    ),
    Needle(
        "Check the migration that renames the invoices ledger column.",
        "Migration 0042_rename_invoice_amount_cents alters ledger.invoice_amount.",
        "migration renames invoices ledger column",
        "0042_rename_invoice",
    ),
    Needle(
        "Trace the memory leak in the websocket presence tracker.",
        "PresenceTrackerMap keeps closed sockets; services/realtime/presence.ts line 88.",
        "memory leak websocket presence tracker",
        "realtime/presence.ts",
        2,
    ),
    Needle(
        "Evaluate the feature flag cleanup for the checkout redesign.",
        "Flag checkout_v2_rollout_pct still read by CartSummaryPanel after launch.",
        "feature flag cleanup checkout redesign",
        "checkout_v2_rollout",
    ),
    Needle(
        "Assess the rate limiter bypass through batch endpoints.",
        "POST /v1/batch skips enforceTenantQuota; gateway/ratelimit/batch_bypass.md.",
        "rate limiter bypass batch endpoints",
        "enforceTenantQuota",
    ),
    Needle(
        "Report the search indexer falling behind on large uploads.",
        "IndexLagSeconds reaches 900 when chunkUploadWorker handles >2GB files.",
        "search indexer falling behind large uploads",
        "chunkUploadWorker",
    ),
]


def identifier(rng: random.Random) -> str:
    return rng.choice(VERBS) + rng.choice(NOUNS) + rng.choice(SUFFIXES)


def noise_handoff(rng: random.Random) -> tuple[str, str]:
    topic = rng.choice(TOPICS)
    objective = (
        f"{rng.choice(['Review', 'Audit', 'Fix', 'Spec', 'Document', 'Summarise'])} the "
        f"{topic} {rng.choice(['regression', 'change', 'proposal', 'findings', 'plan'])} "
        f"for the {rng.choice(NOUNS).lower()} {rng.choice(['service', 'module', 'gate'])}."
    )
    lines = [f"# {objective}", ""]
    for _ in range(rng.randint(4, 9)):
        words = [rng.choice(WORDS) for _ in range(rng.randint(10, 22))]
        words.insert(rng.randrange(len(words)), f"`{identifier(rng)}`")
        if rng.random() < 0.5:
            module = f"{rng.choice(NOUNS).lower()}_{rng.choice(VERBS)}.py"
            words.insert(rng.randrange(len(words)), f"{rng.choice(DIRS)}/{module}")
        if rng.random() < 0.3:
            words.append(f"ECL-{rng.randint(100, 9999)}")
        lines.append(" ".join(words) + ".")
    return objective, "\n".join(lines) + "\n"


def envelope_for(rng: random.Random, objective: str, body: str) -> tuple[dict[str, Any], bytes]:
    raw = body.encode("utf-8")
    digest = hashlib.sha256(raw).hexdigest()
    mid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    kind = rng.choice(KINDS)
    return (
        {
            "envelope_version": "2.0",
            "message_id": mid,
            "thread_id": mid,
            "parent_id": None,
            "from": {"eidolon": rng.choice(SENDERS), "version": "1.0.0"},
            "to": {"eidolon": "vigil", "version": "1.9.0"},
            "performative": "PROPOSE",
            "objective": objective,
            "artifact": {
                "kind": kind,
                "schema_version": "1.0",
                "path": f"handoff/{kind}.md",
                "sha256": digest,
                "size_bytes": len(raw),
            },
            "integrity": {"method": "sha256", "value": digest},
            "trace": {
                "ts": "2026-07-01T12:00:00Z",
                "host": "raw",
                "model": "m",
                "tier": "standard",
            },
        },
        raw,
    )


def corpus(n: int, seed: int) -> tuple[list[tuple[dict[str, Any], bytes]], dict[int, list[int]]]:
    """N hand-offs and, per needle, the positions of its planted copies."""
    rng = random.Random(seed)
    planted: dict[int, list[int]] = {}
    slots = rng.sample(range(n), sum(needle.copies for needle in NEEDLES))
    items: list[tuple[str, str] | None] = [None] * n
    cursor = 0
    for index, needle in enumerate(NEEDLES):
        for copy in range(needle.copies):
            position = slots[cursor]
            cursor += 1
            filler = noise_handoff(rng)[1]
            objective = needle.objective if copy == 0 else f"Follow-up: {needle.objective}"
            items[position] = (objective, f"# {objective}\n\n{needle.body}\n\n{filler}")
            planted.setdefault(index, []).append(position)
    handoffs = []
    for item in items:
        objective, body = item if item is not None else noise_handoff(rng)
        handoffs.append(envelope_for(rng, objective, body))
    return handoffs, planted


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark the embedded memory.")
    parser.add_argument("--n", type=int, default=10_000, help="hand-offs to ingest (10000)")
    parser.add_argument("--seed", type=int, default=20260705)
    parser.add_argument("--recalls", type=int, default=400, help="timed recalls (400)")
    parser.add_argument("--keep", type=Path, help="build the store in DIR and keep it")
    args = parser.parse_args(argv)

    workdir = args.keep or Path(tempfile.mkdtemp(prefix="eidolons-bench-"))
    store_dir = workdir / "memory"
    if store_dir.exists():
        shutil.rmtree(store_dir)
    memory = LocalMemory(store_dir, project="bench")
    try:
        handoffs, planted = corpus(args.n, args.seed)
        ids: list[str] = []
        start = time.perf_counter()
        for envelope, raw in handoffs:
            result = memory.ingest(envelope, raw)
            if result.get("status") != "ingested":
                print(f"ingest failed: {result}", file=sys.stderr)
                return 1
            ids.append(result["id"])
        ingest_s = time.perf_counter() - start

        # -- latency ------------------------------------------------------------------
        rng = random.Random(args.seed + 1)
        queries = [needle.text_query for needle in NEEDLES] + [n.ident_query for n in NEEDLES]
        while len(queries) < args.recalls:
            if rng.random() < 0.7:
                queries.append(f"{rng.choice(TOPICS)} {rng.choice(SENDERS)} {rng.choice(KINDS)}")
            else:
                queries.append(identifier(rng)[2:])
        scope = {"project": "bench", "agent_class_visibility": "vigil"}
        layers = ["semantic", "episodic", "procedural"]
        for query in queries[:20]:  # warm the page cache
            memory.recall(scope, query, 5, layers)
        fused_ms = []
        for query in queries:
            t0 = time.perf_counter()
            memory.recall(scope, query, 5, layers)
            fused_ms.append((time.perf_counter() - t0) * 1000)
        plain = sqlite3.connect(memory.path)
        plain_ms: list[float] = []
        pruned_ms: list[float] = []
        for query in queries:
            for matcher, sink in (
                (lambda q: fts_or(word_terms(q)), plain_ms),
                (lambda q: fts_or(LocalMemory._informative(plain, word_terms(q))), pruned_ms),
            ):
                t0 = time.perf_counter()
                match = matcher(query)
                if match:
                    plain.execute(
                        "SELECT rowid FROM crystals_fts WHERE crystals_fts MATCH ?"
                        " ORDER BY rank LIMIT 5",
                        (match,),
                    ).fetchall()
                sink.append((time.perf_counter() - t0) * 1000)
        plain.close()

        # -- quality --------------------------------------------------------------------
        def recall_at_5(arms: tuple[str, ...], which: str) -> tuple[float, list[float]]:
            scores = []
            for index, needle in enumerate(NEEDLES):
                query = needle.text_query if which == "text" else needle.ident_query
                relevant = {ids[position] for position in planted[index]}
                top = memory.rank_ids({}, query, 5, None, arms=arms)
                scores.append(len(relevant & set(top)) / len(relevant))
            return statistics.mean(scores), scores

        rows = []
        for which in ("text", "ident"):
            fused, _ = recall_at_5(("words", "trigram"), which)
            bm25, _ = recall_at_5(("words",), which)
            rows.append((which, fused, bm25))
        fused_all = statistics.mean(
            [recall_at_5(("words", "trigram"), w)[0] for w in ("text", "ident")]
        )
        bm25_all = statistics.mean([recall_at_5(("words",), w)[0] for w in ("text", "ident")])
        stats = memory.stats()
    finally:
        memory.close()
        if args.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)

    p50, p95 = percentile(fused_ms, 0.50), percentile(fused_ms, 0.95)
    q50, q95 = percentile(plain_ms, 0.50), percentile(plain_ms, 0.95)
    print(
        f"eidolons memory benchmark: {args.n} hand-offs, seed {args.seed}, sqlite "
        f"{sqlite3.sqlite_version}, store {stats.get('bytes', 0) / 1e6:.1f} MB"
    )
    print()
    print(f"{'measure':<38}{'value':>14}")
    print("-" * 52)
    print(f"{'ingest throughput (hand-offs/s)':<38}{args.n / ingest_s:>14.0f}")
    print(f"{'recall p50 / p95 (ms), fused':<38}{f'{p50:.2f} / {p95:.2f}':>14}")
    r50, r95 = percentile(pruned_ms, 0.50), percentile(pruned_ms, 0.95)
    print(f"{'plain FTS5 MATCH, all words (ms)':<38}{f'{q50:.2f} / {q95:.2f}':>14}")
    print(f"{'  ratio recall / plain (p50, p95)':<38}{f'{p50 / q50:.1f}x / {p95 / q95:.1f}x':>14}")
    print(f"{'plain FTS5 MATCH, pruned words (ms)':<38}{f'{r50:.2f} / {r95:.2f}':>14}")
    print(f"{'  ratio recall / pruned (p50, p95)':<38}{f'{p50 / r50:.1f}x / {p95 / r95:.1f}x':>14}")
    print(f"{'target: recall p95 < 205 ms':<38}{'met' if p95 < 205 else 'MISSED':>14}")
    print()
    print(f"{'recall@5 (' + str(len(NEEDLES)) + ' needles)':<22}{'fused':>10}{'BM25 only':>12}")
    print("-" * 44)
    for which, fused, bm25 in rows:
        label = "natural-language" if which == "text" else "identifier/path"
        print(f"{label:<22}{fused:>10.3f}{bm25:>12.3f}")
    print(f"{'all ' + str(2 * len(NEEDLES)) + ' queries':<22}{fused_all:>10.3f}{bm25_all:>12.3f}")
    print(f"{'target: fused >= BM25':<22}{'met' if fused_all >= bm25_all else 'MISSED':>22}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
