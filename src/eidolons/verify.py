"""The mechanical integrity check of one envelope (ECL section 6.2.2), in order:

1. the envelope is unreadable, not strict JSON, not an object, or lacks a field the
   integrity check depends on (see :mod:`eidolons.ecl.envelope`) -> ``malformed``
   (with ``strict``, any other schema problem too);
2. ``integrity.method`` not sha256 or hmac-sha256 -> ``unsupported_algo``;
3. ``integrity.value`` is a placeholder -> ``unverifiable``;
4. method sha256 and a real ``artifact.sha256`` differs from ``integrity.value`` ->
   ``inconsistent``;
5. the payload cannot be resolved to a regular file inside the boundary, or is larger
   than the cap -> ``missing_payload``;
6. method hmac-sha256 and no key -> ``no_key``;
7. the recomputed tag equals ``integrity.value`` -> ``pass``, else ``tamper``.

:func:`precheck` and :func:`judge_digest` are pure; :func:`verify_envelope_file` adds the
file I/O. No trace is written here (see :mod:`eidolons.gates.orchestrator`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from eidolons.ecl.envelope import Envelope, parse_envelope
from eidolons.ecl.grammar import is_placeholder
from eidolons.ecl.integrity import (
    SUPPORTED_METHODS,
    Digest,
    PayloadTooLarge,
    digest_stream,
    tags_equal,
)
from eidolons.ecl.limits import Limits
from eidolons.ecl.verdict import Verdict
from eidolons.errors import EnvelopeError, InputError
from eidolons.payload import PayloadError, locate_payload, open_payload, read_envelope_bytes

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Any

    from eidolons.ecl.integrity import Writable


class VerificationResult:
    """The outcome of one check. Truthy only on ``pass``."""

    __slots__ = (
        "actual",
        "digest",
        "envelope",
        "envelope_path",
        "envelope_sha256",
        "expected",
        "message",
        "payload_path",
        "payload_real",
        "verdict",
        "warnings",
    )

    def __init__(
        self,
        verdict: Verdict,
        message: str,
        envelope_path: Path,
        envelope: Envelope | None = None,
        expected: str | None = None,
        warnings: list[str] | None = None,
    ) -> None:
        self.verdict = verdict
        self.message = message
        self.envelope_path = envelope_path
        self.envelope = envelope
        self.expected = expected
        self.actual: str | None = None
        self.payload_path: Path | None = None
        self.payload_real: Path | None = None  # the file hashed, symlinks resolved
        self.envelope_sha256: str | None = None  # SHA-256 of the exact envelope bytes judged
        self.digest: Digest | None = None
        self.warnings = warnings if warnings is not None else []

    def __repr__(self) -> str:
        return f"VerificationResult({self.verdict}, {self.message!r})"

    def __bool__(self) -> bool:
        return self.verdict is Verdict.PASS

    @property
    def failure_code(self) -> str | None:
        return self.verdict.failure_code

    def summary(self) -> dict[str, Any]:
        env = self.envelope
        return {
            "verdict": str(self.verdict),
            "envelope": str(self.envelope_path),
            "message_id": env.message_id if env else None,
            "thread_id": env.thread_id if env else None,
            "from": str(env.sender) if env else None,
            "to": str(env.recipient) if env else None,
            "performative": env.performative if env else None,
            "integrity_method": env.integrity_method if env else None,
            "expected": self.expected,
            "actual": self.actual,
            "failure_code": self.failure_code,
            "message": self.message,
            "payload": str(self.payload_path) if self.payload_path else None,
            "payload_sha256": self.digest.sha256 if self.digest else None,
            "envelope_sha256": self.envelope_sha256,
            "size_bytes": self.digest.size if self.digest else None,
            "warnings": list(self.warnings),
        }


def precheck(env: Envelope, strict: bool = False) -> tuple[Verdict, str] | None:
    """Checks 1 (strict part) to 4, over the parsed envelope alone. None = go on."""
    if strict:
        problems = env.schema_problems()
        if problems:
            return Verdict.MALFORMED, "schema: " + "; ".join(problems)
    if env.integrity_method not in SUPPORTED_METHODS:
        return (
            Verdict.UNSUPPORTED_ALGO,
            f"integrity.method {env.integrity_method!r} is not sha256 or hmac-sha256",
        )
    if is_placeholder(env.integrity_value):
        return Verdict.UNVERIFIABLE, "integrity.value is a placeholder; the digest is not filled"
    declared = env.artifact.get("sha256")
    if env.integrity_method == "sha256" and declared is not None:
        # never laxer than the upstream gate: a non-hex value is a mismatch, not ignored;
        # only a placeholder (the parent has not filled it) is not compared (ADR 0026)
        if not isinstance(declared, str) or (
            not is_placeholder(declared) and declared != env.integrity_value
        ):
            return Verdict.INCONSISTENT, "artifact.sha256 differs from integrity.value"
    return None


def judge_digest(env: Envelope, digest: Digest) -> tuple[Verdict, str]:
    """Check 7: compare the recomputed tag with ``integrity.value``."""
    name = "SHA-256" if env.integrity_method == "sha256" else "HMAC-SHA-256"
    if tags_equal(env.integrity_value, digest.value):
        return Verdict.PASS, f"payload {name} matches integrity tag"
    return Verdict.TAMPER, f"payload {name} does not match integrity tag"


def verify_envelope_file(
    envelope_path: Path,
    *,
    root: Path,
    limits: Limits | None = None,
    key: bytes | None = None,
    strict: bool = False,
    keep_payload: bool = False,
    sink: Writable | None = None,
) -> VerificationResult:
    """Run checks 1-7 on an envelope file. Never raises for bad input: every failure is a
    verdict. With ``keep_payload`` the result's ``digest.data`` holds the exact bytes
    that were hashed (on pass only those may be handed on); ``sink`` receives them."""
    limits = limits or Limits()
    try:
        data = read_envelope_bytes(envelope_path, limits.max_envelope_bytes)
        env = parse_envelope(data, limits)
    except (EnvelopeError, InputError) as exc:
        return VerificationResult(Verdict.MALFORMED, str(exc), envelope_path)
    return verify_parsed(
        env,
        envelope_path,
        envelope_sha256=hashlib.sha256(data).hexdigest(),
        root=root,
        limits=limits,
        key=key,
        strict=strict,
        keep_payload=keep_payload,
        sink=sink,
    )


def verify_parsed(
    env: Envelope,
    envelope_path: Path,
    *,
    envelope_sha256: str,
    root: Path,
    limits: Limits | None = None,
    key: bytes | None = None,
    strict: bool = False,
    keep_payload: bool = False,
    sink: Writable | None = None,
) -> VerificationResult:
    """Checks 1 (strict part) to 7 on an envelope already parsed from bytes whose SHA-256
    is ``envelope_sha256``: the caller's one read of the envelope is the one judged, so a
    file swapped between two reads cannot be verified in place of the one decided on."""
    limits = limits or Limits()
    result = VerificationResult(
        Verdict.PASS,
        "",
        envelope_path,
        env,
        expected=env.integrity_value,
        warnings=env.schema_problems(),
    )
    result.envelope_sha256 = envelope_sha256
    early = precheck(env, strict)
    if early is not None:
        result.verdict, result.message = early
        return result
    try:
        location = locate_payload(envelope_path, env.artifact_path, root)
        result.payload_path = location.path
        result.payload_real = location.real
        with open_payload(location) as stream:
            if env.integrity_method == "hmac-sha256" and key is None:
                result.verdict = Verdict.NO_KEY
                result.message = "integrity.method is hmac-sha256 but ECL_HMAC_KEY is unset"
                return result
            digest = digest_stream(
                stream,
                env.integrity_method,
                key,
                max_bytes=limits.max_payload_bytes,
                keep=keep_payload,
                sink=sink,
            )
    except (PayloadError, PayloadTooLarge) as exc:
        result.verdict, result.message = Verdict.MISSING_PAYLOAD, str(exc)
        return result
    except OSError as exc:
        result.verdict = Verdict.MISSING_PAYLOAD
        result.message = f"cannot read payload: {exc.strerror or exc}"
        return result
    result.digest = digest
    result.actual = digest.value
    result.verdict, result.message = judge_digest(env, digest)
    declared_size = env.artifact.get("size_bytes")
    if declared_size != digest.size:  # upstream I-4: a warning, never a verdict
        result.warnings.append(f"size_bytes_match: declared={declared_size} actual={digest.size}")
    return result
