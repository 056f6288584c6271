"""ECL integrity tags, computed and compared, and the decision over a parsed envelope and
a digest (:func:`precheck`, :func:`judge_digest`: checks 2-4 and 7, ECL §6.2.2), and the
vocabulary of the verdicts: their ECL §5.3 failure codes (:class:`RefusalCode`), the
orchestrator gate's exit code and what a pass rested on (its ``evidence``, ADR 0010).
``sender_*``: a required sender signature missing, untrusted or over other bytes (ADR
0034); ``unregistered``: the orchestrator's key must not sign for this root (ADR 0011).

``sha256`` is the hex SHA-256 of the payload bytes, ``hmac-sha256`` the hex HMAC-SHA-256
keyed with ``ECL_HMAC_KEY``'s bytes; any other method never verifies. Tags compare in
constant time and exactly. Hashing streams through one buffer and stops past the cap
(``keep=True`` returns the bytes hashed: the only ones a caller may hand on). Small inputs
hash with the builtin ``_sha256`` until :data:`LIGHT_MAX_BYTES`, then OpenSSL's (ADR
0082, ``tests/test_integrity_light.py``). No paths: callers pass an open binary file.
"""

from __future__ import annotations

from enum import StrEnum

from eidolons.ecl.grammar import is_placeholder
from eidolons.errors import EidolonsError

SUPPORTED_METHODS = ("sha256", "hmac-sha256")
CHUNK = 256 * 1024  # measured: 1 MiB is slower here (L2), 64 KiB costs more calls (ADR 0022)
#: the largest payload hashed without loading OpenSSL (measured, ADR 0022)
LIGHT_MAX_BYTES = 512 * 1024

_light_sha256: Any
_compare_digest: Any
try:
    import _sha256  # type: ignore[import-not-found]

    _light_sha256 = _sha256.sha256
except ImportError:  # pragma: no cover - a build without the builtin SHA-256
    _light_sha256 = None
try:
    from _operator import _compare_digest
except ImportError:  # pragma: no cover
    from hmac import compare_digest as _compare_digest


_light_bytes = [0]  # bytes this process has hashed with the builtin SHA-256


def sha256(data: bytes | bytearray | memoryview = b"", *, size_hint: int = 0) -> _Hash:
    """A SHA-256 hash object over ``data``: the builtin one while this process has hashed
    at most :data:`LIGHT_MAX_BYTES` with it, ``size_hint`` (the bytes to be hashed,
    ``data`` included) counted; OpenSSL's after that (the same digests)."""
    size = max(size_hint, len(data))
    if _light_sha256 is not None and _light_bytes[0] + size <= LIGHT_MAX_BYTES:
        _light_bytes[0] += size
        return _light_sha256(data)  # type: ignore[no-any-return]
    import hashlib

    return hashlib.sha256(data)


def sha256_hex(data: bytes | bytearray | memoryview) -> str:
    """The lowercase hex SHA-256 of ``data`` (:func:`sha256`'s choice, inline: it is
    asked for every envelope, receipt and trace line)."""
    size = len(data)
    if _light_sha256 is not None and _light_bytes[0] + size <= LIGHT_MAX_BYTES:
        _light_bytes[0] += size
        return str(_light_sha256(data).hexdigest())
    import hashlib

    return hashlib.sha256(data).hexdigest()


TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from hashlib import _Hash
    from typing import Any, Protocol

    from eidolons.ecl.envelope import Envelope

    class Readable(Protocol):
        def readinto(self, buffer: memoryview, /) -> int | None: ...

    class Writable(Protocol):
        def write(self, data: memoryview, /) -> object: ...


class PayloadTooLarge(EidolonsError):
    code = "PAYLOAD_TOO_LARGE"


class Digest:
    """What was computed over one read of the payload: ``value`` is the integrity tag
    (SHA-256 or HMAC, lowercase hex), ``sha256`` the plain SHA-256 always, ``data`` the
    exact bytes hashed when they were asked for (a ``bytearray`` from a stream: the one
    copy that was read, never copied again)."""

    __slots__ = ("data", "method", "sha256", "size", "value")

    def __init__(
        self,
        method: str,
        value: str,
        sha256: str,
        size: int,
        data: bytes | bytearray | None = None,
    ) -> None:
        self.method = method
        self.value = value
        self.sha256 = sha256
        self.size = size
        self.data = data

    def __repr__(self) -> str:
        return f"Digest({self.method}, {self.value}, size={self.size})"


def tags_equal(expected: str, actual: str) -> bool:
    """Constant-time comparison of two hex tags."""
    return bool(
        _compare_digest(expected.encode("ascii", "replace"), actual.encode("ascii", "replace"))
    )


def digest_bytes(data: bytes, method: str, key: bytes | None = None) -> Digest:
    """The tag of in-memory bytes (used by emit and tests)."""
    sha = sha256_hex(data)
    if method == "sha256":
        return Digest(method, sha, sha, len(data))
    if method == "hmac-sha256":
        if key is None:
            raise EidolonsError("hmac-sha256 needs a key", code="NO_KEY")
        import hashlib
        import hmac

        return Digest(method, hmac.new(key, data, hashlib.sha256).hexdigest(), sha, len(data))
    raise EidolonsError(f"unsupported integrity method {method!r}", code="UNSUPPORTED_ALGO")


def digest_stream(
    stream: Readable,
    method: str,
    key: bytes | None = None,
    *,
    max_bytes: int,
    keep: bool = False,
    sink: Writable | None = None,
    size_hint: int | None = None,
) -> Digest:
    """Hash ``stream`` to its end in one pass. Raises :class:`PayloadTooLarge` past
    ``max_bytes`` (counted while reading, so a growing file cannot slip past the cap).
    ``keep`` returns the bytes hashed in ``Digest.data``; ``sink`` receives each chunk as
    it is hashed (a snapshot of exactly the bytes judged, without holding them in memory).
    ``size_hint``, the size the file had when it was opened, picks the SHA-256
    implementation and the buffer (a file that grows since is still hashed to its end);
    None is a large payload."""
    hint = CHUNK if size_hint is None else size_hint
    sha = sha256(size_hint=hint)
    mac = None
    if method == "hmac-sha256":
        if key is None:
            raise EidolonsError("hmac-sha256 needs a key", code="NO_KEY")
        import hashlib
        import hmac

        mac = hmac.new(key, digestmod=hashlib.sha256)
    elif method != "sha256":
        raise EidolonsError(f"unsupported integrity method {method!r}", code="UNSUPPORTED_ALGO")
    # the first read takes the whole of a small file and sees its end in the second
    buf = bytearray(CHUNK if hint >= CHUNK else max(hint + 1, 4096))
    view = memoryview(buf)
    # one copy of the payload: each chunk appended to one growing buffer, handed back as
    # is (no join, no final copy), so a payload costs its size once, plus this buffer
    kept: bytearray | None = bytearray() if keep else None
    size = 0
    while True:
        n = stream.readinto(view)
        if not n:
            break
        size += n
        if size > max_bytes:
            raise PayloadTooLarge(f"payload is larger than the {max_bytes}-byte cap")
        chunk = view[:n]
        sha.update(chunk)
        if mac is not None:
            mac.update(chunk)
        if kept is not None:
            kept += chunk
        if sink is not None:
            sink.write(chunk)
    sha_hex = sha.hexdigest()
    value = mac.hexdigest() if mac is not None else sha_hex
    return Digest(method, value, sha_hex, size, kept)


class RefusalCode(StrEnum):
    """The ECL section 5.3 failure codes: ``verify_failure_code`` in the trace and the
    ``<CODE>`` of the receiver's refusal line. The one enumeration of them."""

    INTEGRITY_MISMATCH = "INTEGRITY_MISMATCH"
    UNVERIFIED = "UNVERIFIED"
    SCHEMA_INVALID = "SCHEMA_INVALID"
    UNDECLARED_EDGE = "UNDECLARED_EDGE"
    PERFORMATIVE_NOT_ALLOWED = "PERFORMATIVE_NOT_ALLOWED"
    ARTIFACT_KIND_NOT_ALLOWED = "ARTIFACT_KIND_NOT_ALLOWED"
    CONTEXT_OVER_BUDGET = "CONTEXT_OVER_BUDGET"
    MISSING_REQUIRED_SECTION = "MISSING_REQUIRED_SECTION"


class Verdict(StrEnum):
    PASS = "pass"
    MALFORMED = "malformed"
    UNSUPPORTED_ALGO = "unsupported_algo"
    UNVERIFIABLE = "unverifiable"
    INCONSISTENT = "inconsistent"
    MISSING_PAYLOAD = "missing_payload"
    NO_KEY = "no_key"
    TAMPER = "tamper"
    SENDER_UNVERIFIED = "sender_unverified"
    SENDER_MISMATCH = "sender_mismatch"
    UNREGISTERED = "unregistered"

    @property
    def failure_code(self) -> RefusalCode | None:
        return _FAILURE_CODES.get(self)


_FAILURE_CODES: dict[Verdict, RefusalCode] = {
    Verdict.TAMPER: RefusalCode.INTEGRITY_MISMATCH,
    Verdict.INCONSISTENT: RefusalCode.INTEGRITY_MISMATCH,
    Verdict.MISSING_PAYLOAD: RefusalCode.INTEGRITY_MISMATCH,
    Verdict.NO_KEY: RefusalCode.INTEGRITY_MISMATCH,
    Verdict.UNVERIFIABLE: RefusalCode.UNVERIFIED,
    Verdict.MALFORMED: RefusalCode.SCHEMA_INVALID,
    Verdict.UNSUPPORTED_ALGO: RefusalCode.SCHEMA_INVALID,
    Verdict.SENDER_UNVERIFIED: RefusalCode.UNVERIFIED,
    Verdict.SENDER_MISMATCH: RefusalCode.INTEGRITY_MISMATCH,
    Verdict.UNREGISTERED: RefusalCode.UNVERIFIED,
}

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_BLOCKED = 3


def exit_code(verdict: Verdict, mode: str) -> int:
    """The orchestrator gate's exit code (see the README's table): block mode stops every
    verdict but a pass, as upstream's block mode does (a placeholder digest included)."""
    if verdict is Verdict.PASS:
        return EXIT_OK
    if verdict is Verdict.MALFORMED:
        return EXIT_USAGE
    if verdict is Verdict.UNREGISTERED:  # not the hand-off's verdict: nothing to warn through
        return EXIT_BLOCKED
    return EXIT_BLOCKED if mode == "block" else EXIT_OK


# What a pass rested on, strongest first: ``signed-receipt`` (a verified orchestrator
# receipt), ``sender-signature``, ``hmac``, ``unsigned`` (nothing an agent could not
# have produced).
SIGNED_RECEIPT = "signed-receipt"
SENDER_SIGNATURE = "sender-signature"
HMAC = "hmac"
UNSIGNED = "unsigned"
ORDER = (SIGNED_RECEIPT, UNSIGNED, SENDER_SIGNATURE, HMAC)

UNSIGNED_WARNING = (
    "warning: evidence: unsigned: this project has no trust store (.eidolons/trust.json), "
    "so any writer of the trace could have written this pass (run `eidolons keys init`)"
)
#: Why a project with a trust store refuses an unsigned pass, and the fix (ADR 0011).
UNSIGNED_PASS = (
    "the verify_pass on record is unsigned: it was recorded without this project's signing "
    "key (before eidolons keys init, or by hand); run eidolons verify-envelope {envelope} "
    "again to sign its pass"
)


def combine(*parts: str) -> str:
    """``signed-receipt+hmac``: the parts in vocabulary order, ``unsigned`` if none."""
    kept = [p for p in ORDER if p in parts]
    if len(kept) > 1 and UNSIGNED in kept and kept[0] != UNSIGNED:
        kept.remove(UNSIGNED)
    return "+".join(kept) if kept else UNSIGNED


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
    declared = env.artifact.get("sha256")
    for field, value in (("integrity.value", env.integrity_value), ("artifact.sha256", declared)):
        if isinstance(value, str) and is_placeholder(value):
            return Verdict.UNVERIFIABLE, f"{field} is a placeholder; the digest is not filled"
    # never laxer than the upstream gate: a non-hex value is a mismatch, not ignored (ADR
    # 0009); an absent one is a schema problem (--strict makes it malformed)
    if env.integrity_method == "sha256" and declared is not None:
        if declared != env.integrity_value:
            return Verdict.INCONSISTENT, "artifact.sha256 differs from integrity.value"
    return None


def judge_digest(env: Envelope, digest: Digest) -> tuple[Verdict, str]:
    """Check 7: compare the recomputed tag with ``integrity.value``."""
    name = "SHA-256" if env.integrity_method == "sha256" else "HMAC-SHA-256"
    if tags_equal(env.integrity_value, digest.value):
        return Verdict.PASS, f"payload {name} matches integrity tag"
    return Verdict.TAMPER, f"payload {name} does not match integrity tag"
