"""eidolons: mechanical integrity and contract gates for ECL hand-offs between agents.

The public API (imported lazily, so ``import eidolons`` stays cheap for the CLI):

Envelope model
    :func:`parse_envelope` (strict parse of untrusted bytes -> :class:`Envelope`, raises
    :class:`EnvelopeError`), :class:`Envelope`, :class:`AgentRef`,
    :meth:`Envelope.schema_problems` (every schema violation, as strings).
Integrity
    :func:`verify_envelope_file` (checks 1-7 of the orchestrator gate ->
    :class:`VerificationResult`, truthy only on pass), :class:`Verdict`,
    :func:`digest_bytes` / :func:`digest_stream`.
Gates
    :func:`run_gate` (the orchestrator gate: verify, trace, exit code),
    :func:`verify_incoming` (the receiver gate), :class:`ContractSet` (contracts),
    :func:`check_envelope` (the conformance checker's gates for one envelope).
Sending
    :func:`emit_envelope` (write an envelope beside a payload and trace the ``emit``
    event; ``eidolons.gates.sender.emit``),
    :func:`build_envelope` (the pure part).
Trace
    :func:`open_store` (the project's configured :class:`TraceStore`: JSONL files, or
    PostgreSQL with ``EIDOLONS_TRACE_DSN``), :func:`append_event`, :func:`read_events`,
    :func:`iter_reverse`, :func:`thread_trace_path` (the JSONL files).
Configuration
    :class:`Limits`, :func:`find_root`.
"""

# No ``from __future__`` import here: ``python -m eidolons`` imports this package before
# ``__main__``'s last resort can catch anything (a shadowed ``__future__``: ADR 0022).
import importlib

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "AgentRef": "eidolons.ecl.envelope",
    "Envelope": "eidolons.ecl.envelope",
    "parse_envelope": "eidolons.ecl.envelope",
    "EnvelopeError": "eidolons.errors",
    "EidolonsError": "eidolons.errors",
    "Verdict": "eidolons.ecl.integrity",
    "VerificationResult": "eidolons.gates.verify",
    "verify_envelope_file": "eidolons.gates.verify",
    "digest_bytes": "eidolons.ecl.integrity",
    "digest_stream": "eidolons.ecl.integrity",
    "run_gate": "eidolons.gates.orchestrator",
    "verify_incoming": "eidolons.gates.receiver",
    "ContractSet": "eidolons.io.contracts",
    "check_envelope": "eidolons.gates.checker",
    "emit_envelope": "eidolons.gates.sender",
    "build_envelope": "eidolons.ecl.builder",
    "append_event": "eidolons.trace.log",
    "read_events": "eidolons.trace.log",
    "iter_reverse": "eidolons.trace.log",
    "thread_trace_path": "eidolons.trace.log",
    "TraceStore": "eidolons.trace.store",
    "open_store": "eidolons.trace.store",
    "Limits": "eidolons.ecl.grammar",
    "find_root": "eidolons.io.config",
}

__all__ = [
    "AgentRef",
    "ContractSet",
    "EidolonsError",
    "Envelope",
    "EnvelopeError",
    "Limits",
    "TraceStore",
    "Verdict",
    "VerificationResult",
    "__version__",
    "append_event",
    "build_envelope",
    "check_envelope",
    "digest_bytes",
    "digest_stream",
    "emit_envelope",
    "find_root",
    "iter_reverse",
    "open_store",
    "parse_envelope",
    "read_events",
    "run_gate",
    "thread_trace_path",
    "verify_envelope_file",
    "verify_incoming",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'eidolons' has no attribute {name!r}")
    target = "emit" if name == "emit_envelope" else name
    return getattr(importlib.import_module(module), target)


if TYPE_CHECKING:
    from eidolons.ecl.builder import build_envelope
    from eidolons.ecl.envelope import AgentRef, Envelope, parse_envelope
    from eidolons.ecl.grammar import Limits
    from eidolons.ecl.integrity import Verdict, digest_bytes, digest_stream
    from eidolons.errors import EidolonsError, EnvelopeError
    from eidolons.gates.checker import check_envelope
    from eidolons.gates.orchestrator import run_gate
    from eidolons.gates.receiver import verify_incoming
    from eidolons.gates.sender import emit as emit_envelope
    from eidolons.gates.verify import VerificationResult, verify_envelope_file
    from eidolons.io.config import find_root
    from eidolons.io.contracts import ContractSet
    from eidolons.trace.log import append_event, iter_reverse, read_events, thread_trace_path
    from eidolons.trace.store import TraceStore, open_store
