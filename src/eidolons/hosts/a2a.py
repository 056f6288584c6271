"""ECL hand-offs over the Agent2Agent protocol (ADR 0025), with the official SDK
(``a2a-sdk``, the optional extra ``eidolons[a2a]``), imported by ``eidolons a2a`` only.

The wire: one message, the payload as its one ``raw`` part, and under the extension's
:data:`URI` in the message's ``metadata`` the envelope's exact bytes, the orchestrator's
signed receipt and any sender signature (each base64), as the sender's gate keeps them.
The agent card declares the extension ``required``. Rules of the server, in order:

1. A body past the gate's caps (:class:`eidolons.ecl.grammar.Limits`, the receipt's and
   the signature's) is refused before it is parsed, counted as it streams (:class:`BodyCap`).
2. A request that does not name :data:`URI` in ``A2A-Extensions``, with no envelope, or
   with other than one raw part, is rejected: never a chat message.
3. A message id already received: the same bytes get the stored answer (dispatched once);
   other bytes are rejected.
4. The receiver gate (:func:`eidolons.gates.receiver.verify_incoming`) judges the bytes in
   memory, against this host's trust store only; a refusal is rejected with its REFUSE
   line, reason and hand-back, and nothing of the hand-off is kept.
5. A pass is kept in ``.eidolons/handoffs/a2a/<message_id>/`` (payload, envelope,
   receipt, signature: moved there whole, which records it as dispatched) before COMMAND
   runs on the kept copy as ``run`` runs it; COMMAND's output is the task's artifact, a
   COMMAND that fails (or an internal error) fails the task, and the answer is stored.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, create_client
from a2a.client.service_parameters import ServiceParametersFactory, with_a2a_extensions
from a2a.extensions.common import find_extension_by_uri
from a2a.helpers import new_raw_part, new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    Message,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import UnsupportedOperationError
from starlette.applications import Starlette

from eidolons._text import printable
from eidolons.ecl.contract import ContractSet
from eidolons.ecl.envelope import Envelope, parse_envelope
from eidolons.ecl.grammar import Limits, dumps, is_safe_file_name
from eidolons.ecl.integrity import RefusalCode, sha256_hex
from eidolons.ecl.receiver import Failure
from eidolons.errors import EnvelopeError
from eidolons.gates.receiver import IncomingResult, Snapshot, verify_incoming
from eidolons.gates.route import dispatch_env
from eidolons.io.contracts import load_contracts
from eidolons.io.files import atomic_write, read_regular, write_directory
from eidolons.io.paths import HANDOFF_DIR, realpath
from eidolons.io.payload import ENVELOPE_SUFFIX
from eidolons.keys.receipts import MAX_RECEIPT_BYTES, MAX_SIG_BYTES, RECEIPT_SUFFIX, SIG_SUFFIX

#: the ECL extension: declared ``required`` in the card, named in ``A2A-Extensions``, and
#: the key of its data in the message's metadata
URI = "https://eidolons.dev/ext/ecl/v1"
ENVELOPE = "envelope"
#: metadata field -> the sidecar it carries (as :class:`eidolons.io.payload.Sidecars` names it)
SIDECARS = {
    "receipt": (RECEIPT_SUFFIX, MAX_RECEIPT_BYTES),
    "sender_signature": (SIG_SUFFIX, MAX_SIG_BYTES),
}
KEPT = os.path.join(HANDOFF_DIR, "a2a")
ANSWER = "answer.json"
MAX_ANSWER_BYTES = 256 * 1024 * 1024  # COMMAND's output, base64, and the gate's lines
STATES = {
    "completed": TaskState.TASK_STATE_COMPLETED,
    "rejected": TaskState.TASK_STATE_REJECTED,
    "failed": TaskState.TASK_STATE_FAILED,
}

ASGIApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
    Awaitable[None],
]


def body_cap(limits: Limits) -> int:
    """The largest request body a hand-off within the gate's caps needs: envelope,
    payload, receipt and signature, base64 (4/3), plus 64 KiB of JSON-RPC around them."""
    caps = sum(cap for _, cap in SIDECARS.values())
    raw = limits.max_envelope_bytes + limits.max_payload_bytes + caps
    return (raw + 2) // 3 * 4 + 64 * 1024


class Answer:
    """How a task ends: ``state`` (completed, rejected, failed), the lines that say why
    (the gate's own words), and COMMAND's output."""

    __slots__ = ("lines", "output", "state")

    def __init__(self, state: str, lines: list[str], output: bytes | None = None) -> None:
        self.state = state
        self.lines = lines
        self.output = output

    def to_bytes(self) -> bytes:
        out = base64.b64encode(self.output).decode() if self.output is not None else None
        return (dumps({"state": self.state, "lines": self.lines, "output": out}) + "\n").encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Answer:
        """The answer :meth:`to_bytes` wrote; raises ``ValueError`` for any other shape
        (the file sits in the project, where an agent can rewrite it)."""
        doc = json.loads(data)
        if not isinstance(doc, dict) or set(doc) != {"state", "lines", "output"}:
            raise ValueError("the stored answer is not an answer object")
        state, lines, out = doc["state"], doc["lines"], doc["output"]
        if state not in STATES or not isinstance(lines, list):
            raise ValueError("the stored answer has no known state or no lines")
        if not all(isinstance(line, str) for line in lines):
            raise ValueError("the stored answer's lines are not strings")
        if out is not None and not isinstance(out, str):
            raise ValueError("the stored answer's output is not base64 text")
        return cls(state, lines, base64.b64decode(out, validate=True) if out else None)


class Receiver:
    """The server's side of one receiver: every message is handled here, one at a time."""

    def __init__(
        self,
        receiver: str,
        root: Path,
        *,
        command: list[str],
        key: bytes | None,
        limits: Limits,
    ) -> None:
        self.receiver, self.root, self.command = receiver, root, command
        self.key, self.limits = key, limits
        self._lock = threading.Lock()

    def card(self, url: str) -> AgentCard:
        """The agent card: this receiver, one skill naming the inbound edges its contracts
        accept, the ECL extension required."""
        contracts = load_contracts(self.root, [])
        inbound = contracts.inbound(self.receiver) if isinstance(contracts, ContractSet) else []
        edges = ", ".join(
            f"{c.from_} -> {c.to} ({'/'.join(c.performatives_allowed)})" for c in inbound
        )
        return AgentCard(
            name=self.receiver,
            description=f"ECL receiver {self.receiver}: every hand-off passes its receiver gate",
            version="1",
            supported_interfaces=[
                AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
            ],
            capabilities=AgentCapabilities(
                extensions=[
                    AgentExtension(
                        uri=URI,
                        description="ECL hand-off: envelope, receipt and sender signature "
                        "in metadata under this URI; the payload is the one raw part",
                        required=True,
                    )
                ]
            ),
            skills=[
                AgentSkill(
                    id=f"{self.receiver}-handoff",
                    name=f"hand-off to {self.receiver}",
                    description=f"inbound edges: {edges or 'none'}",
                    tags=["ecl", *(f"from:{c.from_}" for c in inbound)],
                )
            ],
            default_input_modes=["application/octet-stream"],
            default_output_modes=["application/octet-stream"],
        )

    def handle(self, message: Message, requested: set[str]) -> Answer:
        with self._lock:  # one hand-off at a time: a redelivery waits for the first answer
            try:
                return self._handle(message, requested)
            except Exception as exc:  # fail closed: never completed
                # the details (paths of this host) on this host's stderr, not to the caller
                detail = printable(f"{type(exc).__name__}: {exc}")
                print(f"eidolons a2a: internal error: {detail}", file=sys.stderr, flush=True)
                why = f"internal error ({type(exc).__name__}; the server's log says more)"
                return Answer("failed", [f"eidolons a2a: {why}"])

    def _refuse(
        self, why: str, code: str = RefusalCode.UNVERIFIED, env: Envelope | None = None
    ) -> Answer:
        result = IncomingResult("refused", self.receiver, "a2a message")
        result.envelope = env  # the sender named in the REFUSE line, where it is known
        result.failures.append(Failure(code, "a2a", why))
        return Answer("rejected", result.status_lines())

    def _handle(self, message: Message, requested: set[str]) -> Answer:
        if URI not in requested:
            return self._refuse(
                f"the request does not name the ECL extension ({URI}) in its A2A-Extensions "
                "header: a hand-off is never taken as a chat message"
            )
        try:
            fields = message.metadata[URI]  # a Struct, or whatever the sender put there
            data = base64.b64decode(fields[ENVELOPE], validate=True)
        except (KeyError, TypeError, ValueError, binascii.Error):
            return self._refuse(f"no ECL envelope (base64) in the metadata under {URI}")
        try:
            given = {
                suffix: base64.b64decode(fields[name], validate=True)
                for name, (suffix, _) in SIDECARS.items()
                if name in fields
            }
        except (TypeError, ValueError, binascii.Error):
            fields_named = " and ".join(SIDECARS)
            return self._refuse(f"the {fields_named} under {URI} must be base64 strings")
        raw = [p for p in message.parts if p.WhichOneof("content") == "raw"]
        if len(raw) != 1 or len(message.parts) != 1:
            return self._refuse("the payload must be exactly one raw part")
        payload = raw[0].raw
        env: Envelope | None = None
        try:
            env = parse_envelope(data, self.limits)
            ident = env.message_id if is_safe_file_name(env.message_id) else None
            name = os.path.basename(env.artifact_path or "") or "payload"
        except EnvelopeError:
            ident, name = None, "payload"  # the gate refuses it, with the reason
        if env is not None and ident is None:
            return self._refuse(
                f"message_id {env.message_id!r} cannot name the hand-off's directory here: "
                "it must be a plain file name",
                RefusalCode.SCHEMA_INVALID,
                env,
            )
        own = (ENVELOPE_SUFFIX, *(suffix for suffix, _ in SIDECARS.values()))
        if not is_safe_file_name(name) or name == ANSWER or name.endswith(own):
            return self._refuse(
                f"the payload's file name {name!r} cannot be kept here: it must be a plain "
                f"name, not {ANSWER} nor an envelope, receipt or signature name",
                RefusalCode.SCHEMA_INVALID,
                env,
            )
        kept_dir = self.root / KEPT
        if realpath(kept_dir) != os.path.join(realpath(self.root), KEPT):
            why = f"{KEPT} is a link out of the project: nothing is kept or run through it"
            return Answer("failed", [f"eidolons a2a: {why}"])
        where = kept_dir / (ident or "unknown")
        stem = name.rpartition(".")[0] or name
        envelope_path = where / (stem + ENVELOPE_SUFFIX)
        if ident is not None and where.exists():
            return self._again(where, envelope_path, data, payload, name, env)
        result = verify_incoming(
            envelope_path,
            self.receiver,
            root=self.root,
            contracts=load_contracts(self.root, []),
            key=self.key,
            limits=self.limits,
            want_payload=True,
            snapshot=Snapshot(data, payload=payload, payload_path=where / name, sidecars=given),
        )
        if not result:
            lines = result.status_lines()
            if result.trace_error:
                lines.append(f"eidolons: trace not written: {printable(result.trace_error)}")
            if "handback" in result.extra:
                lines.append(f"hand-back for the orchestrator: {result.extra['handback']}")
            return Answer("rejected", lines)
        files = {  # COMMAND reads the payload, never writes it
            name: (payload, 0o400),
            envelope_path.name: (data, 0o644),
            **{stem + suffix: (content, 0o644) for suffix, content in given.items()},
        }
        if not write_directory(where, files):  # another server on this root took it first
            return self._again(where, envelope_path, data, payload, name, env)
        answer = self._dispatch(result, envelope_path, where / name)
        atomic_write(where / ANSWER, answer.to_bytes(), 0o600)
        return answer

    def _again(
        self,
        where: Path,
        envelope_path: Path,
        data: bytes,
        payload: bytes,
        name: str,
        env: Envelope | None,
    ) -> Answer:
        """A message id received before: its stored answer for the same bytes, else refused."""
        caps = self.limits
        try:
            same = read_regular(envelope_path, caps.max_envelope_bytes) == data
            same = same and read_regular(where / name, caps.max_payload_bytes) == payload
        except OSError:
            same = False
        if not same:
            return self._refuse(
                f"message {where.name} was received before with other bytes: refused "
                "(a message id is dispatched once)",
                RefusalCode.INTEGRITY_MISMATCH,
                env,
            )
        try:
            return Answer.from_bytes(read_regular(where / ANSWER, MAX_ANSWER_BYTES))
        except FileNotFoundError:
            why = "dispatched before; its COMMAND has not answered (still running, or stopped)"
            return Answer("failed", [f"eidolons a2a: message {where.name} was {why}"])

    def _dispatch(self, result: IncomingResult, envelope: Path, payload: Path) -> Answer:
        lines = result.status_lines()
        if not self.command:
            return Answer("completed", lines)
        env = dispatch_env(
            result.envelope, envelope, payload, source=envelope, payload_source=payload
        )
        try:
            proc = subprocess.run(
                self.command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, check=False
            )
        except OSError as exc:
            cmd = printable(self.command[0])
            return Answer("failed", [*lines, f"eidolons a2a: cannot run {cmd!r}: {exc.strerror}"])
        if proc.returncode != 0:
            said = f"eidolons a2a: COMMAND exited {proc.returncode}"
            return Answer("failed", [*lines, said], proc.stdout)
        return Answer("completed", lines, proc.stdout)


class Executor(AgentExecutor):
    """The SDK's side: each message handled by :class:`Receiver` off the event loop, then
    reported as one task (its artifact COMMAND's output, its status the gate's lines)."""

    def __init__(self, receiver: Receiver) -> None:
        self.receiver = receiver

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id or "", context.context_id or ""
        message = context.message or Message()
        await event_queue.enqueue_event(
            new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED)
        )
        answer = await asyncio.to_thread(
            self.receiver.handle, message, set(context.requested_extensions)
        )
        updater = TaskUpdater(event_queue, task_id, context_id)
        if answer.output is not None:
            await updater.add_artifact([new_raw_part(answer.output)], name="output")
        said = updater.new_agent_message([new_text_part("\n".join(answer.lines))])
        await updater.update_status(STATES[answer.state], message=said)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError("a hand-off cannot be cancelled once its gate has run")


#: seconds a client has to send its whole request body (a slow one holds a connection)
BODY_DEADLINE_S = 60.0
#: connections served at once (uvicorn answers 503 past it): memory is bounded by them
MAX_CONNECTIONS = 8


#: how long a refused request may go on sending, dropped unread, before the answer and
#: the close (a client still sending then reads the answer; a close resets it)
LINGER_S = 2.0


class BodyCap:
    """ASGI middleware: a request body past ``cap`` bytes is refused (413, with the
    reason) before anything parses it, counted as it streams and never held past the cap;
    one sent slower than :data:`BODY_DEADLINE_S` is refused (408); and one request at a
    time is parsed and handled (the SDK holds several copies of a body while it parses)."""

    def __init__(self, app: ASGIApp, cap: int) -> None:
        self.app, self.cap = app, cap
        self._one: asyncio.Lock | None = None  # made in the server's loop

    async def __call__(
        self,
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[Any]],
        send: Callable[[Any], Awaitable[None]],
    ) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":  # the card: no body
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        too_large = f"request body larger than {self.cap} bytes (the gate's caps): refused unread"
        if declared is not None and not (declared.isdigit() and int(declared) <= self.cap):
            return await self._refuse(send, 413, too_large, receive)
        chunks: list[bytes] = []  # held up to the cap, never past it
        size = 0
        try:
            async with asyncio.timeout(BODY_DEADLINE_S):
                while True:
                    event = await receive()
                    if event["type"] == "http.disconnect":
                        return None
                    chunks.append(event.get("body", b""))
                    size += len(chunks[-1])
                    if size > self.cap:  # the rest, if more comes, is read and dropped
                        chunks.clear()
                        rest = receive if event.get("more_body", False) else None
                        return await self._refuse(send, 413, too_large, rest)
                    if not event.get("more_body", False):
                        break
        except TimeoutError:
            why = f"request body not sent within {BODY_DEADLINE_S:g} s: refused unread"
            return await self._refuse(send, 408, why)
        body, done = b"".join(chunks), False
        chunks.clear()

        async def replay() -> Any:
            nonlocal done
            if done:
                return await receive()  # a disconnect, as the server reports it
            done = True
            return {"type": "http.request", "body": body, "more_body": False}

        if self._one is None:
            self._one = asyncio.Lock()
        async with self._one:
            await self.app(scope, replay, send)

    async def _refuse(
        self,
        send: Callable[[Any], Awaitable[None]],
        status: int,
        why: str,
        receive: Callable[[], Awaitable[Any]] | None = None,
    ) -> None:
        """Answer ``status`` with ``why``; with ``receive``, the rest of the body is read and
        dropped first, for :data:`LINGER_S` at most."""
        error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": why}}
        data = json.dumps(error).encode()
        headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        if receive is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(LINGER_S):
                    while (event := await receive())["type"] == "http.request":
                        if not event.get("more_body"):
                            break
        await send({"type": "http.response.body", "body": data})


#: tasks the SDK's store keeps, the latest (each without its message: see RecentTasks)
KEPT_TASKS = 32


class RecentTasks(InMemoryTaskStore):
    """The SDK's task store, holding no message (a task's ``history`` carries the payload)
    and only the latest :data:`KEPT_TASKS` tasks: the gate's record is the hand-off's,
    and memory stays bounded however many messages come."""

    def __init__(self) -> None:
        super().__init__()
        self._order: dict[str, ServerCallContext] = {}  # task id -> its context, oldest first

    async def save(self, task: Task, context: ServerCallContext) -> None:
        slim = Task()
        slim.CopyFrom(task)
        slim.ClearField("history")
        await super().save(slim, context)
        self._order.pop(task.id, None)
        self._order[task.id] = context
        while len(self._order) > KEPT_TASKS:
            old = next(iter(self._order))
            await self.delete(old, self._order.pop(old))


class OnlySend(DefaultRequestHandler):
    """The SDK's handler answering ``SendMessage`` only, and only once its hand-off is
    handled (``returnImmediately`` is refused: the SDK would run the message after the
    request ended, past the connection cap that bounds what the server holds); no caller
    lists, fetches, cancels or follows a task (its artifact is COMMAND's output)."""

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Any:
        if params.configuration.return_immediately:  # the connection must hold until answered
            raise UnsupportedOperationError(message=ANSWERED_WHEN_HANDLED)
        return await super().on_message_send(params, context)

    async def on_get_task(self, *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedOperationError(message=ONLY_SEND)

    async def on_subscribe_to_task(self, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        raise UnsupportedOperationError(message=ONLY_SEND)
        yield  # an async generator, as the SDK iterates a stream

    on_list_tasks = on_cancel_task = on_get_extended_agent_card = on_get_task
    on_message_send_stream = on_subscribe_to_task
    on_create_task_push_notification_config = on_get_task_push_notification_config = on_get_task
    on_list_task_push_notification_configs = on_delete_task_push_notification_config = on_get_task


ONLY_SEND = "this server answers SendMessage only (an ECL hand-off); its tasks are not readable"
ANSWERED_WHEN_HANDLED = (
    "returnImmediately is refused: a hand-off is answered once its gate and COMMAND have "
    "run, on the connection that carried it (a message is never held past its request)"
)


def build_app(receiver: Receiver, url: str) -> BodyCap:
    """The ASGI application: the agent card, the JSON-RPC endpoint, the body cap."""
    card = receiver.card(url)
    handler = OnlySend(Executor(receiver), RecentTasks(), card)
    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/")]
    return BodyCap(Starlette(routes=routes), body_cap(receiver.limits))


# --------------------------------------------------------------------------- the client


class Declined(Exception):
    """The server at the URL is not one to send a hand-off to (no ECL extension)."""


async def send(
    url: str, payload: bytes, name: str, envelope: bytes, sidecars: dict[str, bytes]
) -> Answer:
    """Send one hand-off to the server at ``url`` (its card must declare :data:`URI`);
    the task's end as an :class:`Answer`. Raises :class:`Declined`, ``httpx.HTTPError``
    and the SDK's errors."""
    async with httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None)) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        if find_extension_by_uri(card, URI) is None:
            raise Declined(f"{url} does not declare the ECL extension ({URI}): nothing sent")
        client = await create_client(
            card, client_config=ClientConfig(streaming=False, httpx_client=http)
        )
        fields = {ENVELOPE: base64.b64encode(envelope).decode()}
        for field, (suffix, _) in SIDECARS.items():
            if suffix in sidecars:
                fields[field] = base64.b64encode(sidecars[suffix]).decode()
        message = Message(
            message_id=sha256_hex(envelope + payload)[:32],
            role=Role.ROLE_USER,
            parts=[new_raw_part(payload, filename=name)],
        )
        message.metadata.update({URI: fields})
        params = ServiceParametersFactory.create([with_a2a_extensions([URI])])
        request = SendMessageRequest(
            message=message, configuration=SendMessageConfiguration(return_immediately=False)
        )
        context = ClientCallContext(service_parameters=params)
        async for response in client.send_message(request, context=context):
            if response.HasField("task"):
                return _answer_of(response.task)
        return Answer("failed", ["eidolons a2a: the server answered without a task"])


def _answer_of(task: Any) -> Answer:
    states = {v: k for k, v in STATES.items()}
    state = states.get(task.status.state, "failed")
    text = "".join(p.text for p in task.status.message.parts if p.WhichOneof("content") == "text")
    output = b"".join(
        p.raw for a in task.artifacts for p in a.parts if p.WhichOneof("content") == "raw"
    )
    has_output = any(a.parts for a in task.artifacts)
    return Answer(state, text.splitlines(), output if has_output else None)
