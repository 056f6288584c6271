"""ECL over A2A end to end on 127.0.0.1: ``eidolons a2a send`` from one project to the
official SDK's server that ``a2a serve`` builds in front of another's receiver gate."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientCallContext, ClientConfig, create_client
from a2a.client.service_parameters import ServiceParametersFactory, with_a2a_extensions
from a2a.helpers import new_raw_part, new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    Message,
    Role,
    SendMessageRequest,
    TaskState,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from eidolons.ecl.grammar import Limits
from eidolons.hosts import a2a
from eidolons.hosts.a2a import URI, body_cap
from eidolons.keys.receipts import Signer, sign_envelope
from tests.a2a.conftest import BODY, Hosts, running
from tests.conftest import Run, clean_env, emit_cmd

REFUSED = "[vigil-verify-incoming] REFUSE:"


def sdk_send(url: str, message: Message, extensions: list[str]) -> Any:
    """The official SDK's client sends ``message``; the task it ends with."""

    async def go() -> Any:
        client = await create_client(url, client_config=ClientConfig(streaming=False))
        params = ServiceParametersFactory.create([with_a2a_extensions(extensions)])
        context = ClientCallContext(service_parameters=params)
        async for response in client.send_message(
            SendMessageRequest(message=message), context=context
        ):
            return response.task

    return asyncio.run(go())


def status_text(task: Any) -> str:
    return "".join(p.text for p in task.status.message.parts)


def handoff_message(hosts: Hosts, payload: bytes = BODY, **fields: str) -> Message:
    envelope = hosts.payload.with_name("scout-report.envelope.json").read_bytes()
    receipt = hosts.payload.with_name("scout-report.receipt.json")
    meta = {"envelope": base64.b64encode(envelope).decode(), **fields}
    if receipt.exists():
        meta["receipt"] = base64.b64encode(receipt.read_bytes()).decode()
    message = Message(message_id="m-1", role=Role.ROLE_USER, parts=[new_raw_part(payload)])
    message.metadata.update({URI: meta})
    return message


def test_a_verified_handoff_crosses_and_command_gets_exactly_the_payload(hosts: Hosts) -> None:
    with running(hosts.receiver()) as url:
        r = hosts.send(url)
    assert r.code == 0, r.err
    assert r.out == BODY.decode()  # COMMAND's output: the payload it was handed
    assert "ecl verify [pass] atlas -> vigil (PROPOSE)" in r.err
    assert "[vigil-verify-incoming] PASS: scout-report from atlas" in r.err
    assert "evidence: signed-receipt" in r.err
    assert hosts.dispatched() == 1
    names = [p.name for p in hosts.kept()]
    assert names == ["answer.json", "scout-report.envelope.json", "scout-report.md",
                     "scout-report.receipt.json"]  # fmt: skip
    kept = next(p for p in hosts.kept() if p.name == "scout-report.md")
    assert kept.read_bytes() == BODY
    assert [e["event"] for e in hosts.receiver_events()] == ["verify_pass", "receive"]
    again = hosts.cli("verify-incoming", kept, "--as", "vigil", "--root", hosts.b)
    assert again.code == 0, again.err  # the receiving host's own gate passes its stored copy
    thread = json.loads(kept.with_name("scout-report.envelope.json").read_text())["thread_id"]
    for root, said in ((hosts.a, "verify_pass"), (hosts.b, "receive")):  # the hop on both
        shown = hosts.cli("trace", "show", thread, "--root", root)
        assert shown.code == 0 and said in shown.out, shown.out + shown.err


def _append_to_payload(message: dict[str, Any]) -> None:
    part = message["parts"][0]
    part["raw"] = base64.b64encode(base64.b64decode(part["raw"]) + b"rm -rf /\n").decode()


def _mitm(target: str, rewrite: Any = _append_to_payload) -> Starlette:
    """A relay between sender and server that rewrites the message in transit (the
    payload part by default; and the card's URL, so the sender talks to it)."""

    async def card(request: Request) -> Response:
        async with httpx.AsyncClient() as http:
            doc = (await http.get(f"{target}.well-known/agent-card.json")).json()
        for interface in doc["supportedInterfaces"]:
            interface["url"] = str(request.base_url)
        return JSONResponse(doc)

    async def rpc(request: Request) -> Response:
        doc = json.loads(await request.body())
        rewrite(doc["params"]["message"])
        headers = {k: v for k, v in request.headers.items() if k.lower().startswith("a2a-")}
        async with httpx.AsyncClient(timeout=30) as http:
            answer = await http.post(target, json=doc, headers=headers)
        return Response(answer.content, answer.status_code, media_type="application/json")

    routes = [Route("/.well-known/agent-card.json", card), Route("/", rpc, methods=["POST"])]
    return Starlette(routes=routes)


def test_a_payload_rewritten_in_transit_is_refused_and_nothing_kept_or_dispatched(
    hosts: Hosts,
) -> None:
    with running(hosts.receiver()) as url, running(lambda _: _mitm(url)) as relay:
        r = hosts.send(relay)
    assert r.code == 3, r.err
    assert f"{REFUSED} INTEGRITY_MISMATCH from atlas" in r.err
    assert "reason:" in r.err and "hand-back for the orchestrator" in r.err
    assert hosts.dispatched() == 0 and hosts.kept() == []
    assert [e["event"] for e in hosts.receiver_events()] == ["verify_fail"]


@pytest.mark.parametrize("name", ["answer.json", "x.receipt.json", "x.envelope.sig"])
def test_a_payload_named_as_the_servers_own_files_is_refused_and_nothing_kept(
    tmp_path: Path, name: str
) -> None:
    """The payload is kept under its artifact's file name, beside the envelope, receipt,
    signature and the stored answer: a name that is one of those is refused, not kept."""
    hosts = Hosts(tmp_path, name=name)
    with running(hosts.receiver()) as url:
        r = hosts.send(url)
    assert r.code == 3, r.err
    assert f"{REFUSED} SCHEMA_INVALID from atlas" in r.err
    assert "cannot be kept" in r.err
    assert hosts.dispatched() == 0 and hosts.kept() == []


def test_a_request_without_the_extension_header_is_rejected_not_chatted_with(
    hosts: Hosts,
) -> None:
    with running(hosts.receiver()) as url:
        hosts.send(url)  # signs the receipt: the message is otherwise a good hand-off
        task = sdk_send(url, handoff_message(hosts), extensions=[])
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    assert status_text(task).startswith(f"{REFUSED} UNVERIFIED from unknown")
    assert "A2A-Extensions" in status_text(task)
    assert hosts.dispatched() == 1  # the first send only


def test_a_handoff_no_orchestrator_gate_passed_is_refused_and_recorded(hosts: Hosts) -> None:
    """Sent by the SDK's own client, past `a2a send`'s gate: no receipt, no pass on record
    on the receiving host, so its gate refuses it and records the refusal."""
    with running(hosts.receiver()) as url:
        task = sdk_send(url, handoff_message(hosts), extensions=[URI])
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    assert status_text(task).startswith(f"{REFUSED} UNVERIFIED from atlas"), status_text(task)
    assert hosts.dispatched() == 0 and hosts.kept() == []
    assert [e["event"] for e in hosts.receiver_events()] == ["verify_fail"]


def test_a_message_without_an_envelope_is_rejected(hosts: Hosts) -> None:
    message = Message(message_id="m-2", role=Role.ROLE_USER, parts=[new_raw_part(BODY)])
    with running(hosts.receiver()) as url:
        task = sdk_send(url, message, extensions=[URI])
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    assert "no ECL envelope" in status_text(task)
    assert hosts.dispatched() == 0 and hosts.kept() == []


def test_a_receipt_for_a_project_not_pinned_on_the_receiving_host_is_refused(
    tmp_path: Path,
) -> None:
    hosts = Hosts(tmp_path, pinned=False)  # b trusts only its own key, for its own project
    with running(hosts.receiver()) as url:
        r = hosts.send(url)
    assert r.code == 3, r.err
    assert f"{REFUSED} UNVERIFIED from atlas" in r.err
    assert "not signed by any orchestrator key in the trust store" in r.err
    assert hosts.dispatched() == 0 and hosts.kept() == []


def test_a_redelivery_is_dispatched_once_and_answered_the_same(hosts: Hosts) -> None:
    with running(hosts.receiver()) as url:
        first, second = hosts.send(url), hosts.send(url)
    assert first.code == second.code == 0, first.err + second.err
    assert first.out == second.out == BODY.decode()
    assert hosts.dispatched() == 1


def test_the_same_message_id_with_other_bytes_is_refused(hosts: Hosts) -> None:
    with running(hosts.receiver()) as url:
        assert hosts.send(url).code == 0
        task = sdk_send(url, handoff_message(hosts, BODY + b"more\n"), extensions=[URI])
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    assert status_text(task).startswith(f"{REFUSED} INTEGRITY_MISMATCH from atlas")
    assert "received before with other bytes" in status_text(task)
    assert hosts.dispatched() == 1


def test_an_oversized_body_is_refused_before_it_is_parsed(
    hosts: Hosts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused as soon as the cap is passed; what is still coming is read and dropped, but
    a body that has ended is not waited for (the answer would wait as long as the linger)."""
    monkeypatch.setattr(a2a, "LINGER_S", 60.0)
    limits = {"max_envelope_bytes": 4096, "max_payload_bytes": 4096}
    cap = body_cap(Limits(**limits))

    def chunks() -> Any:  # no Content-Length: counted as it streams, one chunk past the cap
        sent = 0
        while sent <= cap:
            yield b"{" * 32768  # not even JSON: a parser would have said so first
            sent += 32768

    with running(hosts.receiver(limits=Limits(**limits))) as url:
        streamed = httpx.post(
            url, content=chunks(), headers={"content-type": "application/json"}, timeout=10
        )
        host, port = url.removeprefix("http://").rstrip("/").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:  # declared past it
            head = f"POST / HTTP/1.1\r\nHost: {host}\r\nContent-Length: {cap + 1}\r\n\r\n"
            sock.sendall(head.encode() + b"{" * (cap + 1))
            declared = sock.makefile("rb").read()  # answered and closed, the body not parsed
    assert streamed.status_code == 413
    assert "refused unread" in streamed.json()["error"]["message"]
    assert declared.startswith(b"HTTP/1.1 413 ") and b"refused unread" in declared
    assert hosts.receiver_events() == []


class _Plain(AgentExecutor):
    """A chat agent of the SDK's own types, whose card declares no ECL extension."""

    def __init__(self) -> None:
        self.calls = 0

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.calls += 1
        task_id, context_id = context.task_id or "", context.context_id or ""
        await event_queue.enqueue_event(
            new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED)
        )
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.complete(updater.new_agent_message([new_text_part("thanks")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def test_send_refuses_a_server_whose_card_does_not_declare_the_extension(hosts: Hosts) -> None:
    plain = _Plain()

    def app(url: str) -> Starlette:
        interface = AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        card = AgentCard(
            name="chat", description="a chat agent", version="1",
            supported_interfaces=[interface], capabilities=AgentCapabilities(),
        )  # fmt: skip
        handler = DefaultRequestHandler(plain, InMemoryTaskStore(), card)
        routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/")]
        return Starlette(routes=routes)

    with running(app) as url:
        r = hosts.send(url)
    assert r.code == 3, r.err
    assert f"does not declare the ECL extension ({URI}): nothing sent" in r.err
    assert plain.calls == 0


def test_send_sends_nothing_its_own_orchestrator_gate_refuses(hosts: Hosts) -> None:
    hosts.payload.write_bytes(BODY + b"rewritten before the gate\n")
    with running(hosts.receiver()) as url:
        r = hosts.send(url)
    assert r.code == 3
    assert "ecl verify [tamper]" in r.err and "nothing sent" in r.err
    assert hosts.receiver_events() == [] and hosts.dispatched() == 0


def test_serve_refuses_a_receiver_no_contract_names(hosts: Hosts) -> None:
    r = hosts.cli("a2a", "serve", "--as", "nobody", "--root", hosts.b)
    assert r.code == 2
    assert "no contract names nobody as receiver" in r.err


def test_send_gives_up_on_a_server_that_stops_answering_at_its_deadline(hosts: Hosts) -> None:
    """A server that reads the message and never answers: `send` waits its --timeout, no
    more, and says so (exit 70, never an acceptance)."""
    import threading
    import time

    from eidolons.hosts.a2a import Receiver

    stuck = Receiver("vigil", hosts.b, command=[], key=None, limits=Limits())
    release = threading.Event()  # set once send has given up: the server then stops at once

    async def never(request: Request) -> Response:
        await request.body()
        await asyncio.to_thread(release.wait, 60)
        return Response(b"")

    def app(url: str) -> Starlette:
        routes = [*create_agent_card_routes(stuck.card(url)), Route("/", never, methods=["POST"])]
        return Starlette(routes=routes)

    with running(app) as url:
        began = time.monotonic()
        r = hosts.cli(
            "a2a", "send", hosts.payload, "--to", url, "--root", hosts.a, "--timeout", "0.5"
        )
        took = time.monotonic() - began
        release.set()
    assert r.code == 70, r.err
    assert f"no answer from {url} within 0.5 s" in r.err
    assert took < 10, took


def test_without_the_sdk_both_commands_name_the_extra_in_one_line(
    hosts: Hosts, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.delitem(sys.modules, "eidolons.hosts.a2a")
    for name in [n for n in sys.modules if n == "a2a" or n.startswith("a2a.")]:
        monkeypatch.setitem(sys.modules, name, None)  # as if a2a-sdk were not installed
    serve = ("serve", "--as", "vigil", "--host", "256.0.0.1")  # no host to listen on, if it ran
    for argv in (serve, ("send", str(hosts.payload), "--to", "http://x/")):
        r = hosts.cli("a2a", *argv, "--root", hosts.b)
        assert r.code == 2, r.err
        (line,) = r.err.splitlines()
        assert line.endswith("pip install 'eidolons[a2a]'"), line


@pytest.mark.parametrize("has_key", [True, False])
def test_a_high_trust_hmac_handoff_crosses_only_to_a_host_with_the_key(
    tmp_path: Path, has_key: bool
) -> None:
    """APIVR -> VIGIL is high trust: an HMAC tag over the payload. The receiving host
    recomputes it with its own copy of the key; a host without the key refuses it."""
    key = b"k" * 32
    hosts = Hosts(tmp_path, env=clean_env(ECL_HMAC_KEY=key.decode()))
    change = hosts.payload.with_name("change.md")
    change.write_bytes(b"# Change summary\n")
    ise = '{"assertion_grade": "self-attested"}'
    emit = emit_cmd(change, "--root", hosts.a, "--hmac", "--ise", ise, sender="apivr",
                    performative="PROPOSE", kind="change-summary")  # fmt: skip
    assert hosts.cli(*emit).code == 0
    with running(hosts.receiver(key=key if has_key else None)) as url:
        r = hosts.cli("a2a", "send", change, "--root", hosts.a, "--to", url)
    if has_key:
        assert r.code == 0, r.err
        assert "[vigil-verify-incoming] PASS: change-summary from apivr" in r.err
        assert "evidence: signed-receipt+hmac" in r.err
    else:
        assert r.code == 3, r.err
        assert f"{REFUSED} " in r.err and "ECL_HMAC_KEY is unset" in r.err
    assert hosts.dispatched() == int(has_key)


def rpc(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One JSON-RPC call, as any caller on the network can make it."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    headers = {"A2A-Version": "1.0", "A2A-Extensions": URI}
    doc: dict[str, Any] = httpx.post(url, json=body, headers=headers, timeout=30).json()
    return doc


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("ListTasks", {"includeArtifacts": True}),
        ("GetTask", {"id": "TASK"}),
        ("CancelTask", {"id": "TASK"}),
        ("SubscribeToTask", {"id": "TASK"}),
    ],
)
def test_no_caller_reads_back_a_task_nor_its_handoff(
    hosts: Hosts, method: str, params: dict[str, Any]
) -> None:
    """The server answers the message it is sent and nothing else: no task, history,
    payload or COMMAND output is listed or fetched by anyone on the network."""
    with running(hosts.receiver()) as url:
        assert hosts.send(url).code == 0  # verifies it here (its receipt), then sends it
        task = sdk_send(url, handoff_message(hosts), extensions=[URI])  # a real task's id
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        doc = rpc(url, method, {k: (task.id if v == "TASK" else v) for k, v in params.items()})
    assert "error" in doc and "result" not in doc, doc
    assert base64.b64encode(BODY).decode() not in json.dumps(doc)


def test_a_caller_that_asks_to_be_answered_before_the_gate_is_refused(hosts: Hosts) -> None:
    """``returnImmediately`` would answer the request (and free its connection) while the
    server still holds the message and runs its gate and COMMAND later: the connection
    cap would no longer bound what the server holds. Refused; no gate runs, nothing is
    kept or dispatched."""
    envelope = hosts.payload.with_name("scout-report.envelope.json").read_bytes()
    message = {
        "messageId": "m-1",
        "role": "ROLE_USER",
        "parts": [{"raw": base64.b64encode(BODY).decode()}],
        "metadata": {URI: {"envelope": base64.b64encode(envelope).decode()}},
    }
    with running(hosts.receiver()) as url:
        doc = rpc(
            url, "SendMessage", {"message": message, "configuration": {"returnImmediately": True}}
        )
        blocking = hosts.send(url)  # the same hand-off, answered once handled
    assert "error" in doc and "result" not in doc, doc
    assert "returnImmediately is refused" in doc["error"]["message"]
    assert blocking.code == 0, blocking.err
    assert hosts.dispatched() == 1
    assert [e["event"] for e in hosts.receiver_events()] == ["verify_pass", "receive"]


def test_the_servers_tasks_keep_no_message_and_stay_few() -> None:
    """What the SDK's task store holds: never a message's history (its payload), and at
    most a bounded number of tasks, however many messages came."""
    from a2a.server.context import ServerCallContext
    from a2a.types import Task, TaskStatus

    from eidolons.hosts.a2a import KEPT_TASKS, RecentTasks

    store, context = RecentTasks(), ServerCallContext()
    message = Message(message_id="m", role=Role.ROLE_USER, parts=[new_raw_part(BODY)])
    for i in range(KEPT_TASKS + 10):
        task = Task(
            id=f"t{i}", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED)
        )
        task.history.append(message)
        asyncio.run(store.save(task, context))
    kept = [asyncio.run(store.get(f"t{i}", context)) for i in range(KEPT_TASKS + 10)]
    assert [t is not None for t in kept] == [False] * 10 + [True] * KEPT_TASKS
    assert all(not t.history for t in kept if t is not None)


def test_a_body_sent_too_slowly_is_refused_at_its_deadline(
    hosts: Hosts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that declares a body and never sends it holds a connection only until
    the body's deadline: then 408, unread."""
    import time

    import eidolons.hosts.a2a as a2a

    monkeypatch.setattr(a2a, "BODY_DEADLINE_S", 0.5)
    with running(hosts.receiver()) as url:
        host, port = url.removeprefix("http://").rstrip("/").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            began = time.monotonic()
            sock.sendall(
                f"POST / HTTP/1.1\r\nHost: {host}\r\nContent-Length: 100\r\n\r\n{{".encode()
            )
            answer = sock.makefile("rb").read()
            took = time.monotonic() - began
        card = httpx.get(f"{url}.well-known/agent-card.json", timeout=10)
    assert answer.startswith(b"HTTP/1.1 408 ") and b"not sent within 0.5 s" in answer, answer
    assert took < 5, took
    assert card.status_code == 200


def test_a_kept_directory_linked_out_of_the_project_keeps_and_runs_nothing(
    hosts: Hosts, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (hosts.b / ".eidolons" / "handoffs").mkdir(parents=True, exist_ok=True)
    (hosts.b / ".eidolons" / "handoffs" / "a2a").symlink_to(outside)
    with running(hosts.receiver()) as url:
        r = hosts.send(url)
    assert r.code == 70, r.err
    assert "is a link out of the project" in r.err
    assert list(outside.iterdir()) == [] and hosts.dispatched() == 0


def test_a_receipt_that_is_not_base64_is_refused_by_name(hosts: Hosts) -> None:
    with running(hosts.receiver()) as url:
        task = sdk_send(url, handoff_message(hosts, receipt="not base64!"), extensions=[URI])
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    assert "receipt and sender_signature" in status_text(task) and "base64" in status_text(task)
    assert hosts.dispatched() == 0 and hosts.kept() == []


@pytest.mark.parametrize("ident", ["../../escape", "a/b", ".hidden", "x" * 201])
def test_a_message_id_that_cannot_name_a_directory_is_refused_before_the_gate(
    hosts: Hosts, ident: str
) -> None:
    envelope = hosts.payload.with_name("scout-report.envelope.json")
    doc = json.loads(envelope.read_text())
    doc["message_id"] = ident
    envelope.write_text(json.dumps(doc))
    with running(hosts.receiver()) as url:
        task = sdk_send(url, handoff_message(hosts), extensions=[URI])
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    assert status_text(task).startswith(f"{REFUSED} SCHEMA_INVALID from atlas")
    assert "cannot name the hand-off's directory" in status_text(task)
    assert hosts.kept() == [] and hosts.dispatched() == 0


def test_an_internal_error_fails_the_task_and_tells_the_caller_no_path(hosts: Hosts) -> None:
    kept = hosts.b / ".eidolons" / "handoffs" / "a2a"
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_text("a file where the kept directory goes\n")  # keeping it cannot work
    with running(hosts.receiver()) as url:
        r = hosts.send(url)
    assert r.code == 70, r.err
    (told,) = [line for line in r.err.splitlines() if "internal error (" in line]
    assert told.endswith("the server's log says more)"), told
    assert str(hosts.b) not in told  # the receiving host's paths stay on that host
    assert hosts.dispatched() == 0


@pytest.mark.parametrize(
    "stored",
    [
        {"state": "bogus", "lines": [], "output": None},
        {"state": "completed", "lines": [1, None], "output": None},
        {"state": "completed", "lines": "not a list", "output": 7},
        ["not", "an", "answer"],
    ],
)
def test_a_stored_answer_this_server_did_not_write_fails_the_redelivery(
    hosts: Hosts, stored: Any
) -> None:
    """The stored answer sits in the project: one rewritten into another shape answers a
    redelivery as a failed task (an internal error, its kind only), never as the SDK's
    refusal carrying the exception's text, and COMMAND does not run again."""
    with running(hosts.receiver()) as url:
        assert hosts.send(url).code == 0
        (answer,) = [p for p in hosts.kept() if p.name == "answer.json"]
        answer.write_text(json.dumps(stored))
        r = hosts.send(url)
    assert r.code == 70, r.err
    (told,) = [line for line in r.err.splitlines() if "internal error (" in line]
    assert told.endswith("the server's log says more)"), told
    assert "refused the request" not in r.err
    assert hosts.dispatched() == 1


def test_a_bad_timeout_is_a_usage_error_before_the_gate_runs(hosts: Hosts) -> None:
    r = hosts.cli("a2a", "send", hosts.payload, "--to", "http://127.0.0.1:9/", "--timeout", "0")
    assert r.code == 2 and "--timeout 0.0: a number of seconds above 0" in r.err
    assert "ecl verify" not in r.err  # the orchestrator gate did not run, nothing recorded


@pytest.mark.parametrize(
    "url", ["http://[::1", "ftp://127.0.0.1/", "127.0.0.1:8047", "http://", "https://xn--/"]
)
def test_a_url_that_names_no_http_server_is_a_usage_error_before_the_gate_runs(
    hosts: Hosts, url: str
) -> None:
    r = hosts.cli("a2a", "send", hosts.payload, "--to", url)
    assert r.code == 2, r.err
    assert r.err.startswith("eidolons: --to ") and "internal error" not in r.err, r.err
    assert "ecl verify" not in r.err  # the orchestrator gate did not run, nothing recorded


@pytest.mark.parametrize("port", ["65536", "-1"])
def test_serve_refuses_a_port_no_socket_can_have_as_a_usage_error(hosts: Hosts, port: str) -> None:
    r = hosts.cli("a2a", "serve", "--as", "vigil", "--root", hosts.b, "--port", port)
    assert r.code == 2, r.err
    assert "--port" in r.err and "internal error" not in r.err, r.err


def test_an_edge_that_requires_the_senders_signature_holds_across_hosts(hosts: Hosts) -> None:
    """B trusts atlas's sender key and requires its signature on atlas -> vigil: a relay
    that strips the signature, or puts one by another key in its place, is refused; the
    signed hand-off crosses with both kinds of evidence."""
    a, b = hosts.a, hosts.b
    assert hosts.cli("keys", "init", "--role", "sender:atlas", "--root", a).code == 0
    assert hosts.cli("keys", "pin", "--root", a).code == 0
    keys = hosts.cli("keys", "list", "--json", "--root", a).json()["keys"]
    atlas = next(k["keyid"] for k in keys if k["role"] == "sender:atlas")
    public = hosts.cli("keys", "export", atlas, "--root", a).out.strip()
    added = hosts.cli("keys", "add", public, "--role", "sender:atlas", "--root", b)
    assert added.code == 0, added.err
    assert hosts.cli("keys", "require-signature", "atlas", "vigil", "--root", b).code == 0
    signed = emit_cmd(hosts.payload, "--root", a, "--sign", "--force", to="vigil",
                      performative="PROPOSE")  # fmt: skip
    assert hosts.cli(*signed).code == 0
    sig = hosts.payload.with_name("scout-report.envelope.sig")
    assert sig.is_file()

    def strip(message: dict[str, Any]) -> None:
        fields = message["metadata"][URI]
        assert "sender_signature" in fields  # what send put on the wire
        del fields["sender_signature"]

    forged = sign_envelope(
        "application/vnd.eidolons.ecl-envelope+json",
        hosts.payload.with_name("scout-report.envelope.json").read_bytes(),
        Signer.generate(),
    )

    def swap(message: dict[str, Any]) -> None:
        fields = message["metadata"][URI]
        fields["sender_signature"] = base64.b64encode(json.dumps(forged).encode()).decode()

    def relayed(rewrite: Any) -> Run:
        with running(hosts.receiver()) as url, running(lambda _: _mitm(url, rewrite)) as relay:
            return hosts.send(relay)

    for rewrite, why in ((strip, "no sender signature"), (swap, "not signed by any")):
        r = relayed(rewrite)
        assert r.code == 3, r.err
        assert "[vigil-verify-incoming] REFUSE: UNVERIFIED from atlas" in r.err
        assert why in r.err
        assert hosts.kept() == [] and hosts.dispatched() == 0
    with running(hosts.receiver()) as url:
        r = hosts.send(url)
    assert r.code == 0, r.err
    assert "evidence: signed-receipt+sender-signature" in r.err
    kept = [p.name for p in hosts.kept()]
    assert "scout-report.envelope.sig" in kept and hosts.dispatched() == 1
