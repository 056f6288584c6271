"""``eidolons contracts list|show``: the effective contract set, read from the gates'
sources, so what is shown is what a gate enforces; an invalid set is refused (fail closed).
Exit codes: 0 ok; 1 ``show`` found no contract for the edge; 2 usage or an invalid set."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from eidolons.cli.main import contract_set as load_contract_set
from eidolons.cli.main import error, print_json, project_root

if TYPE_CHECKING:
    from eidolons.io.contracts import Contract, ContractSet

HELP = "List and show the hand-off contracts in force (builtin, project, --contracts)."

EXIT_OK = 0
EXIT_NOT_FOUND = 1
EXIT_USAGE = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``list`` and ``show`` actions, each with the shared source options."""
    from eidolons.cli.parser import Parser

    common = Parser(add_help=False)
    common.add_argument("--json", action="store_true", help="machine-readable output")
    common.add_argument(
        "--root",
        metavar="DIR",
        help="project root (default: $EIDOLONS_ROOT, else the nearest ancestor of the "
        "current directory holding .eidolons/ or .git, else the current directory)",
    )
    common.add_argument(
        "--contracts",
        metavar="DIR",
        action="append",
        default=[],
        help="extra contract directory, overriding earlier sources per edge (repeatable)",
    )
    actions = parser.add_subparsers(dest="contracts_action", metavar="ACTION", required=True)
    list_parser = actions.add_parser(
        "list",
        parents=[common],
        help="one line per edge: from -> to, performatives, kinds, budget, origin, source",
    )
    list_parser.add_argument("--to", metavar="RECEIVER", help="only edges into RECEIVER")
    show_parser = actions.add_parser("show", parents=[common], help="one contract in full")
    show_parser.add_argument("from_", metavar="FROM", help="sender slug")
    show_parser.add_argument("to", metavar="TO", help="receiver slug")


def run(args: argparse.Namespace) -> int:
    """Load the effective set and print it; errors go to stderr as ``eidolons: ...``."""
    root = project_root(args.root)
    if isinstance(root, int):
        return root
    contract_set = load_contract_set(root, args.contracts)
    if isinstance(contract_set, int):
        return contract_set
    if args.contracts_action == "list":
        return _list(contract_set, args.to, as_json=args.json)
    return _show(contract_set, args.from_, args.to, as_json=args.json)


#: Fields printed but not enforced by the receiver gate (ADR 0008): shown as advisory.
ADVISORY = (
    "edge_origin",
    "notes",
    "artifacts[].schema_ref",
    "artifacts[].evidence_anchor_required",
)
ADVISORY_MARK = "(advisory: not checked by the gates)"


def _json_record(contract: Contract) -> dict[str, Any]:
    record = contract.to_dict()
    record["source"] = contract.source
    record["sources"] = list(contract.sources)
    record["advisory"] = list(ADVISORY)
    return record


def _list(contract_set: ContractSet, to: str | None, *, as_json: bool) -> int:
    contracts = contract_set.edges() if to is None else contract_set.inbound(to)
    if as_json:
        print_json([_json_record(c) for c in contracts])
        return EXIT_OK
    rows = [
        (
            f"{c.from_} -> {c.to}",
            ",".join(c.performatives_allowed),
            ",".join(c.kinds),
            "-" if c.token_budget_max is None else str(c.token_budget_max),
            c.edge_origin,
            c.source,
        )
        for c in contracts
    ]
    if rows:
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
        for row in rows:
            cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
            print("  ".join([*cells, row[-1]]))
    return EXIT_OK


def _show(contract_set: ContractSet, from_: str, to: str, *, as_json: bool) -> int:
    contract = contract_set.get(from_, to)
    if contract is None:
        return error(f"no contract for {from_} -> {to}", EXIT_NOT_FOUND)
    if as_json:
        print_json(_json_record(contract))
        return EXIT_OK
    lines = [
        f"edge:              {contract.from_} -> {contract.to}",
        f"source:            {contract.source}",
        f"edge_origin:       {contract.edge_origin}  (advisory: `check` C-4 compares it)",
        f"performatives:     {', '.join(contract.performatives_allowed)}",
        f"token_budget_max:  {_or_dash(contract.token_budget_max)}",
        f"required_handles:  {', '.join(contract.required_handles) or '-'}",
        f"trust_level:       {_or_dash(contract.trust_level)}",
        "artifacts:",
    ]
    for artifact in contract.artifacts:
        lines += [
            f"  - kind:                      {artifact.kind}",
            f"    schema_ref:                {artifact.schema_ref}  {ADVISORY_MARK}",
            f"    required_sections:         {', '.join(artifact.required_sections) or '-'}",
            f"    evidence_anchor_required:  {str(artifact.evidence_anchor_required).lower()}  "
            + ADVISORY_MARK,
        ]
    if contract.notes:
        import textwrap

        lines.append("notes:  (advisory)")
        paragraphs = [p for p in contract.notes.strip().split("\n") if p.strip()]
        for number, paragraph in enumerate(paragraphs):
            if number:
                lines.append("")
            lines.append(textwrap.fill(paragraph, 88, initial_indent="  ", subsequent_indent="  "))
    print("\n".join(lines))
    return EXIT_OK


def _or_dash(value: object) -> str:
    return "-" if value is None else str(value)
