"""The conformance rules' former home: the names the receiver gate imports, now in
:mod:`eidolons.ecl.rules`."""

from eidolons.ecl.rules.common import exit_code
from eidolons.ecl.rules.edge import RECEIVER_FAILURE_CODES, context_results, edge_results
from eidolons.ecl.rules.envelope import envelope_results
from eidolons.ecl.rules.integrity import high_trust_problem
from eidolons.ecl.rules.ise import ise_results

__all__ = [
    "RECEIVER_FAILURE_CODES",
    "context_results",
    "edge_results",
    "envelope_results",
    "exit_code",
    "high_trust_problem",
    "ise_results",
]
