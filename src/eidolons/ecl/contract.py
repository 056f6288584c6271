"""Hand-off contracts, pure: the model, its validation, parsing of contract bytes, the
contract set (one contract per edge, the later source winning), and the rules an
envelope is judged by against its edge's contract: C-1..C-4 (the hand-off graph),
D-0..D-3 (the context budget), R-1 (a Markdown payload's required sections,
:func:`section_result`: MUST at the receiver gate, INFO at ``check``) and the high-trust
rule (:func:`high_trust_problem`).

No file access here: :mod:`eidolons.io.contracts` reads the builtin index, the project's
``.eidolons/contracts/`` and ``--contracts`` directories and hands this module bytes. The
rules (sources, directory entries, bytes, content, fail closed) are listed there.
"""

from __future__ import annotations

from eidolons.ecl.envelope import GateResult, Recorder, get, text, token_count, trust_level
from eidolons.ecl.grammar import is_markdown_path, markdown_headings, normalise_section
from eidolons.errors import EidolonsError

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping, Sequence
    from typing import Any

    from eidolons.ecl._contract_schema import JsonSchemaValueException


#: ``Contract.source`` of the contracts shipped in the package.
BUILTIN_SOURCE = "builtin"

#: Largest contract file read. Shipped contracts are about 1 KiB; the cap keeps a stray
#: large file from being parsed at all.
MAX_CONTRACT_BYTES = 64 * 1024

INDEX_FORMAT = "eidolons.contract-index.v1"
#: Between the sources of a contract narrowed by later ones (``builtin + path``).
SOURCE_SEPARATOR = " + "
#: Trust levels, lowest first (an unset level is ``standard``).
TRUST_ORDER = ("low", "standard", "high")


def _union(first: tuple[str, ...], second: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*first, *second)))


class ContractError(EidolonsError):
    """A contract or contract set that cannot be used, never an allow; ``str(error)`` is
    ``"<source>: <problem>"``, which the CLI prints as is."""

    code = "CONTRACT_INVALID"
    exit_code = 2

    def __init__(self, source: str, problem: str) -> None:
        super().__init__(f"{source}: {problem}")
        self.source = source
        self.problem = problem


class _Record:
    """An immutable record with value equality (what ``@dataclass(frozen=True)`` gave,
    without importing :mod:`dataclasses`, which pulls in :mod:`inspect`: ADR 0022)."""

    __slots__: tuple[str, ...] = ()

    def _set(self, values: dict[str, Any]) -> None:
        """Each slot from ``values`` (the constructor's ``locals()``)."""
        for name in self.__slots__:
            object.__setattr__(self, name, values[name])

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({inner})"


class ContractArtifact(_Record):
    """One ``artifacts[]`` entry: an artifact kind the edge accepts and its section rules."""

    __slots__ = ("evidence_anchor_required", "kind", "required_sections", "schema_ref")
    kind: str
    schema_ref: str
    required_sections: tuple[str, ...]
    evidence_anchor_required: bool

    def __init__(
        self,
        kind: str,
        schema_ref: str,
        required_sections: tuple[str, ...] = (),
        evidence_anchor_required: bool = False,
    ) -> None:
        self._set(locals())

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "schema_ref": self.schema_ref,
            "required_sections": list(self.required_sections),
            "evidence_anchor_required": self.evidence_anchor_required,
        }


class Contract(_Record):
    """A validated hand-off contract for the edge ``from_ -> to`` (build it with
    :meth:`from_dict`, which validates). ``source``: ``builtin`` or the file it came from."""

    __slots__ = (
        "artifacts",
        "contract_version",
        "edge_origin",
        "from_",
        "notes",
        "performatives_allowed",
        "required_handles",
        "source",
        "to",
        "token_budget_max",
        "trust_level",
    )
    from_: str
    to: str
    edge_origin: str
    performatives_allowed: tuple[str, ...]
    artifacts: tuple[ContractArtifact, ...]
    token_budget_max: int | None
    required_handles: tuple[str, ...]
    trust_level: str | None
    notes: str | None
    source: str
    contract_version: str

    def __init__(
        self,
        from_: str,
        to: str,
        edge_origin: str,
        performatives_allowed: tuple[str, ...],
        artifacts: tuple[ContractArtifact, ...],
        token_budget_max: int | None = None,
        required_handles: tuple[str, ...] = (),
        trust_level: str | None = None,
        notes: str | None = None,
        source: str = BUILTIN_SOURCE,
        contract_version: str = "1.0",
    ) -> None:
        self._set(locals())

    @classmethod
    def from_dict(cls, data: Any, source: str) -> Contract:
        """Validate ``data`` against ``handoff-contract.v1.json`` and build the contract;
        :class:`ContractError` naming ``source`` if it does not match."""
        from eidolons.ecl._contract_schema import JsonSchemaValueException, validate_contract

        try:
            validate_contract(data)
        except JsonSchemaValueException as exc:
            raise ContractError(source, _schema_problem(exc)) from None
        return cls._build(data, source)

    @classmethod
    def _build(cls, data: Any, source: str) -> Contract:
        """The contract of a document valid under the schema (:meth:`from_dict` has just
        validated it, or it is the shipped index, validated when it was built and by the
        tests: ADR 0022)."""
        artifacts = tuple(
            ContractArtifact(
                kind=item["kind"],
                schema_ref=item["schema_ref"],
                required_sections=tuple(item.get("required_sections", ())),
                evidence_anchor_required=item.get("evidence_anchor_required", False),
            )
            for item in data["artifacts"]
        )
        kinds = [a.kind for a in artifacts]
        duplicated = sorted({k for k in kinds if kinds.count(k) > 1})
        if duplicated:
            raise ContractError(
                source, f"artifact kind listed more than once: {', '.join(duplicated)}"
            )
        delta = data.get("context_delta", {})
        budget = delta.get("token_budget_max")
        return cls(
            from_=data["from"],
            to=data["to"],
            edge_origin=data["edge_origin"],
            performatives_allowed=tuple(data["performatives_allowed"]),
            artifacts=artifacts,
            # The schema accepts 4000.0 as an integer (JSON Schema does); store an int.
            token_budget_max=None if budget is None else int(budget),
            required_handles=tuple(delta.get("required_handles", ())),
            trust_level=data.get("trust_level"),
            notes=data.get("notes"),
            source=source,
            contract_version=data["contract_version"],
        )

    def to_dict(self) -> dict[str, Any]:
        """The contract in its canonical document form (no ``source``), defaults written out;
        ``from_dict(d).to_dict() == d`` for each shipped file."""
        out: dict[str, Any] = {
            "contract_version": self.contract_version,
            "from": self.from_,
            "to": self.to,
            "edge_origin": self.edge_origin,
            "performatives_allowed": list(self.performatives_allowed),
            "artifacts": [a.to_dict() for a in self.artifacts],
        }
        delta: dict[str, Any] = {}
        if self.token_budget_max is not None:
            delta["token_budget_max"] = self.token_budget_max
        if self.required_handles or delta:
            delta["required_handles"] = list(self.required_handles)
        if delta:
            out["context_delta"] = delta
        if self.trust_level is not None:
            out["trust_level"] = self.trust_level
        if self.notes is not None:
            out["notes"] = self.notes
        return out

    @property
    def sources(self) -> tuple[str, ...]:
        """Every file (or ``builtin``) this contract was made from, lowest first."""
        return tuple(self.source.split(SOURCE_SEPARATOR))

    def narrowed_by(self, other: Contract) -> Contract:
        """This edge as a later source may narrow it, never widen it (ADR 0008): lists
        intersected, the smaller budget, sections and handles united, the higher trust."""
        if other.key != self.key:
            raise ValueError(f"cannot narrow {self.key} with {other.key}")
        theirs = {a.kind: a for a in other.artifacts}
        artifacts = tuple(
            ContractArtifact(
                kind=a.kind,
                schema_ref=a.schema_ref,
                required_sections=_union(a.required_sections, theirs[a.kind].required_sections),
                evidence_anchor_required=a.evidence_anchor_required
                or theirs[a.kind].evidence_anchor_required,
            )
            for a in self.artifacts
            if a.kind in theirs
        )
        budgets = [b for b in (self.token_budget_max, other.token_budget_max) if b is not None]
        trust = max(
            (self.trust_level, other.trust_level), key=lambda t: TRUST_ORDER.index(t or "standard")
        )
        return Contract(
            from_=self.from_,
            to=self.to,
            edge_origin=self.edge_origin,
            performatives_allowed=tuple(
                p for p in self.performatives_allowed if p in other.performatives_allowed
            ),
            artifacts=artifacts,
            token_budget_max=min(budgets) if budgets else None,
            required_handles=_union(self.required_handles, other.required_handles),
            trust_level=trust,
            notes=self.notes,
            source=self.source + SOURCE_SEPARATOR + other.source,
            contract_version=self.contract_version,
        )

    @property
    def key(self) -> tuple[str, str]:
        """The edge ``(from, to)``: the identity of a contract within a set."""
        return (self.from_, self.to)

    @property
    def file_name(self) -> str:
        """The only file name this contract may have: ``<from>-to-<to>.yaml``."""
        return f"{self.from_}-to-{self.to}.yaml"

    @property
    def kinds(self) -> tuple[str, ...]:
        """The artifact kinds the edge accepts, in contract order."""
        return tuple(a.kind for a in self.artifacts)

    def allows_performative(self, performative: str) -> bool:
        """True if ``performative`` is in ``performatives_allowed`` (exact match)."""
        return performative in self.performatives_allowed

    def artifact_for_kind(self, kind: str) -> ContractArtifact | None:
        """The ``artifacts[]`` entry for ``kind``, or None if the edge does not accept it."""
        for artifact in self.artifacts:
            if artifact.kind == kind:
                return artifact
        return None


def _schema_problem(exc: JsonSchemaValueException) -> str:
    message = exc.message
    if message.startswith("data"):
        message = "contract" + message[len("data") :]
    return f"does not match handoff-contract.v1: {message}"


def _yaml_loader() -> Any:
    """The strict safe loader class, built once (only YAML input imports yaml)."""
    if _LOADER:
        return _LOADER[0]
    import yaml
    from yaml.constructor import ConstructorError

    base: Any = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader

    def construct_object(self: Any, node: Any, deep: bool = False) -> Any:
        # A node met a second time is an alias (*name); a contract never needs one, and
        # refusing them rules out alias-expansion blow-ups.
        if node in self.constructed_objects or node in self.recursive_objects:
            raise ConstructorError(
                None, None, "aliases (*name) are not allowed in a contract", node.start_mark
            )
        return base.construct_object(self, node, deep)

    def construct_mapping(self: Any, node: Any, deep: bool = False) -> dict[str, Any]:
        if not isinstance(node, yaml.MappingNode):
            raise ConstructorError(
                None, None, f"expected a mapping node, found {node.id}", node.start_mark
            )
        mapping: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise ConstructorError(
                    None, None, "merge keys (<<) are not allowed in a contract", key_node.start_mark
                )
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str):
                raise ConstructorError(
                    None, None, f"mapping key {key!r} is not a string", key_node.start_mark
                )
            if key in mapping:
                raise ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping

    methods = {"construct_object": construct_object, "construct_mapping": construct_mapping}
    _LOADER.append(type("ContractYamlLoader", (base,), methods))
    return _LOADER[0]


_LOADER: list[Any] = []


def _yaml_problem(exc: Exception) -> str:
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if problem is None:
        return f"invalid YAML: {exc}"
    where = "" if mark is None else f" (line {mark.line + 1}, column {mark.column + 1})"
    context = getattr(exc, "context", None)
    prefix = f"{context}: " if context else ""
    return f"invalid YAML: {prefix}{problem}{where}"


def parse_contract_bytes(data: bytes, source: str) -> Contract:
    """Parse and validate one contract document from ``data`` (the file name is the
    caller's to check)."""
    import yaml

    if len(data) > MAX_CONTRACT_BYTES:
        raise ContractError(source, f"larger than {MAX_CONTRACT_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ContractError(source, f"not valid UTF-8 (byte {exc.start})") from None
    try:
        document = yaml.load(text, Loader=_yaml_loader())
    except yaml.YAMLError as exc:
        raise ContractError(source, _yaml_problem(exc)) from None
    except RecursionError:
        raise ContractError(source, "invalid YAML: nested too deeply") from None
    except (ValueError, OverflowError, TypeError) as exc:  # a scalar PyYAML cannot build
        raise ContractError(source, f"invalid YAML value: {exc}") from None
    if not isinstance(document, dict):
        found = "an empty document" if document is None else type(document).__name__
        raise ContractError(source, f"top level must be a mapping, found {found}")
    return Contract.from_dict(document, source)


def edge_key(from_: str, to: str) -> str:
    """The key of an edge in ``index.json``: ``"<from>-><to>"`` (slugs never contain ``>``)."""
    return f"{from_}->{to}"


def edge_of(key: str) -> tuple[str, str]:
    """The ``(from, to)`` an :func:`edge_key` names."""
    from_, _, to = key.partition("->")
    return from_, to


def index_entries(raw: bytes, source: str) -> dict[str, Any]:
    """The ``contracts`` object of a shipped ``index.json`` (bytes), edge key to entry,
    each entry not yet built (:func:`index_contract` builds one). Raises
    :class:`ContractError` for bytes that are not such an index."""
    from eidolons.ecl.grammar import loads  # the package's own file, not untrusted input

    try:
        index = loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ContractError(source, f"cannot read the shipped contract index: {exc}") from None
    if not isinstance(index, dict) or index.get("format") != INDEX_FORMAT:
        raise ContractError(source, f"not a contract index of format {INDEX_FORMAT!r}")
    entries = index.get("contracts")
    if not isinstance(entries, dict):
        raise ContractError(source, "'contracts' must be an object")
    return entries


def index_contract(key: str, entry: Any, *, validate: bool = False) -> Contract:
    """The contract of one index entry. Without ``validate`` it is built as it is (the
    index was validated when ``scripts/build_contracts.py`` wrote it: ADR 0022); a damaged
    entry, or one whose key or file name is not its contract's, is a :class:`ContractError`."""
    if not isinstance(entry, dict):
        raise ContractError(BUILTIN_SOURCE, f"entry {key!r} must be an object")
    file_name = entry.get("file")
    where = f"{BUILTIN_SOURCE} ({file_name})"
    document = entry.get("contract")
    if validate:
        contract = Contract.from_dict(document, BUILTIN_SOURCE)
    else:
        try:
            contract = Contract._build(document, BUILTIN_SOURCE)
        except (KeyError, TypeError, ValueError, AttributeError, ArithmeticError) as exc:
            raise ContractError(where, f"damaged index entry {key!r}: {exc!r}") from None
    if key != edge_key(contract.from_, contract.to) or file_name != contract.file_name:
        raise ContractError(where, f"index entry {key!r} does not match its contract")
    return contract


class ContractSetUnavailable:
    """A contract set that failed to load: a typed, fail-closed value (never an
    exception passed around as one). Every edge is refused against it (UNDECLARED_EDGE);
    ``reason`` says why, ``error`` is the :class:`ContractError`."""

    __slots__ = ("error",)

    def __init__(self, error: ContractError) -> None:
        self.error = error

    @property
    def reason(self) -> str:
        return str(self.error)

    def get(self, from_: str, to: str) -> None:
        """No edge is declared in a set that failed to load."""
        return None

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"ContractSetUnavailable({self.reason!r})"


class ContractSet:
    """The effective contracts, one per edge: a later source can add and narrow edges
    (:meth:`Contract.narrowed_by`), never widen one (ADR 0008). ``index`` (the shipped
    index's entries) is the lowest source, built one edge at a time when first asked for;
    a damaged entry raises :class:`ContractError` (:meth:`checked`: the unavailable set)."""

    def __init__(
        self,
        contracts: Iterable[Contract] = (),
        sources: Sequence[str] = (),
        *,
        index: dict[str, Any] | None = None,
    ) -> None:
        self._by_edge: dict[tuple[str, str], Contract] = {}
        self._unbuilt: dict[str, Any] = dict(index) if index else {}
        for contract in contracts:
            known = self.get(*contract.key)
            self._by_edge[contract.key] = contract if known is None else known.narrowed_by(contract)
        #: The sources read, in precedence order (lowest first): "builtin" and directories.
        self.sources: tuple[str, ...] = tuple(sources)

    def get(self, from_: str, to: str) -> Contract | None:
        """The contract of edge ``from_ -> to``, or None: an undeclared edge."""
        found = self._by_edge.get((from_, to))
        if found is None and self._unbuilt:
            key = edge_key(from_, to)
            if key in self._unbuilt:
                found = self._by_edge[(from_, to)] = index_contract(key, self._unbuilt.pop(key))
        return found

    def checked(self, from_: str, to: str) -> ContractSet | ContractSetUnavailable:
        """This set once edge ``from_ -> to`` is built, or the unavailable set if its
        index entry is damaged (fail closed)."""
        try:
            self.get(from_, to)
        except ContractError as exc:
            return ContractSetUnavailable(exc)
        return self

    def _built(self) -> dict[tuple[str, str], Contract]:
        for key in list(self._unbuilt):  # no later source names these edges (see __init__)
            contract = index_contract(key, self._unbuilt.pop(key))
            self._by_edge[contract.key] = contract
        return self._by_edge

    def receivers(self) -> set[str]:
        """Every receiver an edge of this set names (from the index's keys: none is built)."""
        return {edge_of(key)[1] for key in self._unbuilt} | {to for _, to in self._by_edge}

    def inbound(self, to: str) -> list[Contract]:
        """Every contract whose receiver is ``to``, sorted by sender."""
        return sorted((c for c in self._built().values() if c.to == to), key=lambda c: c.key)

    def edges(self) -> list[Contract]:
        """Every contract, sorted by ``(from, to)``."""
        return sorted(self._built().values(), key=lambda c: c.key)

    def __len__(self) -> int:
        return len(self._built())

    def __iter__(self) -> Iterator[Contract]:
        return iter(self.edges())

    def __contains__(self, edge: object) -> bool:
        return edge in self._built()


#: what a gate takes as its ``contracts``: a set, the typed failure of loading one, or that
#: error (:func:`as_contract_set` makes any other value the unavailable set too)
Contracts = ContractSet | ContractSetUnavailable | ContractError


def as_contract_set(contracts: object) -> ContractSet | ContractSetUnavailable:
    """The one rule for a caller's ``contracts``: a set (or the typed failure of loading
    one) as given; a :class:`ContractError` (the older spelling of a set that failed to
    load), any other exception, or any other value is the unavailable set, which refuses
    every edge (fail closed, never an allow)."""
    if isinstance(contracts, ContractSetUnavailable | ContractSet):
        return contracts
    if isinstance(contracts, ContractError):
        return ContractSetUnavailable(contracts)
    if isinstance(contracts, Exception):
        return ContractSetUnavailable(ContractError("contracts", str(contracts)))
    return ContractSetUnavailable(ContractError("contracts", f"not a contract set: {contracts!r}"))


def is_high_trust(env: Mapping[str, Any], contract: Contract | None = None) -> bool:
    """The higher of the envelope's and the edge contract's trust: dropping
    ``constraints`` must not downgrade a high-trust edge."""
    return trust_level(env) == "high" or (contract is not None and contract.trust_level == "high")


def high_trust_problem(env: Mapping[str, Any], contract: Contract | None = None) -> str | None:
    """At trust high (the envelope's or the edge's) the method must be hmac-sha256: the
    receiver refuses UNVERIFIED, the sender refuses to write, I-5 reports. None when it
    holds."""
    method = get(env, "integrity", "method")
    if not is_high_trust(env, contract) or method == "hmac-sha256":
        return None
    return (
        "trust_level high (edge contract or envelope) requires hmac-sha256 integrity or a "
        f"sender signature, the envelope uses {text(method)}"
    )


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

    if isinstance(delta, dict):
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

    summary = delta.get("summary") if isinstance(delta, dict) else None
    heuristic = (len(text(summary).encode("utf-8", "surrogatepass")) + 1) // 4
    if heuristic <= 200:
        rec.ok("D-3", "SHOULD", "summary_within_200_tokens")
    else:
        rec.warn("D-3", "SHOULD", "summary_within_200_tokens", f"heuristic≈{heuristic}")
    return rec.out


def section_result(
    payload: bytes | bytearray,
    contract: Contract | None,
    kind: str | None,
    *,
    level: str = "INFO",
    path: str | None = None,
    target: str | None = None,
) -> GateResult | None:
    """R-1: each ``required_sections`` name of the contract's entry for ``kind`` is a
    heading (both normalised); the reason lists the missing ones in contract order.
    None when it does not apply (no contract, kind or sections, or ``path`` given and not
    Markdown)."""
    if contract is None or kind is None:
        return None
    artifact = contract.artifact_for_kind(kind)
    if artifact is None or not artifact.required_sections:
        return None
    if path is not None and not is_markdown_path(path):
        return None
    found = {normalise_section(t) for _, t in markdown_headings(payload.decode("utf-8", "replace"))}
    missing = [s for s in artifact.required_sections if normalise_section(s) not in found]
    name = "required_sections_present"
    if missing:
        return GateResult(
            "R-1", level, "fail", name, "missing sections: " + ", ".join(missing), target
        )
    return GateResult("R-1", level, "ok", name, None, target)
