"""The conformance checker's shell (``eidolons check``): read one envelope and its
payload from the file system, then decide with the pure rules of
:mod:`eidolons.ecl.conformance`.

An unreadable envelope file is an E-1 failure, never an exception; the payload is
resolved with this project's resolution (:mod:`eidolons.payload`) and read once.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from eidolons.ecl.conformance import (
    GateResult,
    PayloadFacts,
    PayloadUnavailable,
    results_after_e1,
    run_gates,
)
from eidolons.ecl.limits import Limits
from eidolons.errors import InputError
from eidolons.payload import (
    PayloadError,
    candidates,
    hash_payload,
    locate_payload,
    read_envelope_bytes,
)

if TYPE_CHECKING:
    from eidolons.ecl.contract import ContractSet

__all__ = ["check_envelope", "read_payload_facts"]


def read_payload_facts(
    envelope_path: Path,
    artifact_path: str,
    *,
    root: Path,
    key: bytes | None,
    want_hmac: bool,
    keep: bool,
    limits: Limits,
) -> PayloadFacts:
    """Resolve (:func:`eidolons.payload.locate_payload`) and read the payload once.

    Raises :class:`PayloadUnavailable`: ``unresolved`` when the resolver finds nothing or
    refuses the first existing candidate (the message says why in the second case),
    else not readable (not a regular file, an I/O error, above the size cap).
    """
    try:
        location = locate_payload(envelope_path, artifact_path, root)
    except PayloadError as exc:
        if exc.unreadable is not None:
            raise PayloadUnavailable(str(exc), unresolved=False, path=str(exc.unreadable)) from None
        envelope_real = Path(os.path.realpath(envelope_path))
        root_real = Path(os.path.realpath(root))
        exists = any(
            os.path.lexists(c) for _, c in candidates(envelope_real, artifact_path, root_real)
        )
        raise PayloadUnavailable(str(exc) if exists else "", unresolved=True) from None
    method = "hmac-sha256" if want_hmac and key is not None else "sha256"
    try:
        digest = hash_payload(location, method, key, max_bytes=limits.max_payload_bytes, keep=keep)
    except PayloadError as exc:
        raise PayloadUnavailable(str(exc), unresolved=False, path=str(location.path)) from None
    return PayloadFacts(
        size=digest.size,
        sha256=digest.sha256,
        hmac_sha256=digest.value if method == "hmac-sha256" else None,
        data=digest.data,
    )


def check_envelope(
    path: Path,
    contracts: ContractSet,
    *,
    root: Path,
    key: bytes | None,
    strict: bool = False,
    limits: Limits | None = None,
) -> list[GateResult]:
    """Read the envelope at ``path`` and run every gate on it (:func:`run_gates`), with
    this project's payload resolution under ``root`` and ``key`` for HMAC. Every
    result's ``target`` is ``path`` made absolute (symlinks not resolved). An unreadable
    envelope file is an E-1 failure, never an exception."""
    lim = limits or Limits()
    target = os.path.abspath(path)

    def reader(artifact_path: str, want_hmac: bool, keep: bool) -> PayloadFacts:
        return read_payload_facts(
            path, artifact_path, root=root, key=key, want_hmac=want_hmac, keep=keep, limits=lim
        )

    try:
        data = read_envelope_bytes(path, lim.max_envelope_bytes)
    except InputError as exc:
        e1 = GateResult("E-1", "MUST", "fail", "envelope_is_json", str(exc), target)
        return results_after_e1(e1, None, contracts, reader, strict=strict, target=target)
    return run_gates(data, contracts, reader, strict=strict, limits=lim, target=target)
