"""The ECL conformance rules (digest section 10.3): one implementation of every gate.

Both ``eidolons check`` (the conformance checker) and the receiver gate
(``eidolons verify-incoming``) decide with these functions, so a rule cannot drift
between the two. The engine is pure: it takes envelope bytes, parsed objects, contracts
and a payload *reader* (a callable injected by the caller) and returns
:class:`GateResult` records. The file I/O (reading the envelope and its payload for
``eidolons check``) is in :mod:`eidolons.gates.checker`.

Gates, in the order they run for one envelope (upstream's order: envelope, integrity,
handoff-graph, context-budget, ise, then this project's R-1). Reason strings are the
upstream checker's, byte for byte, for every case the upstream checker reports; a
``(...)`` suffix is added only where this engine fails a case upstream lets through or
cannot evaluate (see "Differences from the upstream checker" below).

E-1 MUST envelope_is_json
    The bytes parse under :func:`eidolons.ecl.envelope.loads_strict` (size cap, UTF-8, no
    BOM, no duplicate keys, no NaN/Infinity, no lone surrogates, bounded depth). On
    failure the reason is the parser's message and E-2..E-8 are skipped; the later
    libraries still run, on an empty object, exactly as upstream's do on a file jq
    cannot read (I-1 fails, C-1 fails, D-0 warns, S-3 records ok). A top level that is
    valid JSON but not an object passes E-1 and is then read as an empty object.
E-2 MUST required_fields_present
    The 11 required fields are present and non-null (``parent_id`` may be null):
    "missing: a b c".
E-3 MUST envelope_version_supported
    ``envelope_version`` is a string matching ``^(1\\.[012]|2\\.[01])(\\.\\d+)?$``:
    "got: <v> (expected 1.0|1.1|1.2|2.0|2.1 variant)". A 1.x version is followed by
    E-3.compat INFO ok v1x_accepted_under_v2_receiver with the §7.3 sentence.
E-4 MUST performative_in_enum: one of the closed ten: "got: <p>".
E-5 MUST agent_refs_well_formed
    ``from.eidolon`` and ``to.eidolon`` match ``^[a-z][a-z0-9-]*$``: "from=<f> to=<t>".
E-6 MUST artifact_path_relative
    "absolute path: <p>" (leading ``/``), "contains '..': <p>" (``..`` anywhere),
    "missing artifact.path" (absent or empty); not a string: "not a string: <v>".
E-7 SHOULD edge_origin_populated: warn "missing edge_origin".
E-8 MUST trace_tier_valid: ``trace.tier`` is standard or trance: "got: <tier>".
I-1 MUST integrity_value_hex64
    ``^[0-9a-f]{64}$``: "got: <value>" ("got: <empty>" when absent); stops I-2..I-4.
I-2 MUST payload_resolvable
    The payload is found with this project's resolution (:mod:`eidolons.io.payload`).
    Nothing found: "artifact.path=<p> unresolved" (upstream's string); the resolver
    refuses the first existing candidate (outside the boundary, a dangling link), or
    ``artifact.path`` is missing or unsafe: "artifact.path=<p> unresolved (<why>)";
    found but not a regular file, unreadable or above the size cap:
    "<path> not readable (<why>)". Stops I-3 and I-4.
I-3 MUST integrity_match
    sha256: "expected=<v> got=<c>"; hmac-sha256 without a key: **warn**
    "ECL_HMAC_KEY unset; HMAC unverifiable per §6.2.3"; HMAC mismatch: "hmac mismatch";
    any other method fails under the name ``integrity_method_supported``:
    "method=<m> (expected sha256|hmac-sha256)". Tags are compared in constant time.
I-4 SHOULD size_bytes_match: warn "declared=<d> actual=<a>".
I-5 hmac_recommended_at_high_trust, MUST for 2.1 envelopes, else SHOULD
    trust_level high with method sha256: 2.1 fails "trust_level=high requires
    integrity.method=hmac-sha256 at ECL v2.1 (spec §6.2.6); got sha256", others warn
    "trust_level=high + integrity.method=sha256 — RECOMMENDED hmac-sha256 (ECL v1.1
    §6.4)". The ok result carries the same level.
C-1 MUST contract_for_edge_exists: "no contract for <f> -> <t>"; stops C-2..C-4.
C-2 MUST performative_allowed_on_edge: "performative=<p> not in contract".
C-3 MUST artifact_kind_allowed_on_edge: "kind=<k> not in contract".
C-4 SHOULD edge_origin_consistent: warn "envelope=<e> contract=<c>".
D-0 SHOULD context_delta_present: warn "envelope omits context_delta"; stops D-1..D-3.
D-1 MUST tokens_used_within_envelope_budget: "used=<u> budget=<b>" (missing values
    count as 0).
D-2 MUST tokens_used_within_contract_budget: only with a contract that sets
    ``token_budget_max``: "used=<u> contract_max=<m>".
D-3 SHOULD summary_within_200_tokens: ``(UTF-8 bytes of summary + 1) // 4 > 200``:
    warn "heuristic≈<n>".
S-1 MUST ise_block_shape (only when ``ise`` is present, i.e. neither absent, null nor
    false): "ise.assertion_grade is required when ise block is present (spec §6.5.2)" or
    "ise.assertion_grade invalid: got '<g>'; must be
    unverified|self-attested|validated|human-reviewed".
S-2 MUST ise_authz_honored (ise present): each of auto_route, auto_merge, auto_deploy is
    a boolean, null or absent: "ise.receiver_authorization invalid field values:
    auto_merge=<v> (must be boolean) ...".
S-4 MUST ise_verification_shape (ise present, a 2.1 envelope and ``ise.verification``
    present; otherwise nothing is recorded): problems joined as upstream does,
    "<p>; <p>;" (the trailing ``;`` is upstream's): "fresh_context missing",
    "fresh_context must be boolean (got type <t>)", "checker missing", "checker invalid
    slug (got '<c>')", "transcript_access missing", "transcript_access invalid (got
    '<x>'; must be none|artifact-only)".
S-3 ise_required_at_high: SHOULD ok for 1.x envelopes; otherwise trust_level high
    without ise: 2.1 MUST fail "trust_level=high requires an ise.* block at ECL v2.1
    (spec §6.5.5); ise absent", else SHOULD warn "trust_level=high without ise.* block;
    see spec §6.5.5. [PROMOTION-CANDIDATE: MUST at v2.1]".
R-1 required_sections_present (this project; INFO by default, MUST when strict)
    See :func:`section_result`. The upstream checker has no such gate (drift candidate
    DC-2). At INFO level a failure is reported but never changes the exit code.

A "2.1 envelope" is one whose ``envelope_version`` matches ``^2\\.1(\\.\\d+)?$``; the
promotions of I-5, S-3 and S-4 depend on that alone, never on ``--target-version``.

Exit code (:func:`exit_code`, digest 10.2): 2 if a MUST result failed, else 3 if a
SHOULD result failed (no gate records that today), else 4 if any result warned (at any
level), else 0. INFO failures never change it.

Differences from the upstream checker
-------------------------------------
Each is deliberate; ``docs/adr/0200-conformance-checker.md`` gives the reasons.

1. E-1 uses the strict parser: duplicate keys, NaN/Infinity, a BOM, invalid UTF-8, lone
   surrogates, over-deep nesting and envelopes over the size cap fail (jq accepts the
   first ones). The reason is the parser's message, not "jq parse failed".
2. E-2 treats a null required field (other than ``parent_id``) as missing; upstream
   checks key presence only.
3. E-3 uses the spec regex, not shell globs: ``2.1.x`` or ``1.0.`` fail, and a
   non-string version (the number ``2.1``, which ``jq -r`` prints as ``2.1``) fails.
   The same regex decides the 2.1 promotions.
4. Values are type-checked, not compared as ``jq -r`` text: a non-string performative,
   slug, kind or tier never passes, and slugs are matched against the whole string (a
   value with a newline passes upstream's line-wise ``grep``).
5. I-2 uses this project's payload resolution (``artifact.path`` under the envelope's
   directory, its basename there, under the project root, the envelope's own name;
   the first existing candidate decides and must stay inside the boundary) instead of
   upstream's (basename next to the envelope, then relative to the current directory,
   then under the envelope's directory). An unsafe ``artifact.path`` (absolute, with a
   ``..`` component, NUL or backslash) is never resolved. Refusals name the reason.
6. I-4 requires ``size_bytes`` to be a JSON number (upstream compares text, so the
   string ``"370"`` passed).
7. I-5 is recorded even when I-1 or I-2 fails (upstream returns before it); it needs
   no payload, and a 2.1 MUST violation should not hide behind a missing file.
8. D-0 treats ``context_delta: null`` as absent (upstream: present, then D-1 passes on
   defaults). D-1/D-2 require non-negative integers (an integral float such as
   ``4000.0`` counts); anything else fails with the upstream string plus an explanation
   (upstream: the string ``"12"`` passed, other non-integers failed by a bash error).
9. S-2 accepts only JSON booleans (or null/absent): the string ``"true"`` fails
   (upstream let it through); a ``receiver_authorization`` that is not an object fails.
10. R-1 (required sections) is new; INFO unless strict.
11. Contracts are the effective set (builtin, project, ``--contracts``), validated on
    load (an invalid contract is a usage error), and looked up by edge; upstream reads
    one directory, takes the first YAML whose ``from``/``to`` match and never validates.
12. Text output escapes control characters; the command-line differences (several
    PATHs, ``--level`` values, ``--target-version`` syntax) are listed in
    :mod:`eidolons.cli.check`.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Iterable, Mapping

from eidolons.ecl import grammar
from eidolons.ecl.envelope import PERFORMATIVES, REQUIRED_FIELDS
from eidolons.ecl.grammar import is_safe_relative_path
from eidolons.ecl.integrity import tags_equal
from eidolons.ecl.limits import Limits
from eidolons.ecl.results import LEVELS, GateResult
from eidolons.ecl.sections import (
    MARKDOWN_SUFFIXES,
    is_markdown_path,
    markdown_headings,
    normalise_section,
    section_result,
)
from eidolons.ecl.strict_json import json_type, loads_strict
from eidolons.ecl.verdict import RefusalCode
from eidolons.errors import EnvelopeError

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from typing import Any, NamedTuple

    from eidolons.ecl.contract import Contract, ContractSet

    class _PayloadFacts(NamedTuple):
        size: int
        sha256: str
        hmac_sha256: str | None = None
        data: bytes | bytearray | None = None

else:  # the same fields for the interpreter: typing.NamedTuple would import typing
    _PayloadFacts = namedtuple(
        "PayloadFacts", ("size", "sha256", "hmac_sha256", "data"), defaults=(None, None)
    )

__all__ = [
    "LEVELS",
    "MARKDOWN_SUFFIXES",
    "RECEIVER_FAILURE_CODES",
    "GateResult",
    "PayloadFacts",
    "PayloadReader",
    "PayloadUnavailable",
    "context_results",
    "edge_results",
    "envelope_results",
    "exit_code",
    "high_trust_problem",
    "hmac_at_high_trust_result",
    "integrity_results",
    "is_high_trust",
    "is_markdown_path",
    "ise_results",
    "json_result",
    "markdown_headings",
    "normalise_section",
    "run_gates",
    "section_result",
]

#: The receiver gate's refusal code for a failed gate (ECL §5.3 names).
RECEIVER_FAILURE_CODES: Mapping[str, RefusalCode] = {
    "C-1": RefusalCode.UNDECLARED_EDGE,
    "C-2": RefusalCode.PERFORMATIVE_NOT_ALLOWED,
    "C-3": RefusalCode.ARTIFACT_KIND_NOT_ALLOWED,
    "D-1": RefusalCode.CONTEXT_OVER_BUDGET,
    "D-2": RefusalCode.CONTEXT_OVER_BUDGET,
    "R-1": RefusalCode.MISSING_REQUIRED_SECTION,
}


_TIERS = ("standard", "trance")
_GRADES = ("unverified", "self-attested", "validated", "human-reviewed")
_TRANSCRIPT_ACCESS = ("none", "artifact-only")
_AUTHZ_FIELDS = ("auto_route", "auto_merge", "auto_deploy")

COMPAT_REASON = "v1.x envelope accepted under v2.0 receiver, §7.3 window valid through 2027-05-13"
HMAC_UNSET_REASON = "ECL_HMAC_KEY unset; HMAC unverifiable per §6.2.3"
I5_FAIL_REASON = (
    "trust_level=high requires integrity.method=hmac-sha256 at ECL v2.1 (spec §6.2.6); got sha256"
)
I5_WARN_REASON = (
    "trust_level=high + integrity.method=sha256 — RECOMMENDED hmac-sha256 (ECL v1.1 §6.4)"
)
S1_MISSING_REASON = "ise.assertion_grade is required when ise block is present (spec §6.5.2)"
S3_FAIL_REASON = "trust_level=high requires an ise.* block at ECL v2.1 (spec §6.5.5); ise absent"
S3_WARN_REASON = (
    "trust_level=high without ise.* block; see spec §6.5.5. [PROMOTION-CANDIDATE: MUST at v2.1]"
)


# --------------------------------------------------------------------------- results


class _Recorder:
    """Collects results for one envelope, stamping each with the same target."""

    __slots__ = ("out", "target")

    def __init__(self, target: str | None, out: list[GateResult] | None = None) -> None:
        self.target = target
        self.out: list[GateResult] = [] if out is None else out

    # ``_result`` builds the named tuple without its generated ``__new__`` (a third of
    # the cost; the fields are always all given here)

    def ok(self, gid: str, level: str, name: str, reason: str | None = None) -> None:
        self.out.append(_result(GateResult, (gid, level, "ok", name, reason, self.target)))

    def fail(self, gid: str, level: str, name: str, reason: str) -> None:
        self.out.append(_result(GateResult, (gid, level, "fail", name, reason, self.target)))

    def warn(self, gid: str, level: str, name: str, reason: str) -> None:
        self.out.append(_result(GateResult, (gid, level, "warn", name, reason, self.target)))


_result = tuple.__new__


def exit_code(results: Iterable[GateResult]) -> int:
    """Digest 10.2: 2 if a MUST failed, else 3 if a SHOULD failed, else 4 if anything
    warned (any level), else 0. INFO failures do not count."""
    must_fail = should_fail = warned = False
    for r in results:
        if r.status == "fail":
            if r.level == "MUST":
                must_fail = True
            elif r.level == "SHOULD":
                should_fail = True
        elif r.status == "warn":
            warned = True
    if must_fail:
        return 2
    if should_fail:
        return 3
    return 4 if warned else 0


# --------------------------------------------------------------------------- helpers


def _text(value: Any) -> str:
    """A value as ``jq -r '.x // ""'`` prints it: null and false as ``""``, strings raw,
    other values as compact JSON. Used for reason strings only, never for decisions."""
    if value is None or value is False:
        return ""
    if isinstance(value, str):
        return value
    if type(value) is int:  # what json.dumps writes for an int (token counts, sizes)
        return str(value)
    if value is True:
        return "true"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e17:
        return str(int(value))
    import json  # only to word a reason (json imports re: not on every gate's start-up)

    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _get(env: Mapping[str, Any], *keys: str) -> Any:
    """``.a.b.c``: None when a level is absent or not an object."""
    node: Any = env
    for key in keys:
        # a parsed envelope is made of dicts: test that first (an ABC check costs more)
        if type(node) is not dict and not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def _truthy(value: Any) -> bool:
    """jq truthiness: everything but null and false."""
    return value is not None and value is not False


def _slug(value: Any) -> bool:
    return grammar.is_slug(value)


def _version(env: Mapping[str, Any]) -> str | None:
    v = env.get("envelope_version")
    return v if isinstance(v, str) else None


def _is_v21(env: Mapping[str, Any]) -> bool:
    v = _version(env)
    return grammar.is_v21_version(v)


def _is_v1(env: Mapping[str, Any]) -> bool:
    v = _version(env)
    return grammar.is_v1_version(v)


def _trust_level(env: Mapping[str, Any]) -> Any:
    value = _get(env, "constraints", "trust_level")
    return "standard" if not _truthy(value) else value


def _token_count(value: Any) -> int | None:
    """A token count: absent, null or false count as 0 (upstream ``// 0``); a
    non-negative JSON integer (or integral float) is itself; anything else is None."""
    if value is None or value is False:
        return 0
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


# --------------------------------------------------------------------------- envelope (E-)


def json_result(
    data: bytes, *, limits: Limits | None = None, target: str | None = None
) -> tuple[GateResult, Mapping[str, Any] | None]:
    """E-1: parse ``data`` strictly. Returns the result and the top-level object (an
    empty mapping when the JSON is valid but not an object), or None when E-1 failed."""
    rec = _Recorder(target)
    try:
        value = loads_strict(data, limits)
    except EnvelopeError as exc:
        rec.fail("E-1", "MUST", "envelope_is_json", str(exc))
        return rec.out[0], None
    rec.ok("E-1", "MUST", "envelope_is_json")
    return rec.out[0], value if isinstance(value, dict) else {}


def envelope_results(env: Mapping[str, Any], *, target: str | None = None) -> list[GateResult]:
    """E-2..E-8 and E-3.compat over a parsed envelope (E-1 passed)."""
    rec = _Recorder(target)
    missing = [f for f in REQUIRED_FIELDS if f not in env or (env[f] is None and f != "parent_id")]
    if missing:
        rec.fail("E-2", "MUST", "required_fields_present", "missing: " + " ".join(missing))
    else:
        rec.ok("E-2", "MUST", "required_fields_present")

    version = env.get("envelope_version")
    if grammar.is_envelope_version(version):
        rec.ok("E-3", "MUST", "envelope_version_supported")
        if grammar.is_v1_version(version):
            rec.ok("E-3.compat", "INFO", "v1x_accepted_under_v2_receiver", COMPAT_REASON)
    else:
        rec.fail(
            "E-3",
            "MUST",
            "envelope_version_supported",
            f"got: {_text(version)} (expected 1.0|1.1|1.2|2.0|2.1 variant)",
        )

    performative = env.get("performative")
    if isinstance(performative, str) and performative in PERFORMATIVES:
        rec.ok("E-4", "MUST", "performative_in_enum")
    else:
        rec.fail("E-4", "MUST", "performative_in_enum", f"got: {_text(performative)}")

    sender = _get(env, "from", "eidolon")
    receiver = _get(env, "to", "eidolon")
    if _slug(sender) and _slug(receiver):
        rec.ok("E-5", "MUST", "agent_refs_well_formed")
    else:
        rec.fail(
            "E-5",
            "MUST",
            "agent_refs_well_formed",
            f"from={_text(sender)} to={_text(receiver)}",
        )

    path = _get(env, "artifact", "path")
    shown = _text(path)
    if shown == "":
        rec.fail("E-6", "MUST", "artifact_path_relative", "missing artifact.path")
    elif not isinstance(path, str):
        rec.fail("E-6", "MUST", "artifact_path_relative", f"not a string: {shown}")
    elif path.startswith("/"):
        rec.fail("E-6", "MUST", "artifact_path_relative", f"absolute path: {path}")
    elif grammar.has_dotdot(path):
        rec.fail("E-6", "MUST", "artifact_path_relative", f"contains '..': {path}")
    else:
        rec.ok("E-6", "MUST", "artifact_path_relative")

    if _text(env.get("edge_origin")):
        rec.ok("E-7", "SHOULD", "edge_origin_populated")
    else:
        rec.warn("E-7", "SHOULD", "edge_origin_populated", "missing edge_origin")

    tier = _get(env, "trace", "tier")
    if isinstance(tier, str) and tier in _TIERS:
        rec.ok("E-8", "MUST", "trace_tier_valid")
    else:
        rec.fail("E-8", "MUST", "trace_tier_valid", f"got: {_text(tier)}")
    return rec.out


# --------------------------------------------------------------------------- integrity (I-)


class PayloadFacts(_PayloadFacts):
    """What one read of the payload gave: its size, plain SHA-256, the HMAC-SHA-256 when
    it was asked for and a key was available (else None), and the bytes when asked for.
    (A named tuple, as :class:`GateResult`: one is made per envelope checked.)"""

    __slots__ = ()


class PayloadUnavailable(Exception):
    """The payload reader could not produce the payload. ``unresolved`` is True when no
    candidate exists (I-2 "artifact.path=<p> unresolved"), False when one was found but
    refused or unreadable (I-2 "<p> not readable (<why>)"). ``path`` is the candidate."""

    def __init__(self, message: str, *, unresolved: bool, path: str | None = None) -> None:
        super().__init__(message)
        self.unresolved = unresolved
        self.path = path


#: ``reader(artifact_path, want_hmac, keep_bytes) -> PayloadFacts``; raises
#: :class:`PayloadUnavailable`. It resolves the payload and reads it once.
PayloadReader = Callable[[str, bool, bool], PayloadFacts]


def integrity_results(
    env: Mapping[str, Any],
    reader: PayloadReader,
    *,
    keep_bytes: bool = False,
    target: str | None = None,
) -> tuple[list[GateResult], PayloadFacts | None]:
    """I-1..I-5. Returns the results and the payload facts (None when the payload was
    not read: I-1 or I-2 failed). ``keep_bytes`` asks the reader for the bytes."""
    rec = _Recorder(target)
    facts = _integrity(env, reader, keep_bytes, rec)
    rec.out.append(hmac_at_high_trust_result(env, target=target))
    return rec.out, facts


def is_high_trust(env: Mapping[str, Any], contract: Contract | None = None) -> bool:
    """Trust is the higher of the envelope's and the edge contract's: dropping
    ``constraints`` must not downgrade a high-trust edge."""
    return _trust_level(env) == "high" or (contract is not None and contract.trust_level == "high")


def high_trust_problem(env: Mapping[str, Any], contract: Contract | None = None) -> str | None:
    """The high-trust rule, written once: at ``trust_level`` high (the envelope's or the
    edge's) the integrity method must be hmac-sha256, since a plain SHA-256 can be
    recomputed by whoever rewrites the payload. The same rule at every ECL version: the
    receiver refuses UNVERIFIED, ``emit`` refuses to write, ``check`` reports I-5 (MUST
    for 2.1 envelopes, SHOULD before, as the spec grades it). None when it holds."""
    method = _get(env, "integrity", "method")
    if not is_high_trust(env, contract) or method == "hmac-sha256":
        return None
    return (
        "trust_level high (edge contract or envelope) requires hmac-sha256 integrity or a "
        "sender signature, "
        f"the envelope uses {_text(method)}"
    )


def hmac_at_high_trust_result(env: Mapping[str, Any], *, target: str | None = None) -> GateResult:
    """I-5 alone (it needs no payload): MUST for 2.1 envelopes, SHOULD before. Decided by
    :func:`high_trust_problem` (another method than sha256 is I-3's failure)."""
    rec = _Recorder(target)
    level = "MUST" if _is_v21(env) else "SHOULD"
    name = "hmac_recommended_at_high_trust"
    if high_trust_problem(env) is not None and _get(env, "integrity", "method") == "sha256":
        if level == "MUST":
            rec.fail("I-5", level, name, I5_FAIL_REASON)
        else:
            rec.warn("I-5", level, name, I5_WARN_REASON)
    else:
        rec.ok("I-5", level, name)
    return rec.out[0]


def _integrity(
    env: Mapping[str, Any], reader: PayloadReader, keep_bytes: bool, rec: _Recorder
) -> PayloadFacts | None:
    value = _get(env, "integrity", "value")
    if grammar.is_hex64(value):
        rec.ok("I-1", "MUST", "integrity_value_hex64")
    else:
        rec.fail("I-1", "MUST", "integrity_value_hex64", f"got: {_text(value) or '<empty>'}")
        return None

    method = _get(env, "integrity", "method")
    path = _get(env, "artifact", "path")
    shown = _text(path)
    if not isinstance(path, str) or not is_safe_relative_path(path):
        why = "missing" if shown == "" else "not a safe relative path"
        rec.fail("I-2", "MUST", "payload_resolvable", f"artifact.path={shown} unresolved ({why})")
        return None
    try:
        facts = reader(path, method == "hmac-sha256", keep_bytes)
    except PayloadUnavailable as exc:
        if exc.unresolved:
            reason = f"artifact.path={path} unresolved"
            detail = str(exc)
            if detail:
                reason += f" ({detail})"
        else:
            reason = f"{exc.path or path} not readable ({exc})"
        rec.fail("I-2", "MUST", "payload_resolvable", reason)
        return None
    rec.ok("I-2", "MUST", "payload_resolvable")

    if method == "sha256":
        if tags_equal(value, facts.sha256):
            rec.ok("I-3", "MUST", "integrity_match")
        else:
            rec.fail("I-3", "MUST", "integrity_match", f"expected={value} got={facts.sha256}")
    elif method == "hmac-sha256":
        if facts.hmac_sha256 is None:
            rec.warn("I-3", "MUST", "integrity_match", HMAC_UNSET_REASON)
        elif tags_equal(value, facts.hmac_sha256):
            rec.ok("I-3", "MUST", "integrity_match")
        else:
            rec.fail("I-3", "MUST", "integrity_match", "hmac mismatch")
    else:
        rec.fail(
            "I-3",
            "MUST",
            "integrity_method_supported",
            f"method={_text(method)} (expected sha256|hmac-sha256)",
        )

    declared = _get(env, "artifact", "size_bytes")
    if _token_count(declared) == facts.size:
        rec.ok("I-4", "SHOULD", "size_bytes_match")
    else:
        shown_size = _text(declared) or "0"
        rec.warn("I-4", "SHOULD", "size_bytes_match", f"declared={shown_size} actual={facts.size}")
    return facts


# --------------------------------------------------------------------------- graph (C-)


def edge_results(
    env: Mapping[str, Any], contract: Contract | None, *, target: str | None = None
) -> list[GateResult]:
    """C-1..C-4. ``contract`` is the contract of the envelope's edge (``from.eidolon ->
    to.eidolon``, or the receiver's edge in the receiver gate), None if there is none;
    then only C-1 is recorded."""
    rec = _Recorder(target)
    if contract is None:
        sender = _text(_get(env, "from", "eidolon"))
        receiver = _text(_get(env, "to", "eidolon"))
        rec.fail(
            "C-1", "MUST", "contract_for_edge_exists", f"no contract for {sender} -> {receiver}"
        )
        return rec.out
    rec.ok("C-1", "MUST", "contract_for_edge_exists")

    performative = env.get("performative")
    if isinstance(performative, str) and performative in contract.performatives_allowed:
        rec.ok("C-2", "MUST", "performative_allowed_on_edge")
    else:
        rec.fail(
            "C-2",
            "MUST",
            "performative_allowed_on_edge",
            f"performative={_text(performative)} not in contract",
        )

    kind = _get(env, "artifact", "kind")
    if isinstance(kind, str) and contract.artifact_for_kind(kind) is not None:
        rec.ok("C-3", "MUST", "artifact_kind_allowed_on_edge")
    else:
        rec.fail(
            "C-3", "MUST", "artifact_kind_allowed_on_edge", f"kind={_text(kind)} not in contract"
        )

    origin = _text(env.get("edge_origin"))
    if origin and origin != contract.edge_origin:
        rec.warn(
            "C-4",
            "SHOULD",
            "edge_origin_consistent",
            f"envelope={origin} contract={contract.edge_origin}",
        )
    else:
        rec.ok("C-4", "SHOULD", "edge_origin_consistent")
    return rec.out


# --------------------------------------------------------------------------- context (D-)


def context_results(
    env: Mapping[str, Any], contract: Contract | None, *, target: str | None = None
) -> list[GateResult]:
    """D-0..D-3. ``contract`` as for :func:`edge_results`; D-2 needs one that sets
    ``token_budget_max``."""
    rec = _Recorder(target)
    delta = env.get("context_delta")
    if delta is None:
        rec.warn("D-0", "SHOULD", "context_delta_present", "envelope omits context_delta")
        return rec.out
    rec.ok("D-0", "SHOULD", "context_delta_present")

    if isinstance(delta, Mapping):
        raw_used, raw_budget = delta.get("tokens_used"), delta.get("token_budget")
        used, budget = _token_count(raw_used), _token_count(raw_budget)
        shown_used, shown_budget = _text(raw_used) or "0", _text(raw_budget) or "0"
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
    heuristic = (len(_text(summary).encode("utf-8", "surrogatepass")) + 1) // 4
    if heuristic <= 200:
        rec.ok("D-3", "SHOULD", "summary_within_200_tokens")
    else:
        rec.warn("D-3", "SHOULD", "summary_within_200_tokens", f"heuristic≈{heuristic}")
    return rec.out


# --------------------------------------------------------------------------- ise (S-)


def ise_results(env: Mapping[str, Any], *, target: str | None = None) -> list[GateResult]:
    """S-1, S-2, S-4, S-3 (upstream's order inside ise.sh)."""
    rec = _Recorder(target)
    ise = env.get("ise")
    present = _truthy(ise)
    if present:
        _s1(ise, rec)
        _s2(ise, rec)
        if _is_v21(env):
            _s4(ise, rec)
    name = "ise_required_at_high"
    if _is_v1(env):
        rec.ok("S-3", "SHOULD", name)
        return rec.out
    level = "MUST" if _is_v21(env) else "SHOULD"
    if _trust_level(env) == "high" and not present:
        if level == "MUST":
            rec.fail("S-3", level, name, S3_FAIL_REASON)
        else:
            rec.warn("S-3", level, name, S3_WARN_REASON)
    else:
        rec.ok("S-3", level, name)
    return rec.out


def _s1(ise: Any, rec: _Recorder) -> None:
    grade = _text(_get(ise, "assertion_grade"))
    if grade in _GRADES:  # a non-string never renders as a grade
        rec.ok("S-1", "MUST", "ise_block_shape")
    elif grade == "":
        rec.fail("S-1", "MUST", "ise_block_shape", S1_MISSING_REASON)
    else:
        rec.fail(
            "S-1",
            "MUST",
            "ise_block_shape",
            f"ise.assertion_grade invalid: got '{grade}'; "
            "must be unverified|self-attested|validated|human-reviewed",
        )


def _s2(ise: Any, rec: _Recorder) -> None:
    name = "ise_authz_honored"
    authz = _get(ise, "receiver_authorization")
    if not _truthy(authz):
        rec.ok("S-2", "MUST", name)  # absent: the defaults apply
        return
    if not isinstance(authz, Mapping):
        rec.fail(
            "S-2",
            "MUST",
            name,
            f"ise.receiver_authorization must be an object (got {json_type(authz)})",
        )
        return
    invalid = []
    for field in _AUTHZ_FIELDS:
        value = authz.get(field)
        if value is None or isinstance(value, bool):
            continue
        shown = _text(value)
        if shown in ("true", "false", "null"):  # a string upstream would let through
            import json

            shown = json.dumps(value, ensure_ascii=False)
        invalid.append(f"{field}={shown} (must be boolean)")
    if invalid:
        rec.fail(
            "S-2",
            "MUST",
            name,
            "ise.receiver_authorization invalid field values: " + " ".join(invalid),
        )
    else:
        rec.ok("S-2", "MUST", name)


def _s4(ise: Any, rec: _Recorder) -> None:
    verification = _get(ise, "verification")
    if not _truthy(verification):
        return
    problems: list[str] = []
    fresh = _get(verification, "fresh_context")
    if fresh is None:
        problems.append("fresh_context missing")
    elif not isinstance(fresh, bool):
        problems.append(f"fresh_context must be boolean (got type {json_type(fresh)})")
    checker = _get(verification, "checker")
    if _text(checker) == "":
        problems.append("checker missing")
    elif not _slug(checker):
        problems.append(f"checker invalid slug (got '{_text(checker)}')")
    access = _get(verification, "transcript_access")
    if _text(access) == "":
        problems.append("transcript_access missing")
    elif not (isinstance(access, str) and access in _TRANSCRIPT_ACCESS):
        problems.append(
            f"transcript_access invalid (got '{_text(access)}'; must be none|artifact-only)"
        )
    if problems:
        rec.fail("S-4", "MUST", "ise_verification_shape", "".join(p + "; " for p in problems)[:-1])
    else:
        rec.ok("S-4", "MUST", "ise_verification_shape")


def _wants_sections(env: Mapping[str, Any], contract: Contract | None) -> bool:
    """Whether R-1 applies, judged before the payload is read (so it is kept only then)."""
    kind, path = _get(env, "artifact", "kind"), _get(env, "artifact", "path")
    if contract is None or not isinstance(kind, str) or not isinstance(path, str):
        return False
    artifact = contract.artifact_for_kind(kind)
    return bool(artifact and artifact.required_sections and is_markdown_path(path))


# --------------------------------------------------------------------------- all gates


def _edge_contract(env: Mapping[str, Any], contracts: ContractSet) -> Contract | None:
    sender, receiver = _get(env, "from", "eidolon"), _get(env, "to", "eidolon")
    if isinstance(sender, str) and isinstance(receiver, str):
        return contracts.get(sender, receiver)
    return None


def run_gates(
    data: bytes,
    contracts: ContractSet,
    reader: PayloadReader,
    *,
    strict: bool = False,
    limits: Limits | None = None,
    target: str | None = None,
) -> list[GateResult]:
    """Every gate for one envelope, in upstream order, then R-1 (INFO, or MUST when
    ``strict``). Pure apart from ``reader``: ``data`` is the envelope's bytes."""
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
    results = [e1]
    env: Mapping[str, Any] = {} if parsed is None else parsed
    if parsed is not None:
        results += envelope_results(env, target=target)
    contract = _edge_contract(env, contracts)
    keep = _wants_sections(env, contract)
    integrity, facts = integrity_results(env, reader, keep_bytes=keep, target=target)
    results += integrity
    results += edge_results(env, contract, target=target)
    results += context_results(env, contract, target=target)
    results += ise_results(env, target=target)
    if keep and facts is not None and facts.data is not None:
        r1 = section_result(
            facts.data,
            contract,
            _get(env, "artifact", "kind"),
            level="MUST" if strict else "INFO",
            path=_get(env, "artifact", "path"),
            target=target,
        )
        if r1 is not None:
            results.append(r1)
    return results
