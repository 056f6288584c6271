"""C-1..C-4 (the hand-off graph) and D-0..D-3 (the context budget), against the edge's
contract."""

from __future__ import annotations

from collections.abc import Mapping

from eidolons.ecl.results import GateResult
from eidolons.ecl.rules.common import Recorder, get, text, token_count
from eidolons.ecl.verdict import RefusalCode

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Any

    from eidolons.ecl.contract import Contract, ContractSet


#: The receiver gate's refusal code for a failed gate (ECL §5.3 names).
RECEIVER_FAILURE_CODES: Mapping[str, RefusalCode] = {
    "C-1": RefusalCode.UNDECLARED_EDGE,
    "C-2": RefusalCode.PERFORMATIVE_NOT_ALLOWED,
    "C-3": RefusalCode.ARTIFACT_KIND_NOT_ALLOWED,
    "D-1": RefusalCode.CONTEXT_OVER_BUDGET,
    "D-2": RefusalCode.CONTEXT_OVER_BUDGET,
    "R-1": RefusalCode.MISSING_REQUIRED_SECTION,
}


def edge_contract(env: Mapping[str, Any], contracts: ContractSet) -> Contract | None:
    """The contract of the envelope's ``from.eidolon -> to.eidolon``, None if none."""
    sender, receiver = get(env, "from", "eidolon"), get(env, "to", "eidolon")
    if isinstance(sender, str) and isinstance(receiver, str):
        return contracts.get(sender, receiver)
    return None


def edge_results(
    env: Mapping[str, Any], contract: Contract | None, *, target: str | None = None
) -> list[GateResult]:
    """C-1..C-4 against the edge's ``contract``; without one only C-1 (failed)."""
    rec = Recorder(target)
    if contract is None:
        sender, receiver = text(get(env, "from", "eidolon")), text(get(env, "to", "eidolon"))
        reason = f"no contract for {sender} -> {receiver}"
        rec.fail("C-1", "MUST", "contract_for_edge_exists", reason)
        return rec.out
    rec.ok("C-1", "MUST", "contract_for_edge_exists")

    performative = env.get("performative")
    ok = isinstance(performative, str) and performative in contract.performatives_allowed
    problem = None if ok else f"performative={text(performative)} not in contract"
    rec.judge("C-2", "MUST", "performative_allowed_on_edge", problem)

    kind = get(env, "artifact", "kind")
    ok = isinstance(kind, str) and contract.artifact_for_kind(kind) is not None
    problem = None if ok else f"kind={text(kind)} not in contract"
    rec.judge("C-3", "MUST", "artifact_kind_allowed_on_edge", problem)

    origin = text(env.get("edge_origin"))
    ok = not origin or origin == contract.edge_origin
    problem = None if ok else f"envelope={origin} contract={contract.edge_origin}"
    rec.judge("C-4", "SHOULD", "edge_origin_consistent", problem, "warn")
    return rec.out


def context_results(
    env: Mapping[str, Any], contract: Contract | None, *, target: str | None = None
) -> list[GateResult]:
    """D-0..D-3; D-2 only with a contract that sets ``token_budget_max``."""
    rec = Recorder(target)
    delta = env.get("context_delta")
    if delta is None:
        rec.warn("D-0", "SHOULD", "context_delta_present", "envelope omits context_delta")
        return rec.out
    rec.ok("D-0", "SHOULD", "context_delta_present")

    if isinstance(delta, Mapping):
        raw_used, raw_budget = delta.get("tokens_used"), delta.get("token_budget")
        used, budget = token_count(raw_used), token_count(raw_budget)
        shown_used, shown_budget = text(raw_used) or "0", text(raw_budget) or "0"
        used_problem = "tokens_used must be a non-negative integer"
        budget_problem = "token_budget must be a non-negative integer"
    else:  # jq cannot index a non-object: upstream's values come out empty and fail
        used = budget = None
        shown_used = shown_budget = ""
        used_problem = budget_problem = "context_delta must be an object"

    name = "tokens_used_within_envelope_budget"
    if used is None or budget is None:
        problem = used_problem if used is None else budget_problem
        rec.fail("D-1", "MUST", name, f"used={shown_used} budget={shown_budget} ({problem})")
    elif used <= budget:
        rec.ok("D-1", "MUST", name)
    else:
        rec.fail("D-1", "MUST", name, f"used={used} budget={budget}")

    if contract is not None and contract.token_budget_max is not None:
        cmax = contract.token_budget_max
        name = "tokens_used_within_contract_budget"
        if used is None:
            rec.fail("D-2", "MUST", name, f"used={shown_used} contract_max={cmax} ({used_problem})")
        elif used <= cmax:
            rec.ok("D-2", "MUST", name)
        else:
            rec.fail("D-2", "MUST", name, f"used={used} contract_max={cmax}")

    summary = delta.get("summary") if isinstance(delta, Mapping) else None
    heuristic = (len(text(summary).encode("utf-8", "surrogatepass")) + 1) // 4
    if heuristic <= 200:
        rec.ok("D-3", "SHOULD", "summary_within_200_tokens")
    else:
        rec.warn("D-3", "SHOULD", "summary_within_200_tokens", f"heuristic≈{heuristic}")
    return rec.out
