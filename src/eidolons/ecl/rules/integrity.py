"""I-1..I-5: the integrity tag against the payload, and the high-trust rule."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable

from eidolons.ecl import grammar
from eidolons.ecl.contract import high_trust_problem
from eidolons.ecl.envelope import (
    GateResult,
    Recorder,
    get,
    is_v21,
    text,
    token_count,
)
from eidolons.ecl.integrity import tags_equal

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, NamedTuple

    class _PayloadFacts(NamedTuple):
        size: int
        sha256: str
        hmac_sha256: str | None = None
        data: bytes | bytearray | None = None

else:  # the same fields for the interpreter: typing.NamedTuple would import typing
    _PayloadFacts = namedtuple(
        "PayloadFacts", ("size", "sha256", "hmac_sha256", "data"), defaults=(None, None)
    )

HMAC_UNSET_REASON = "ECL_HMAC_KEY unset; HMAC unverifiable per §6.2.3"
I5_REASONS = (
    "trust_level=high requires integrity.method=hmac-sha256 at ECL v2.1 (spec §6.2.6); got sha256",
    "trust_level=high + integrity.method=sha256 — RECOMMENDED hmac-sha256 (ECL v1.1 §6.4)",
)


class PayloadFacts(_PayloadFacts):
    """One read of the payload: its size, SHA-256, the HMAC-SHA-256 when asked for and a
    key was available (else None), and the bytes when asked for."""

    __slots__ = ()


class PayloadUnavailable(Exception):
    """The reader could not produce the payload: ``unresolved`` when no candidate exists,
    else the candidate ``path`` was refused or unreadable."""

    def __init__(self, message: str, *, unresolved: bool, path: str | None = None) -> None:
        super().__init__(message)
        self.unresolved = unresolved
        self.path = path


#: ``reader(artifact_path, want_hmac, keep_bytes) -> PayloadFacts``; raises
#: :class:`PayloadUnavailable`. It resolves the payload and reads it once.
PayloadReader = Callable[[str, bool, bool], PayloadFacts]


def hmac_at_high_trust_result(env: Mapping[str, Any], *, target: str | None = None) -> GateResult:
    """I-5 (it needs no payload): MUST for 2.1 envelopes, SHOULD before; a method other
    than sha256 is I-3's failure, not this one's."""
    rec = Recorder(target)
    sha256 = get(env, "integrity", "method") == "sha256"
    problem = high_trust_problem(env) if sha256 else None
    rec.graded("I-5", is_v21(env), "hmac_recommended_at_high_trust", problem, I5_REASONS)
    return rec.out[0]


def integrity_results(
    env: Mapping[str, Any],
    reader: PayloadReader,
    *,
    keep_bytes: bool = False,
    target: str | None = None,
) -> tuple[list[GateResult], PayloadFacts | None]:
    """I-1..I-5 and the payload facts (None when I-1 or I-2 failed). ``keep_bytes`` asks
    the reader for the bytes."""
    rec = Recorder(target)
    facts = _integrity(env, reader, keep_bytes, rec)
    rec.out.append(hmac_at_high_trust_result(env, target=target))
    return rec.out, facts


def _read(path: Any, reader: PayloadReader, want_hmac: bool, keep: bool) -> PayloadFacts | str:
    """The payload's facts, or I-2's reason."""
    if not isinstance(path, str) or not grammar.is_safe_relative_path(path):
        why = "missing" if text(path) == "" else "not a safe relative path"
        return f"artifact.path={text(path)} unresolved ({why})"
    try:
        return reader(path, want_hmac, keep)
    except PayloadUnavailable as exc:
        if not exc.unresolved:
            return f"{exc.path or path} not readable ({exc})"
        return f"artifact.path={path} unresolved" + (f" ({exc})" if str(exc) else "")


def _integrity(
    env: Mapping[str, Any], reader: PayloadReader, keep_bytes: bool, rec: Recorder
) -> PayloadFacts | None:
    value = get(env, "integrity", "value")
    if not grammar.is_hex64(value):
        rec.fail("I-1", "MUST", "integrity_value_hex64", f"got: {text(value) or '<empty>'}")
        return None
    rec.ok("I-1", "MUST", "integrity_value_hex64")

    method = get(env, "integrity", "method")
    facts = _read(get(env, "artifact", "path"), reader, method == "hmac-sha256", keep_bytes)
    if isinstance(facts, str):
        rec.fail("I-2", "MUST", "payload_resolvable", facts)
        return None
    rec.ok("I-2", "MUST", "payload_resolvable")

    tag = facts.sha256 if method == "sha256" else facts.hmac_sha256
    if method not in ("sha256", "hmac-sha256"):
        reason = f"method={text(method)} (expected sha256|hmac-sha256)"
        rec.fail("I-3", "MUST", "integrity_method_supported", reason)
    elif tag is None:
        rec.warn("I-3", "MUST", "integrity_match", HMAC_UNSET_REASON)
    elif tags_equal(value, tag):
        rec.ok("I-3", "MUST", "integrity_match")
    elif method == "sha256":
        rec.fail("I-3", "MUST", "integrity_match", f"expected={value} got={facts.sha256}")
    else:
        rec.fail("I-3", "MUST", "integrity_match", "hmac mismatch")

    declared = get(env, "artifact", "size_bytes")
    ok = token_count(declared) == facts.size
    problem = None if ok else f"declared={text(declared) or '0'} actual={facts.size}"
    rec.judge("I-4", "SHOULD", "size_bytes_match", problem, "warn")
    return facts
