#!/usr/bin/env python3
"""Compile the shipped contract YAML files into ``src/eidolons/data/contracts/index.json``.

Why: the receiver gate loads the builtin set on every start, and parsing 65 YAML files
(plus ``import yaml``) costs more than reading one JSON file. The YAML files stay the
source of truth that people edit and review; this script is the only writer of the index.

Rules:

- Every file is loaded with ``eidolons.io.contracts.load_contract_dir``, i.e. with exactly the
  checks a project's own contract directory gets (schema, unique kinds, file name,
  duplicate keys, no links), so an invalid shipped contract cannot reach the index.
- Each shipped file must already be in canonical form (``Contract.to_dict()`` equals the
  parsed YAML), so the index and the YAML say the same thing field for field.
- The index records each file's SHA-256; ``tests/contracts/test_contracts_index.py``
  rebuilds the index and fails if it differs, i.e. if a YAML file was edited without
  running this script.
- Output is deterministic: edges sorted by key, two-space indent, ASCII, final newline.

Usage: ``python scripts/build_contracts.py [--check]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CONTRACTS_DIR = REPO / "src" / "eidolons" / "data" / "contracts"
INDEX = CONTRACTS_DIR / "index.json"


def build_index(contracts_dir: Path = CONTRACTS_DIR) -> str:
    """Return the text of ``index.json`` for the YAML files in ``contracts_dir``."""
    import yaml

    from eidolons.io.contracts import INDEX_FORMAT, edge_key, load_contract_dir

    entries: dict[str, dict[str, object]] = {}
    for contract in load_contract_dir(contracts_dir):
        path = contracts_dir / contract.file_name
        data = path.read_bytes()
        canonical = contract.to_dict()
        if yaml.safe_load(data) != canonical:
            raise SystemExit(
                f"{path}: not in canonical form; write it as Contract.to_dict() would "
                "(all artifact fields, context_delta with both keys)"
            )
        entries[edge_key(contract.from_, contract.to)] = {
            "file": contract.file_name,
            "sha256": hashlib.sha256(data).hexdigest(),
            "contract": canonical,
        }
    index = {
        "format": INDEX_FORMAT,
        "generated_by": "scripts/build_contracts.py",
        "contracts": dict(sorted(entries.items())),
    }
    return json.dumps(index, indent=2, ensure_ascii=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if index.json is stale")
    args = parser.parse_args(argv)
    text = build_index()
    current = INDEX.read_text(encoding="utf-8") if INDEX.exists() else None
    if args.check:
        if current != text:
            print(f"{INDEX.relative_to(REPO)} is out of date; run {__file__}", file=sys.stderr)
            return 1
        return 0
    if current != text:
        INDEX.write_text(text, encoding="utf-8")
        edges = len(json.loads(text)["contracts"])
        print(f"wrote {INDEX.relative_to(REPO)} ({edges} edges)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
