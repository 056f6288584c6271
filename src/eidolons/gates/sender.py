"""The sender's side: build an envelope for a payload and write it beside the payload.

Written atomically, never over a file unless ``force``; ids are UUIDv7; digest and HMAC
from one read of the payload; the envelope is placed, then its ``emit`` event recorded,
and taken back if the record fails (ADR 0006). :func:`build_envelope` is pure;
:func:`emit` does the I/O.
"""

from __future__ import annotations

import os
import secrets
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eidolons._text import plural, printable
from eidolons.ecl.builder import ContextDelta, build_envelope, parse_agent
from eidolons.ecl.contract import Contracts, ContractSetUnavailable, as_contract_set
from eidolons.ecl.envelope import AgentRef, Envelope
from eidolons.ecl.events import EventType, GateName, trace_event
from eidolons.ecl.grammar import Limits, is_safe_file_name
from eidolons.ecl.integrity import Digest, RefusalCode
from eidolons.ecl.receiver import Failure, contract_failures, envelope_failures, reason_line
from eidolons.errors import EidolonsError, InputError, UsageError
from eidolons.gates.trigger import find_handoff
from eidolons.io.config import HANDOFF_DIR, payload_key
from eidolons.io.paths import realpath
from eidolons.io.payload import (
    ENVELOPE_SUFFIX,
    PayloadError,
    PayloadLocation,
    default_envelope_path,
    hash_payload,
    locate_payload,
)
from eidolons.trace.store import TraceStore, open_store

__all__ = [
    "ContextDelta",
    "EmitResult",
    "build_envelope",
    "emit",
    "emit_event",
    "parse_agent",
    "uuid7",
]


def uuid7() -> str:
    """A UUIDv7 (RFC 9562): 48-bit Unix milliseconds, version 7, 74 random bits."""
    ms = time.time_ns() // 1_000_000
    rand = secrets.randbits(74)
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= (rand >> 62) << 64  # 12 bits rand_a
    value |= 0b10 << 62  # variant
    value |= rand & ((1 << 62) - 1)
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@dataclass(frozen=True, slots=True)
class EmitResult:
    envelope_path: Path
    envelope: dict[str, Any]
    trace_path: str | None
    #: What the receiver would refuse, written anyway because ``check`` was off.
    refusals: list[Failure] = field(default_factory=list)
    #: Where the payload was copied to: a sealed project's hand-off directory (ADR 0015).
    placed: Path | None = None


class HandoffRefused(EidolonsError):
    """The sender's self-check: the receiver would refuse this hand-off, so nothing was
    written. ``failures`` are the receiver's own (code, check, reason), first one first."""

    code = "REFUSED"

    def __init__(self, receiver: str, sender: str, failures: list[Failure]) -> None:
        self.receiver, self.sender, self.failures = receiver, sender, failures
        super().__init__(
            f"{receiver} would refuse this hand-off: {failures[0].code} ({failures[0].message})"
        )

    def lines(self) -> list[str]:
        """The line emit prints, then the receiver's own reason line."""
        why = reason_line(self.receiver, self.failures)
        first = (
            f"eidolons emit: REFUSE: {self.failures[0].code}: {self.receiver} would refuse "
            "this hand-off; nothing written (--no-check writes it anyway)"
        )
        return [first, why]


def self_check(
    envelope: Mapping[str, Any],
    receiver: str,
    contracts: Contracts,
    payload: bytes | bytearray | None,
    *,
    signed_sender: bool = False,
) -> list[Failure]:
    """What the receiver gate would refuse in this envelope, judged now by the receiver's
    own rules (:func:`eidolons.ecl.receiver.envelope_failures` and
    :func:`~eidolons.ecl.receiver.contract_failures`): everything but the trace record."""
    env = Envelope.from_dict(dict(envelope))
    failures = envelope_failures(env, signed_sender=signed_sender)
    contracts = as_contract_set(contracts)
    if isinstance(contracts, ContractSetUnavailable):
        failures.append(
            Failure(
                RefusalCode.UNDECLARED_EDGE,
                "contracts",
                f"contract set failed to load: {contracts.reason}",
            )
        )
    else:
        contract = contracts.get(env.sender.eidolon, receiver)
        failures.extend(contract_failures(env, contract, payload, signed_sender=signed_sender))
    return failures


def _ask_for_high_trust_flags(
    sender: AgentRef,
    recipient: AgentRef,
    contract: Any,
    trust_level: str | None,
    key: bytes | None,
    ise: Mapping[str, Any] | None,
    envelope_version: str,
    signer: Any = None,
) -> None:
    """A high-trust hand-off asks for its flags up front, naming them (a sender signature
    stands in for HMAC, ADR 0011)."""
    high = trust_level == "high" or (contract is not None and contract.trust_level == "high")
    if not high:
        return
    authenticated = key is not None or signer is not None
    missing = [] if authenticated else ["--hmac (key in ECL_HMAC_KEY) or --sign (gate I-5)"]
    if ise is None and envelope_version.startswith("2.1"):
        missing.append("--ise JSON (ECL 2.1 requires an ise block at high trust, gate S-3)")
    if missing:
        raise UsageError(
            f"the edge {sender.eidolon} -> {recipient.eidolon} is high trust: add "
            + " and ".join(missing)
        )


def _check_resolvable(payload: Path, envelope_path: Path, artifact_path: str, root: Path) -> None:
    """The receiver resolves the payload from the envelope (ADR 0002): it must find this
    payload, not another file or nothing."""
    try:
        found = locate_payload(envelope_path, artifact_path, root)
    except PayloadError as exc:
        raise UsageError(
            f"--out {envelope_path}: a receiver could not resolve the payload ({exc})"
        ) from None
    if Path(realpath(found.path)) != Path(realpath(payload)):
        raise UsageError(
            f"--out {envelope_path}: a receiver would resolve artifact.path {artifact_path!r} "
            f"to {found.path}, not to {payload}"
        )


def _artifact_path(payload: Path, envelope_path: Path, root: Path) -> str:
    payload_abs = Path(os.path.abspath(payload))
    for base in (Path(os.path.abspath(envelope_path)).parent, Path(os.path.abspath(root))):
        if payload_abs.is_relative_to(base):
            rel = payload_abs.relative_to(base).as_posix()
            try:
                rel.encode("utf-8")  # artifact.path is JSON text
            except UnicodeEncodeError:
                raise UsageError(
                    f"payload {printable(str(payload))}: its name is not valid UTF-8, and an "
                    "envelope's artifact.path is text; rename the file"
                ) from None
            return rel
    raise UsageError(
        f"payload {payload} is neither under the envelope's directory nor under the project "
        f"root {root}; the receiver could not resolve it"
    )


def _check_text(**fields: Any) -> None:
    """Every text given for the envelope is UTF-8 text, else :class:`UsageError` naming the
    field: a lone surrogate (a byte the argument list could not decode, or a JSON escape of
    an MCP call) encodes no character and cannot be written."""
    import json

    for name, value in fields.items():
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            why = f"{name}: not UTF-8 text (it holds a byte or escape of no character)"
            raise UsageError(why) from None


def emit(
    payload: Path,
    *,
    sender: AgentRef,
    recipient: AgentRef,
    performative: str,
    kind: str,
    objective: str,
    root: Path,
    thread_id: str | None = None,
    parent_id: str | None = None,
    schema_version: str = "1.0",
    envelope_version: str = "2.1",
    trust_level: str | None = None,
    edge_origin: str | None = None,
    ise: Mapping[str, Any] | None = None,
    tokens_used: int | None = None,
    token_budget: int | None = None,
    summary: str | None = None,
    input_handles: Sequence[str] = (),
    key: bytes | None = None,
    out: Path | None = None,
    force: bool = False,
    write_trace: bool = True,
    trace_file: Path | None = None,
    env: Mapping[str, str] | None = None,
    limits: Limits | None = None,
    store: TraceStore | None = None,
    signer: Any = None,
    contracts: Contracts | None = None,
    contract_dirs: Sequence[Path] = (),
    check: bool = True,
) -> EmitResult:
    """Write the envelope for ``payload`` and record the ``emit`` event (in ``store``, else
    ``trace_file``, else the project's store); with ``signer``, ``<stem>.envelope.sig`` signs
    the envelope bytes (ADR 0011). The edge's contract (``contracts``, else loaded with
    ``contract_dirs``) gives ``edge_origin``, ``token_budget`` (else 4000) and
    ``trust_level``. With ``check``, a hand-off the receiver would refuse raises
    :class:`HandoffRefused` before anything is written (ADR 0006); else its refusals are in
    ``EmitResult.refusals``."""
    _check_text(
        kind=kind, performative=performative, objective=objective, thread=thread_id,
        parent=parent_id, summary=summary, trust_level=trust_level, edge_origin=edge_origin,
        ise=ise, input_handles=list(input_handles),
    )  # fmt: skip
    env = os.environ if env is None else env
    limits = limits or Limits()
    if payload.name.endswith(ENVELOPE_SUFFIX):
        raise UsageError(f"{payload} is an envelope, not a payload")
    if thread_id is not None and not is_safe_file_name(thread_id):
        raise UsageError(
            f"--thread {thread_id!r} is not a safe thread id (letters, digits, '.', '_', '-'; "
            "a UUID is expected): its events would go to the trace 'unknown', where no "
            "receiver looks"
        )
    if contracts is None:
        from eidolons.io.contracts import load_contracts  # the commands' one loader

        contracts = load_contracts(root, contract_dirs)
    contracts = as_contract_set(contracts)
    contract = contracts.get(sender.eidolon, recipient.eidolon)
    if contract is not None:
        edge_origin = edge_origin or contract.edge_origin
        if token_budget is None and contract.token_budget_max is not None:
            token_budget = contract.token_budget_max
        trust_level = trust_level or contract.trust_level
    token_budget = 4000 if token_budget is None else token_budget
    if check:
        _ask_for_high_trust_flags(
            sender, recipient, contract, trust_level, key, ise, envelope_version, signer
        )
    copied = place_in_sealed(payload, root, limits, out)
    if copied is not None:
        payload = copied
    try:
        envelope_path = out or default_envelope_path(payload)
        if not envelope_path.name.endswith(ENVELOPE_SUFFIX):
            raise UsageError(f"--out {envelope_path} must be named *{ENVELOPE_SUFFIX}")
        state = Path(realpath(root)) / ".eidolons"
        in_state = Path(realpath(envelope_path)).is_relative_to(state)
        if in_state and find_handoff(envelope_path, root, trace=False) is None:
            raise UsageError(
                f"{envelope_path} lies in {state}, the gates' own state (trace, memory); "
                f"hand-offs belong in {Path(root) / HANDOFF_DIR}"
            )
        if os.path.lexists(envelope_path) and not force:
            raise UsageError(f"{envelope_path} exists; use --force to replace it")
        artifact_path = _artifact_path(payload, envelope_path, root)
        method = "hmac-sha256" if key is not None else "sha256"
        location = PayloadLocation(payload, Path(realpath(payload)), "emit")
        # the bytes are kept only when the self-check needs them (required sections, the
        # edge's budget: ADR 0005)
        art = contract.artifact_for_kind(kind) if contract is not None else None
        keep = art is not None and bool(art.required_sections)
        keep = keep or (contract is not None and contract.token_budget_max is not None)
        try:
            digest = hash_payload(
                location, method, key, max_bytes=limits.max_payload_bytes, keep=keep
            )
        except PayloadError as exc:
            raise InputError(str(exc)) from None
        _check_resolvable(payload, envelope_path, artifact_path, root)
        summary = summary or objective
        cd = ContextDelta(
            token_budget=token_budget,
            tokens_used=tokens_used
            if tokens_used is not None
            else (len(summary.encode()) + 3) // 4,
            summary=summary,
            input_handles=tuple(input_handles),
        )
        message_id = uuid7()
        envelope = build_envelope(
            digest=digest,
            artifact_path=artifact_path,
            sender=sender,
            recipient=recipient,
            performative=performative,
            kind=kind,
            objective=objective,
            message_id=message_id,
            thread_id=thread_id or message_id,
            parent_id=parent_id,
            context_delta=cd,
            schema_version=schema_version,
            envelope_version=envelope_version,
            trust_level=trust_level,
            edge_origin=edge_origin,
            ise=ise,
            host=env.get("ECL_HOST") or "raw",
            model=env.get("ECL_MODEL") or "unknown",
            sender_signed=signer is not None,
        )
        refusals = self_check(
            envelope, recipient.eidolon, contracts, digest.data, signed_sender=signer is not None
        )
        if refusals and check:
            raise HandoffRefused(recipient.eidolon, sender.eidolon, refusals)
        target = store if store is not None else lambda: open_store(root, env, file=trace_file)
        trace_path = _write_and_record(
            envelope,
            envelope_path,
            digest,
            payload_key(payload, root) if write_trace else None,
            signer=signer,
            force=force,
            target=target if write_trace else None,
        )
        return EmitResult(envelope_path, envelope, trace_path, refusals, copied)
    except BaseException:
        if copied is not None:  # nothing of a refused emit stays behind
            copied.unlink(missing_ok=True)
        raise


def _write_and_record(
    envelope: dict[str, Any],
    envelope_path: Path,
    digest: Digest,
    payload_path: str | None,
    *,
    signer: Any,
    force: bool,
    target: TraceStore | Callable[[], TraceStore] | None,
) -> str | None:
    """Place the signature (with ``signer``), then the envelope, then record the ``emit``
    event in ``target`` (a store, or a function opening one; None: no event); returns
    where the event went. A record that fails takes back what was placed (ADR 0006).
    Raises :class:`InputError` on a write failure."""
    import json

    data = (json.dumps(envelope, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    directory = envelope_path.parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tmp = _written(directory, data)
    except OSError as exc:
        raise InputError(f"cannot write in {directory}: {exc.strerror or exc}") from None
    trace_path: str | None = None
    temps = [tmp]
    placed: list[tuple[tuple[int, int], Path, Path | None]] = []
    try:
        try:
            if signer is not None:  # the signature is in place before the envelope appears
                from eidolons.keys.receipts import sign_bytes, signature_path

                sidecar = Path(signature_path(envelope_path))
                temps.append(_written(directory, sign_bytes(data, signer)))
                ident = _identity(temps[-1])
                placed.append((ident, sidecar, _place(temps[-1], sidecar, replace=True)))
            ident = _identity(tmp)
            placed.append((ident, envelope_path, _place(tmp, envelope_path, replace=force)))
            if target is not None:
                opened = target() if callable(target) else target
                try:
                    event = emit_event(envelope, digest, payload_path)
                    trace_path = opened.append(envelope["thread_id"], event).location
                finally:
                    if opened is not target:
                        opened.close()
        except BaseException:
            for done in reversed(placed):
                _take_back(*done)
            raise
        for _, _, kept in placed:
            if kept is not None:
                kept.unlink(missing_ok=True)
    except OSError as exc:
        raise InputError(f"cannot write {envelope_path}: {exc.strerror or exc}") from None
    finally:
        for written in temps:
            written.unlink(missing_ok=True)
    return trace_path


def _written(directory: Path, data: bytes) -> Path:
    """``data`` in a new temporary file of ``directory``, readable by the receivers (mkstemp
    makes 0600) and synced: what :func:`_place` then links or renames into place."""
    from eidolons.io.files import readable_mode

    fd, name = tempfile.mkstemp(prefix=".eidolons-", suffix=".tmp", dir=directory)
    try:
        os.fchmod(fd, readable_mode())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        os.unlink(name)
        raise
    return Path(name)


def _place(tmp: Path, target: Path, *, replace: bool) -> Path | None:
    """Put the written file ``tmp`` at ``target``, atomically: a link that fails if the
    target exists, or with ``replace`` a rename, after keeping the replaced file under a
    second name (returned, for :func:`_take_back`)."""
    if not replace:
        try:
            os.link(tmp, target)  # atomic, and fails if the target appeared
        except FileExistsError:
            raise UsageError(f"{target} exists; use --force to replace it") from None
        return None
    kept = tmp.with_name(tmp.name + ".replaced")
    try:
        os.link(target, kept, follow_symlinks=False)
    except FileNotFoundError:  # nothing to replace
        os.replace(tmp, target)
        return None
    try:
        os.replace(tmp, target)
    except BaseException:
        kept.unlink(missing_ok=True)
        raise
    return kept


def _identity(path: Path) -> tuple[int, int]:
    st = os.lstat(path)
    return (st.st_dev, st.st_ino)


def _take_back(ours: tuple[int, int], target: Path, kept: Path | None) -> None:
    """Undo :func:`_place` after what followed failed: the replaced file back in place, or
    the placed one removed while it is still ours (``ours``: the written file's device and
    inode). Best-effort: the error being raised is the one said."""
    try:
        if kept is not None:
            os.replace(kept, target)
        elif _identity(target) == ours:
            os.unlink(target)
    except OSError:
        pass


def place_in_sealed(
    payload: Path, root: Path, limits: Limits, out: Path | None = None
) -> Path | None:
    """In a sealed project, a payload outside the hand-off directories is copied into
    ``.eidolons/handoffs/`` (a new file, never over another: ``NAME-2.md``...), and the copy
    is the hand-off; None when there is nothing to place."""
    from eidolons.io.config import in_sealed, sealed_handoff_dirs

    sealed = sealed_handoff_dirs(root)
    if sealed is None:
        return None
    if in_sealed(payload, sealed):  # a hand-off's place already
        if os.path.islink(payload):
            # its envelope would lie beside the link, outside the sealed directories
            raise UsageError(
                f"{payload} is a link into the hand-off directory, not a draft: emit the "
                "draft itself"
            )
        return None
    if out is not None:
        raise UsageError(
            f"--out {out}: in a sealed project the envelope lies beside its payload in the "
            "hand-off directory"
        )
    data = _read_draft(payload, root, limits, sealed)
    if len(data) > limits.max_payload_bytes:
        raise InputError(f"{payload} is larger than {plural(limits.max_payload_bytes, 'byte')}")
    directory = Path(root) / HANDOFF_DIR
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create {directory}: {exc.strerror}") from None
    from eidolons.keys.receipts import RECEIPT_SUFFIX, SIG_SUFFIX

    # the names only the gate writes there: an envelope, its receipt, its sender signature
    reserved = (ENVELOPE_SUFFIX, RECEIPT_SUFFIX, SIG_SUFFIX)
    stem, suffix = os.path.splitext(payload.name)
    for n in range(1, 1000):
        target = directory / (payload.name if n == 1 else f"{stem}-{n}{suffix}")
        if target.name.endswith(reserved) or os.path.lexists(default_envelope_path(target)):
            continue
        try:
            created = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        try:
            with os.fdopen(created, "wb") as fh:
                fh.write(data)
        except OSError as exc:  # a full disk: no half-written hand-off stays behind
            target.unlink(missing_ok=True)
            raise InputError(f"cannot write {target}: {exc.strerror}") from None
        return target
    raise UsageError(f"no free name for {payload.name} in {directory}")


def _read_draft(payload: Path, root: Path, limits: Limits, sealed: tuple[str, ...]) -> bytes:
    """The bytes of the draft ``payload`` that ``place_in_sealed`` copies: the regular file
    opened by descriptor, component by component (from the project down when the draft lies
    in it, and never out of it), so that the path it was found at is known exactly; refused
    when that path lies in a sealed directory or the gate's state or the user's config
    directory (a link swapped in after the check: the caller's shell can write the draft's
    name, not read what it then names)."""
    from eidolons.io.files import BeneathError, open_path_beneath
    from eidolons.io.paths import STATE_DIR, config_dir, is_relative_to

    # a draft in the project is read from beneath the project: a link swapped in to a file
    # outside it (a key elsewhere, /proc/self/environ) is refused as resolving outside
    absolute = os.path.abspath(payload)
    inside = is_relative_to(absolute, os.path.abspath(root)) or is_relative_to(
        absolute, realpath(root)
    )
    try:
        opened = open_path_beneath(absolute, root if inside else os.sep)
    except BeneathError as exc:
        raise InputError(f"cannot read {payload}: {exc}") from None
    except OSError as exc:
        raise InputError(f"cannot read {payload}: {exc.strerror}") from None
    if opened is None:
        raise InputError(f"cannot read {payload}: no such file")
    try:
        kept = (
            os.path.join(realpath(root), STATE_DIR),
            realpath(config_dir()),
            *sealed,
        )
        if any(is_relative_to(opened.real, d) for d in kept):
            raise InputError(
                f"{payload} is {opened.real}, the gate's own state or keys (a hand-off, the "
                "memory store, a key), not a draft to emit"
            )
        with opened.file() as fh:
            return fh.read(limits.max_payload_bytes + 1)
    except OSError as exc:
        raise InputError(f"cannot read {payload}: {exc.strerror}") from None
    finally:
        opened.close()


def emit_event(
    envelope: Mapping[str, Any], digest: Digest, payload_path: str | None = None
) -> dict[str, Any]:
    """The ``emit`` trace event (the bash SDK's keys plus gate, digests and, when the
    payload lies in the project, ``payload_path``: the receiver then knows the file is a
    hand-off even if its envelope is deleted, ADR 0007)."""
    return trace_event(
        EventType.EMIT,
        Envelope.from_dict(envelope),
        gate=GateName.SENDER,
        fields={
            "model": envelope["trace"]["model"],
            "tier": envelope["trace"]["tier"],
        },
        integrity_value=digest.value,
        payload_sha256=digest.sha256,
        payload_path=payload_path,
    )
