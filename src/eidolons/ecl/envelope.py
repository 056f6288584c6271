"""The ECL envelope (wire format 1.0 to 2.1): the model and its strict parse.

Pure. :func:`parse_envelope` refuses (:class:`EnvelopeError`, the ``malformed`` verdict)
what integrity depends on: bytes over the cap, bad UTF-8 or a BOM, non-strict JSON
(:mod:`eidolons.ecl.strict_json`), a top level that is not an object, or a missing or
ill-typed version, agent, performative, ``artifact.path`` (which must be a safe relative
path) or integrity method and value. Every other schema rule is a string of
:meth:`Envelope.schema_problems` (:mod:`eidolons.ecl.rules.envelope`).
"""

from __future__ import annotations

from eidolons.ecl.grammar import is_safe_relative_path
from eidolons.ecl.limits import Limits
from eidolons.ecl.rules.envelope import PERFORMATIVES, REQUIRED_FIELDS, schema_problems
from eidolons.ecl.strict_json import json_type, loads_strict
from eidolons.errors import EnvelopeError

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["PERFORMATIVES", "REQUIRED_FIELDS", "AgentRef", "Envelope", "parse_envelope"]


class AgentRef:
    """``{eidolon, version}``. ``version`` is ``n/a`` when the envelope omits it."""

    __slots__ = ("eidolon", "version")

    def __init__(self, eidolon: str, version: str) -> None:
        self.eidolon = eidolon
        self.version = version

    def __repr__(self) -> str:
        return f"AgentRef({self.eidolon!r}, {self.version!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AgentRef) and self._key() == other._key()

    def _key(self) -> tuple[str, str]:
        return self.eidolon, self.version

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        return f"{self.eidolon}@{self.version}"


class Envelope:
    """A parsed envelope: ``data`` is the object as received (unknown and ``x_*`` fields
    kept), the typed attributes the fields integrity depends on."""

    __slots__ = (
        "artifact",
        "artifact_kind",
        "artifact_path",
        "data",
        "envelope_version",
        "integrity_method",
        "integrity_value",
        "message_id",
        "parent_id",
        "performative",
        "recipient",
        "sender",
        "thread_id",
    )

    def __init__(
        self,
        envelope_version: str,
        sender: AgentRef,
        recipient: AgentRef,
        performative: str,
        artifact_path: str,
        integrity_method: str,
        integrity_value: str,
        data: Mapping[str, Any],
    ) -> None:
        self.envelope_version = envelope_version
        self.sender = sender
        self.recipient = recipient
        self.performative = performative
        self.artifact_path = artifact_path
        self.integrity_method = integrity_method
        self.integrity_value = integrity_value
        self.data = data
        # the optional ids, typed loosely: absent or wrong in a valid parse reads as None
        ids = []
        for key in ("message_id", "thread_id", "parent_id"):
            value = data.get(key)
            ids.append(value if isinstance(value, str) and value else None)
        self.message_id, self.thread_id, self.parent_id = ids
        self.artifact: Mapping[str, Any] = data["artifact"]
        kind = self.artifact.get("kind")
        self.artifact_kind = kind if isinstance(kind, str) else None

    def __repr__(self) -> str:
        return (
            f"Envelope({self.sender} -> {self.recipient} {self.performative}, "
            f"message_id={self.message_id!r})"
        )

    @classmethod
    def from_dict(cls, data: Any) -> Envelope:
        if not isinstance(data, dict):
            raise EnvelopeError(f"top level must be a JSON object, got {json_type(data)}")
        fields = _needs(data)
        version, sender_ref, sender_name, recipient_ref, recipient_name, performative = fields[:6]
        path, method, value = fields[7], fields[9], fields[10]
        agents = []
        for ref, name in ((sender_ref, sender_name), (recipient_ref, recipient_name)):
            given = ref.get("version")
            agents.append(AgentRef(name, given if isinstance(given, str) and given else "n/a"))
        sender, recipient = agents
        if not is_safe_relative_path(path):
            raise EnvelopeError(
                f"artifact.path {path!r} is not a safe relative path "
                "(no leading '/', no '..', no control character or backslash, "
                "no empty or '.' component)"
            )
        return cls(version, sender, recipient, performative, path, method, value, data)

    @property
    def context_delta(self) -> Mapping[str, Any] | None:
        value = self.data.get("context_delta")
        return value if isinstance(value, dict) else None

    def schema_problems(self) -> list[str]:
        """Every violation of the ECL envelope schema (digest section 2) that
        :meth:`from_dict` does not already refuse, as human-readable strings."""
        return schema_problems(self.data)


def parse_envelope(data: bytes, limits: Limits | None = None) -> Envelope:
    """Strictly parse envelope bytes. Raises :class:`EnvelopeError` (verdict malformed)."""
    return Envelope.from_dict(loads_strict(data, limits))


#: the fields integrity depends on, in the order they are checked: (path, kind), where a
#: ``name`` is a non-empty string
_NEEDED: tuple[tuple[tuple[str, ...], Any], ...] = (
    (("envelope_version",), str),
    (("from",), dict),
    (("from", "eidolon"), "name"),
    (("to",), dict),
    (("to", "eidolon"), "name"),
    (("performative",), str),
    (("artifact",), dict),
    (("artifact", "path"), str),
    (("integrity",), dict),
    (("integrity", "method"), str),
    (("integrity", "value"), str),
)


def _needs(data: Mapping[str, Any]) -> list[Any]:
    """The values of :data:`_NEEDED` in ``data``, each present, not null and of its kind,
    else EnvelopeError naming the first that is not."""
    out = []
    for path, kind in _NEEDED:
        node = data
        for key in path[:-1]:
            node = node[key]
        label = ".".join(path)
        value = node.get(path[-1])
        if value is None:
            raise EnvelopeError(f"missing required field {label}")
        if not isinstance(value, dict if kind is dict else str):
            shape = "an object" if kind is dict else "a string"
            raise EnvelopeError(f"{label} must be {shape}, got {json_type(value)}")
        if kind == "name" and not value:
            raise EnvelopeError(f"{label} is empty")
        out.append(value)
    return out
