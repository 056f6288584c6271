"""Every gate for one envelope, in upstream order: E, I, C, D, S, then R-1."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from eidolons.ecl.contract import (
    context_results,
    edge_contract,
    edge_results,
    section_result,
)
from eidolons.ecl.envelope import GateResult, envelope_results, get, ise_results
from eidolons.ecl.grammar import is_markdown_path, loads_strict
from eidolons.ecl.rules.integrity import PayloadReader, integrity_results
from eidolons.errors import EnvelopeError

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Any

    from eidolons.ecl.contract import Contract, ContractSet
    from eidolons.ecl.grammar import Limits


def json_result(
    data: bytes, *, limits: Limits | None = None, target: str | None = None
) -> tuple[GateResult, Mapping[str, Any] | None]:
    """E-1 and the top-level object (``{}`` for valid JSON not an object; None: failed)."""
    try:
        value = loads_strict(data, limits)
    except EnvelopeError as exc:
        return GateResult("E-1", "MUST", "fail", "envelope_is_json", str(exc), target), None
    e1 = GateResult("E-1", "MUST", "ok", "envelope_is_json", None, target)
    return e1, value if isinstance(value, dict) else {}


def _wants_sections(env: Mapping[str, Any], contract: Contract | None) -> bool:
    """Whether R-1 applies, judged before the payload is read (its bytes kept only then)."""
    kind, path = get(env, "artifact", "kind"), get(env, "artifact", "path")
    if contract is None or not isinstance(kind, str) or not isinstance(path, str):
        return False
    artifact = contract.artifact_for_kind(kind)
    return bool(artifact and artifact.required_sections and is_markdown_path(path))


def run_gates(
    data: bytes,
    contracts: ContractSet,
    reader: PayloadReader,
    *,
    strict: bool = False,
    limits: Limits | None = None,
    target: str | None = None,
) -> list[GateResult]:
    """Every gate for the envelope bytes ``data``, R-1 INFO (MUST when ``strict``).
    Pure apart from ``reader``."""
    e1, parsed = json_result(data, limits=limits, target=target)
    return results_after_e1(e1, parsed, contracts, reader, strict=strict, target=target)


def results_after_e1(
    e1: GateResult,
    parsed: Mapping[str, Any] | None,
    contracts: ContractSet,
    reader: PayloadReader,
    *,
    strict: bool,
    target: str | None,
) -> list[GateResult]:
    """The gates after E-1; when it failed (``parsed`` None) they run on an empty
    object, as upstream's do on a file jq cannot read."""
    results = [e1]
    env: Mapping[str, Any] = {} if parsed is None else parsed
    if parsed is not None:
        results += envelope_results(env, target=target)
    contract = edge_contract(env, contracts)
    keep = _wants_sections(env, contract)
    integrity, facts = integrity_results(env, reader, keep_bytes=keep, target=target)
    results += integrity
    results += edge_results(env, contract, target=target)
    results += context_results(env, contract, target=target)
    results += ise_results(env, target=target)
    if keep and facts is not None and facts.data is not None:
        level = "MUST" if strict else "INFO"
        kind, path = get(env, "artifact", "kind"), get(env, "artifact", "path")
        r1 = section_result(facts.data, contract, kind, level=level, path=path, target=target)
        if r1 is not None:
            results.append(r1)
    return results


def exit_code(results: Iterable[GateResult]) -> int:
    """2 if a MUST failed, else 3 if a SHOULD failed, else 4 if anything warned (any
    level), else 0. INFO failures do not count."""
    code = 0
    for r in results:
        if r.status == "fail" and r.level == "MUST":
            return 2
        if r.status == "fail" and r.level == "SHOULD":
            code = 3
        elif r.status == "warn" and code == 0:
            code = 4
    return code
