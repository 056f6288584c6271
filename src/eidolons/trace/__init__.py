"""The trace: one append-only log per thread, its stores (JSONL, PostgreSQL), its
indexes, its verification and its views."""
