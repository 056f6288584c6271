"""A thread's hand-offs as a chain of hops: the model behind ``eidolons trace``'s views.

A :class:`Hop` is one hand-off (by ``message_id``), described by its envelope or else by
its trace events (unknown fields stay None); its decisions are attached in trace order.
A verdict line the store's reader marked ``not_counted`` is no decision: it is kept in
``Hop.uncounted``. A hop is judged as its addressee judged it: a receiver's decision made
under another name (``--as forge`` on a hand-off to vigil) is a probe, listed apart
(:attr:`Hop.probes`), never the hop's refusal (:meth:`Hop.refusal`), and the addressee's
refusal stands whatever is recorded after it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from eidolons.trace.store import NOT_COUNTED, WRITTEN_BY

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

UNKNOWN = "?"


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def split_label(label: Any) -> tuple[str | None, str | None]:
    """``atlas@1.4.2`` -> (``atlas``, ``1.4.2``); anything else -> what can be told."""
    text = _str(label)
    if text is None:
        return None, None
    name, sep, version = text.partition("@")
    return (name or None), (version or None) if sep else None


class Decision:
    """One gate decision recorded in the trace for a hop."""

    __slots__ = tuple(
        (
            "code decision duration_ms event evidence failures gate host reason receipt_status "
            "receiver record ts verdict"
        ).split()
    )

    def __init__(self, event: Mapping[str, Any]) -> None:
        self.record = event  # the line as read, for checking its receipt
        self.receipt_status: str | None = None  # set by eidolons.trace.chain.evidence
        self.event = str(event.get("event"))
        self.gate = _str(event.get("gate")) or UNKNOWN
        self.ts = _str(event.get("ts"))
        passed = self.event == "verify_pass"
        self.verdict = _str(event.get("verdict")) or ("pass" if passed else "fail")
        self.code = _str(event.get("verify_failure_code"))
        self.decision = _str(event.get("decision")) or ("accepted" if passed else None)
        self.reason = _str(event.get("reason"))
        self.receiver = _str(event.get("receiver"))
        if self.gate == "receiver" and self.receiver is None:
            self.receiver = split_label(event.get("to"))[0]  # the name it judged as
        self.host = _str(event.get(WRITTEN_BY))  # set by a store that knows the writer
        failures = event.get("failures")
        failures = failures if isinstance(failures, list) else []
        self.failures = [f for f in failures if isinstance(f, str)]
        evidence = event.get("evidence")
        if isinstance(evidence, Mapping):
            evidence = evidence.get("kind")
        self.evidence = _str(evidence)
        self.duration_ms = _count(event.get("duration_ms"))

    @property
    def passed(self) -> bool:
        return self.event == "verify_pass"

    @property
    def refused(self) -> bool:
        return self.event == "verify_fail" and self.decision == "refused"

    def to_dict(self) -> dict[str, Any]:
        return {
            "gate": self.gate,
            "event": self.event,
            "verdict": self.verdict,
            "code": self.code,
            "decision": self.decision,
            "reason": self.reason,
            "receiver": self.receiver,
            "evidence": self.evidence or "unsigned",
            "receipt": self.receipt_status,
            "duration_ms": self.duration_ms,
            "ts": self.ts,
            "host": self.host,
        }


class Hop:
    """One hand-off: who handed what to whom, and what the gates decided."""

    __slots__ = tuple(
        (
            "decisions envelope host kind message_id model objective parent_id path performative "
            "recipient recipient_version recorded_recipient sender sender_version thread_id tier "
            "token_budget tokens ts uncounted unverifiable"
        ).split()
    )

    def __init__(self, message_id: str) -> None:
        self.message_id = message_id
        self.thread_id: str | None = None
        self.parent_id: str | None = None
        self.sender: str | None = None
        self.sender_version: str | None = None
        self.recipient: str | None = None
        self.recipient_version: str | None = None
        self.recorded_recipient: str | None = None  # as the trace's events name it
        self.performative: str | None = None
        self.kind: str | None = None
        self.path: str | None = None
        self.tokens: int | None = None
        self.token_budget: int | None = None
        self.tier: str | None = None
        self.model: str | None = None
        self.host: str | None = None
        self.ts: str | None = None
        self.objective: str | None = None
        self.envelope: str | None = None  # the envelope file, when read from one
        self.decisions: list[Decision] = []
        self.uncounted: list[Decision] = []  # verdict-looking lines the gate does not count
        self.unverifiable: str | None = None  # why its envelope has no digest to check

    def __repr__(self) -> str:
        return f"Hop({self.message_id!r}, {self.sender} -> {self.recipient} {self.performative})"

    @classmethod
    def from_envelope(cls, data: Mapping[str, Any], source: str | None = None) -> Hop:
        """A hop described by an envelope object (parsed strictly by the caller)."""
        hop = cls(_str(data.get("message_id")) or UNKNOWN)
        hop.envelope = source
        hop.thread_id = _str(data.get("thread_id"))
        hop.parent_id = _str(data.get("parent_id"))
        for attr, key in (("sender", "from"), ("recipient", "to")):
            ref = data.get(key)
            if isinstance(ref, Mapping):
                setattr(hop, attr, _str(ref.get("eidolon")))
                setattr(hop, f"{attr}_version", _str(ref.get("version")))
        hop.performative = _str(data.get("performative"))
        art = data.get("artifact")
        if isinstance(art, Mapping):
            hop.kind, hop.path = _str(art.get("kind")), _str(art.get("path"))
        cd = data.get("context_delta")
        if isinstance(cd, Mapping):
            hop.tokens = _count(cd.get("tokens_used"))
            hop.token_budget = _count(cd.get("token_budget"))
        tr = data.get("trace")
        if isinstance(tr, Mapping):
            hop.ts, hop.host = _str(tr.get("ts")), _str(tr.get("host"))
            hop.model, hop.tier = _str(tr.get("model")), _str(tr.get("tier"))
        hop.objective = _str(data.get("objective"))
        return hop

    def describe_from_event(self, event: Mapping[str, Any]) -> None:
        """Fill the fields still unknown from a trace event (emit first, then gates). A
        receiver's event names the receiver it judged as, not the addressee."""
        if self.thread_id is None:
            self.thread_id = _str(event.get("thread_id"))
        if self.sender is None:
            self.sender, self.sender_version = split_label(event.get("from"))
        if self.recipient is None and event.get("gate") != "receiver":
            self.recipient, self.recipient_version = split_label(event.get("to"))
        for attr, key in (
            ("parent_id", "parent_id"),
            ("performative", "performative"),
            ("kind", "artifact_kind"),
            ("path", "artifact_path"),
            ("model", "model"),
            ("tier", "tier"),
            ("ts", "ts"),
        ):
            if getattr(self, attr) is None:
                setattr(self, attr, _str(event.get(key)))
        if self.tokens is None:
            self.tokens = _count(event.get("context_tokens"))

    # -- verdicts
    def decided(self, gate: str) -> list[Decision]:
        """The decisions of ``gate`` made for the hop, in trace order (probes aside)."""
        return [d for d in self.decisions if d.gate == gate and self.by_addressee(d)]

    def latest(self, gate: str) -> Decision | None:
        found = self.decided(gate)
        return found[-1] if found else None

    def by_addressee(self, d: Decision) -> bool:
        """Whether ``d`` speaks for the hop: a gate's decision, or a receiver's made as
        the hop's addressee, as the envelope or the trace's own record of the hand-off
        names it (an envelope rewritten later cannot turn a refusal into a probe; an
        addressee or receiver not known counts, hiding nothing)."""
        named = {self.recipient, self.recorded_recipient} - {None}
        return d.gate != "receiver" or not named or d.receiver in named | {None}

    @property
    def probes(self) -> list[Decision]:
        """Receivers' decisions under another name than the addressee's."""
        return [d for d in self.decisions if not self.by_addressee(d)]

    def refusal(self, gate: str | None = None) -> Decision | None:
        """The hop's refusal (of ``gate``, else of any gate), probes aside: the addressee's
        latest ``verify_fail`` whatever came after it (a recorded refusal is a fact, and a
        receiver's later line proves nothing: any writer of the trace can append one),
        else the orchestrator's latest verdict when it is a ``verify_fail``."""
        if gate in (None, "receiver"):
            refused = [d for d in self.decided("receiver") if d.event == "verify_fail"]
            if refused or gate == "receiver":
                return refused[-1] if refused else None
        # any other gate's, an upstream line that names none ("?") included
        others = [d for d in self.decisions if d.gate != "receiver" and gate in (None, d.gate)]
        return others[-1] if others and others[-1].event == "verify_fail" else None

    def receiver_side(self, gate: str | None = None) -> dict[str, Any]:
        """What the views report of :meth:`refusal` (``refused``) and of the probes."""
        d = self.refusal(gate)
        refused = None
        if d is not None:
            who = (d.receiver or self.recipient) if d.gate == "receiver" else d.gate
            refused = {"receiver": who, "code": d.code or d.verdict, "host": d.host}
        probes = [
            {"receiver": p.receiver, "verdict": p.verdict, "code": p.code, "host": p.host}
            for p in self.probes
        ]
        return {"refused": refused, "probes": probes}


GATE_EVENTS = ("verify_pass", "verify_fail")


def hops_from_events(events: Iterable[Mapping[str, Any]]) -> list[Hop]:
    """The hops a trace's events describe, in first-seen order (see :func:`order_hops`)."""
    hops: dict[str, Hop] = {}
    pending: dict[str, list[Mapping[str, Any]]] = {}
    for event in events:
        mid = _str(event.get("message_id"))
        if mid is None:
            continue
        hop = hops.get(mid)
        if hop is None:
            hop = hops[mid] = Hop(mid)
        if event.get("event") == "emit":
            hop.describe_from_event(event)
        else:
            pending.setdefault(mid, []).append(event)
        if event.get("event") in GATE_EVENTS:
            counted = not event.get(NOT_COUNTED)
            (hop.decisions if counted else hop.uncounted).append(Decision(event))
    for mid, rest in pending.items():  # gate events describe what no emit event did
        for event in rest:
            hops[mid].describe_from_event(event)
    return list(hops.values())


def merge(described: Iterable[Hop], recorded: Iterable[Hop]) -> list[Hop]:
    """Hops read from envelopes (``described``, one per envelope file, duplicates kept)
    with the decisions recorded in the trace for the same message ids attached; hops only
    the trace knows are kept too."""
    out = list(described)
    by_id: dict[str, list[Hop]] = {}
    for hop in out:
        by_id.setdefault(hop.message_id, []).append(hop)
    for hop in recorded:
        same = by_id.get(hop.message_id)
        if same is None:
            by_id[hop.message_id] = [hop]
            out.append(hop)
            continue
        for have in same:
            if have is not hop:
                have.decisions.extend(hop.decisions)
                have.uncounted.extend(hop.uncounted)
                have.recorded_recipient = hop.recipient
                if have.thread_id is None:
                    have.thread_id = hop.thread_id
    return out


def order_hops(hops: Iterable[Hop]) -> list[Hop]:
    """Parents before children; roots and siblings by (ts, envelope file, message_id)."""
    items = list(hops)

    def key(h: Hop) -> tuple[str, str, str]:  # ties as upstream orders them: by file path
        return (h.ts or "", h.envelope or "", h.message_id)

    ids = {h.message_id for h in items}
    children: dict[str, list[Hop]] = {}
    roots: list[Hop] = []
    for h in items:
        if h.parent_id and h.parent_id in ids and h.parent_id != h.message_id:
            children.setdefault(h.parent_id, []).append(h)
        else:
            roots.append(h)
    out: list[Hop] = []
    done: set[int] = set()
    stack = sorted(roots, key=key, reverse=True)
    while stack:
        h = stack.pop()
        if id(h) in done:
            continue
        done.add(id(h))
        out.append(h)
        stack.extend(sorted(children.get(h.message_id, []), key=key, reverse=True))
    out.extend(sorted((h for h in items if id(h) not in done), key=key))  # cycles
    return out
