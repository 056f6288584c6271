"""Benchmark of the embedded memory. Not a test.

On a store of N (default 10,000) synthetic hand-offs, generated deterministically from a
seed, it measures, each against a baseline measured in the same run:

- **ingest**: hand-offs per second through ``LocalMemory.ingest``, one call and one
  committed transaction per hand-off, as a gate ingests (validation, mapping, the
  idempotency look-up, the crystal row and both FTS indexes). Baseline: the same summary
  and excerpt inserted into a bare FTS5 table (``unicode61``, one commit per row) in a
  database of its own, the floor of any searchable store. The two run in alternating
  chunks so that drift hits both alike.
- **recall latency** p50/p95 of the full ``recall`` (validation, word pruning, both arms,
  the scope count when it runs, fusion, packing, redaction, access bump), in R rounds,
  each query followed by the baseline: a bare FTS5 ``MATCH ... ORDER BY rank LIMIT 5`` on
  the same database with the words recall's BM25 arm uses (the pruning itself is not
  timed: the ratio is the cost of everything else), and, informational, with all the
  query's words OR-ed. Wall-clock medians and minimums over the rounds, and the median of
  the calls' own CPU time, which a busy machine inflates least. Two query
  sets: the bench's mix (topic, sender and kind words, or an identifier fragment), and
  the receiver's own query (``build_recall_query``: objective, sender and kind of an
  incoming hand-off) for hand-offs not in the store.
- **recall@5** of the fused ranking against BM25 alone on a labelled set written here: 26
  queries whose relevant hand-offs are planted among the noise (half natural-language,
  half identifier/path fragments).

Targets: recall p95 at most 10 ms at 10,000 records; ingest at least
2,000 hand-offs/s; recall@5 kept (1.000 fused, and fused at least BM25 alone).

Run: ``python bench/bench_memory.py`` (about a minute on 2 cores); ``--n 2000`` for a quick
look; ``--rounds R`` latency rounds (3); ``--keep DIR`` to keep the store.
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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _benchlib import load_note
from eidolons.memory import LAYERS, build_recall_query
from eidolons.memory.local import LocalMemory
from eidolons.memory.rules import Scope, fts_or, word_terms

TARGET_P95_MS = 10.0
TARGET_INGEST_PER_S = 2000.0
LABELLED_RECALL_AT_5 = 1.000  # the fused figure of the labelled set; must not drop

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


def summary_and_text(envelope: dict[str, Any], raw: bytes) -> tuple[str, str]:
    return f"{envelope['artifact']['kind']}: {envelope['objective']}", raw.decode()[:4096]


def bare_fts(path: Path) -> sqlite3.Connection:
    """The ingest baseline: a bare FTS5 table, WAL, one commit per row."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("CREATE VIRTUAL TABLE bare USING fts5 (summary, body, tokenize='unicode61')")
    return conn


def ingest_all(
    memory: LocalMemory, bare: sqlite3.Connection, handoffs: list[tuple[dict[str, Any], bytes]]
) -> tuple[list[str], float, float]:
    """Ingest every hand-off and insert the same into the baseline, in alternating chunks.
    Returns the ids and the seconds spent in each."""
    ids: list[str] = []
    store_s = bare_s = 0.0
    chunk = 500
    for offset in range(0, len(handoffs), chunk):
        part = handoffs[offset : offset + chunk]
        start = time.perf_counter()
        for envelope, raw in part:
            result = memory.ingest(envelope, raw, gated=True)
            if result.get("status") != "ingested":
                raise SystemExit(f"bench: ingest failed: {result}")
            ids.append(result["id"])
        store_s += time.perf_counter() - start
        rows = [summary_and_text(envelope, raw) for envelope, raw in part]
        start = time.perf_counter()
        for row in rows:
            bare.execute("BEGIN IMMEDIATE")
            bare.execute("INSERT INTO bare (summary, body) VALUES (?, ?)", row)
            bare.execute("COMMIT")
        bare_s += time.perf_counter() - start
    return ids, store_s, bare_s


@dataclass
class Latency:
    """Per-round p50/p95 (ms) of one measured call, wall clock and this thread's CPU time
    (the CPU figure is what a busy machine inflates least)."""

    p50: list[float]
    p95: list[float]
    cpu50: list[float]
    cpu95: list[float]

    @classmethod
    def empty(cls) -> Latency:
        return cls([], [], [], [])

    def add(self, wall: list[float], cpu: list[float]) -> None:
        self.p50.append(percentile(wall, 0.50))
        self.p95.append(percentile(wall, 0.95))
        self.cpu50.append(percentile(cpu, 0.50))
        self.cpu95.append(percentile(cpu, 0.95))

    def median(self) -> tuple[float, float]:
        return statistics.median(self.p50), statistics.median(self.p95)

    def best(self) -> tuple[float, float]:
        return min(self.p50), min(self.p95)

    def cpu(self) -> tuple[float, float]:
        return statistics.median(self.cpu50), statistics.median(self.cpu95)


def timed(call: Callable[[], object], wall: list[float], cpu: list[float]) -> None:
    c0, t0 = time.thread_time(), time.perf_counter()
    call()
    wall.append((time.perf_counter() - t0) * 1000)
    cpu.append((time.thread_time() - c0) * 1000)


def time_recalls(
    memory: LocalMemory, queries: list[str], rounds: int
) -> tuple[Latency, Latency, Latency]:
    """Recall, then the pruned-words and all-words bare FTS queries, query by query."""
    scope = {"project": "bench", "agent_class_visibility": "vigil"}
    layers = ["semantic", "episodic", "procedural"]
    plain = sqlite3.connect(memory.path)
    bare_sql = "SELECT rowid FROM crystals_fts WHERE crystals_fts MATCH ? ORDER BY rank LIMIT 5"

    def bare(match: str) -> Callable[[], object]:
        return lambda: plain.execute(bare_sql, (match,)).fetchall() if match else None

    # the baselines' MATCH strings are built outside the timed calls
    pruned_match = [fts_or(LocalMemory._informative(plain, word_terms(q))) for q in queries]
    every_match = [fts_or(word_terms(q)) for q in queries]
    for query, match in zip(queries[:20], every_match, strict=False):  # warm the caches
        memory.recall(scope, query, 5, layers)
        bare(match)()
    full, pruned, every = Latency.empty(), Latency.empty(), Latency.empty()
    try:
        for _ in range(rounds):
            samples: list[tuple[list[float], list[float]]] = [([], []) for _ in range(3)]
            for query, p_match, e_match in zip(queries, pruned_match, every_match, strict=True):
                timed(lambda q=query: memory.recall(scope, q, 5, layers), *samples[0])
                timed(bare(p_match), *samples[1])
                timed(bare(e_match), *samples[2])
            for latency, (wall, cpu) in zip((full, pruned, every), samples, strict=True):
                latency.add(wall, cpu)
    finally:
        plain.close()
    return full, pruned, every


def top_5(memory: LocalMemory, query: str, arms: tuple[str, ...]) -> list[str]:
    """The first five ids of recall (both arms), or of its ranking with ``arms`` only."""
    if arms == ("words", "trigram"):
        return [record["id"] for record in memory.recall({}, query, 5)["records"]]
    conn = memory._connection(create=False)
    assert conn is not None
    fused, _ = memory._rank(conn, Scope(memory.project, None, LAYERS), query, 5, arms=arms)
    return [ident for ident, _ in fused[:5]]


def bench_queries(rng: random.Random, count: int) -> list[str]:
    queries = [needle.text_query for needle in NEEDLES] + [n.ident_query for n in NEEDLES]
    while len(queries) < count:
        if rng.random() < 0.7:
            queries.append(f"{rng.choice(TOPICS)} {rng.choice(SENDERS)} {rng.choice(KINDS)}")
        else:
            queries.append(identifier(rng)[2:])
    return queries


def receiver_queries(rng: random.Random, count: int) -> list[str]:
    """What ``recall_before`` asks for hand-offs that are not in the store."""
    queries = []
    for _ in range(count):
        objective, body = noise_handoff(rng)
        queries.append(build_recall_query(envelope_for(rng, objective, body)[0]))
    return queries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark the embedded memory.")
    parser.add_argument("--n", type=int, default=10_000, help="hand-offs to ingest (10000)")
    parser.add_argument("--seed", type=int, default=20260705)
    parser.add_argument("--recalls", type=int, default=400, help="queries per round (400)")
    parser.add_argument("--rounds", type=int, default=3, help="latency rounds (3)")
    parser.add_argument("--keep", type=Path, help="build the store in DIR and keep it")
    args = parser.parse_args(argv)

    print(f"before: {load_note()}")
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="eidolons-bench-"))
    store_dir = workdir / "memory"
    for stale in (store_dir, workdir / "bare"):
        if stale.exists():
            shutil.rmtree(stale)
    (workdir / "bare").mkdir(parents=True)
    memory = LocalMemory(store_dir, project="bench")
    bare = bare_fts(workdir / "bare" / "bare.sqlite3")
    try:
        handoffs, planted = corpus(args.n, args.seed)
        ids, ingest_s, bare_s = ingest_all(memory, bare, handoffs)
        bare.close()

        rng = random.Random(args.seed + 1)
        mix = time_recalls(memory, bench_queries(rng, args.recalls), args.rounds)
        receiver = time_recalls(memory, receiver_queries(rng, args.recalls // 2), args.rounds)

        def recall_at_5(arms: tuple[str, ...], which: str) -> float:
            scores = []
            for index, needle in enumerate(NEEDLES):
                query = needle.text_query if which == "text" else needle.ident_query
                relevant = {ids[position] for position in planted[index]}
                top = top_5(memory, query, arms)
                scores.append(len(relevant & set(top)) / len(relevant))
            return statistics.mean(scores)

        quality = {
            which: (recall_at_5(("words", "trigram"), which), recall_at_5(("words",), which))
            for which in ("text", "ident")
        }
        stats = memory.stats()
    finally:
        memory.close()
        if args.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)

    print(
        f"eidolons memory benchmark: {args.n} hand-offs, seed {args.seed}, sqlite "
        f"{sqlite3.sqlite_version}, store {stats.get('bytes', 0) / 1e6:.1f} MB, "
        f"schema {stats.get('schema_version')}"
    )
    print()
    rate, bare_rate = args.n / ingest_s, args.n / bare_s
    print(f"{'ingest (one transaction each)':<44}{'hand-offs/s':>14}")
    print("-" * 58)
    print(f"{'LocalMemory.ingest':<44}{rate:>14.0f}")
    print(f"{'baseline: bare FTS5 insert':<44}{bare_rate:>14.0f}")
    print(f"{'  ratio ingest / baseline':<44}{rate / bare_rate:>13.2f}x")
    verdict = "met" if rate >= TARGET_INGEST_PER_S else "MISSED"
    print(f"{f'target: >= {TARGET_INGEST_PER_S:,.0f}/s':<44}{verdict:>14}")
    print()
    rounds = f"{args.rounds} round{'s' if args.rounds != 1 else ''}"
    print(
        f"{'recall latency (ms), ' + rounds:<36}{'median p50/p95':>16}{'min p50/p95':>14}"
        f"{'CPU p50/p95':>16}"
    )
    print("-" * 82)
    verdicts = []
    for short, title, (full, pruned, every) in (
        ("bench mix", f"bench mix ({args.recalls} queries)", mix),
        ("receiver queries", f"receiver queries ({args.recalls // 2})", receiver),
    ):
        print(title)
        for label, latency in (
            ("  recall (fused, full call)", full),
            ("  baseline: FTS5 MATCH, pruned words", pruned),
            ("  FTS5 MATCH, all words", every),
        ):
            (m50, m95), (b50, b95), (c50, c95) = latency.median(), latency.best(), latency.cpu()
            print(
                f"{label:<36}{f'{m50:.2f} / {m95:.2f}':>16}{f'{b50:.2f} / {b95:.2f}':>14}"
                f"{f'{c50:.2f} / {c95:.2f}':>16}"
            )
        (m50, m95), (q50, q95) = full.median(), pruned.median()
        (c50, c95), (d50, d95) = full.cpu(), pruned.cpu()
        print(
            f"{'  ratio recall / baseline':<36}{f'{m50 / q50:.1f}x / {m95 / q95:.1f}x':>16}"
            f"{'':>14}{f'{c50 / d50:.1f}x / {c95 / d95:.1f}x':>16}"
        )
        verdicts.append((short, "met" if m95 <= TARGET_P95_MS else "MISSED"))
    for short, verdict in verdicts:
        label = f"target: p95 <= {TARGET_P95_MS:.0f} ms, {short} (median of rounds)"
        print(f"{label:<52}{verdict:>14}")
    print()
    print(f"{'recall@5 (' + str(len(NEEDLES)) + ' needles)':<22}{'fused':>10}{'BM25 only':>12}")
    print("-" * 44)
    for which, (fused, bm25) in quality.items():
        label = "natural-language" if which == "text" else "identifier/path"
        print(f"{label:<22}{fused:>10.3f}{bm25:>12.3f}")
    fused_all = statistics.mean(fused for fused, _ in quality.values())
    bm25_all = statistics.mean(bm25 for _, bm25 in quality.values())
    print(f"{'all ' + str(2 * len(NEEDLES)) + ' queries':<22}{fused_all:>10.3f}{bm25_all:>12.3f}")
    kept = fused_all >= LABELLED_RECALL_AT_5 and fused_all >= bm25_all
    label = f"target: fused >= {LABELLED_RECALL_AT_5:.3f}, >= BM25"
    print(f"{label:<32}{'met' if kept else 'MISSED':>12}")
    print()
    print(f"after: {load_note()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
