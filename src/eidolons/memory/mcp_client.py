"""A client for a real CRYSTALIUM server over stdio or streamable HTTP, with the ``mcp`` SDK.

The SDK is async; :class:`McpMemory` gives it a synchronous face: one background thread runs
a private event loop and one long-lived session, opened by the first call, and each call is
handed to it and waited for with a deadline (``first_call_timeout`` for the first, which
covers the start, the handshake and ``list_tools``; ``call_timeout`` after). Rules:

1. The SDK (the optional ``eidolons[mcp]`` extra) is imported in the thread only; missing,
   every call is a skip.
2. A logical tool maps to the first advertised spelling of ``recall``,
   ``crystalium.recall``, ``crystalium_recall`` (v2.0+, v0.1-v1.x); one not advertised is a
   skip.
3. A timeout, a transport failure or a closed connection ends the session for good (a
   timed-out ingest may or may not have been applied): every later call is a skip.
4. Answers take the shared shapes (:func:`interpret_tool_result`), ``"backend": "mcp"``
   (a skip ``"unavailable"``); ``close()`` waits at most ``close_timeout``, never more.
5. A stdio server gets the SDK's allow-listed environment, this process's ``CRYSTALIUM_*``
   variables and ``MemoryConfig.extra_env``; its stderr goes to ``os.devnull`` unless
   ``EIDOLONS_MEMORY_SERVER_LOG`` names a file to append to.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from eidolons.memory import (
    BACKEND_MCP,
    INPUT_VALIDATION,
    INPUT_VALIDATION_PREFIX,
    SERVER_ERROR,
    UNKNOWN_TOOL,
    error_result,
    skipped_ingest,
    skipped_recall,
)

if TYPE_CHECKING:
    from eidolons.memory import MemoryConfig

TOOL_SPELLINGS: Final[dict[str, tuple[str, ...]]] = {
    logical: (logical, f"crystalium.{logical}", f"crystalium_{logical}")
    for logical in ("recall", "ingest", "commit")
}

# JSON-RPC codes (mcp_types.jsonrpc) that mean "the connection is gone", not "refused".
_CONNECTION_CLOSED: Final = -32000
_REQUEST_TIMEOUT: Final = -32001
_METHOD_NOT_FOUND: Final = -32601


class Unavailable(Exception):
    """The server cannot be used; the message is the reason reported in skipped results."""


def resolve_tools(advertised: Sequence[str]) -> dict[str, str]:
    """Logical tool name -> the spelling this server advertises (absent when none)."""
    names = set(advertised)
    resolved: dict[str, str] = {}
    for logical, spellings in TOOL_SPELLINGS.items():
        for spelling in spellings:
            if spelling in names:
                resolved[logical] = spelling
                break
    return resolved


def interpret_tool_result(result: Any) -> dict[str, Any]:
    """Map a ``CallToolResult`` (SDK 1.x or 2.x) to a shared-shape answer: a JSON text body
    is the answer, one with an ``"error"`` key a refusal with that code whether or not
    ``isError`` is set (v1.x leaves it unset), ``Input validation error: ...`` is
    ``INPUT_VALIDATION``, anything else ``SERVER_ERROR``."""
    is_err = bool(getattr(result, "is_error", getattr(result, "isError", False)))
    text: str | None = None
    for item in getattr(result, "content", None) or []:
        if isinstance(getattr(item, "text", None), str):
            text = item.text
            break
    if text is None:
        structured = getattr(
            result, "structured_content", getattr(result, "structuredContent", None)
        )
        if isinstance(structured, dict) and not is_err:
            return {**structured, "backend": BACKEND_MCP}
        return error_result(SERVER_ERROR, "tool answered without a text body", BACKEND_MCP)
    if text.startswith(INPUT_VALIDATION_PREFIX.rstrip()):
        return error_result(INPUT_VALIDATION, text, BACKEND_MCP)
    try:
        body = json.loads(text)
    except ValueError:
        return error_result(SERVER_ERROR, text, BACKEND_MCP)
    if isinstance(body, dict) and body.get("error") is not None:
        code = body["error"]
        answer = {**body, "error": code if isinstance(code, str) else SERVER_ERROR}
        answer.setdefault("message", "")
        answer["backend"] = BACKEND_MCP
        return answer
    if is_err or not isinstance(body, dict):
        return error_result(SERVER_ERROR, text, BACKEND_MCP)
    body.pop("backend", None)
    return {**body, "backend": BACKEND_MCP}


def _rpc_code(exc: BaseException) -> int | None:
    code = getattr(getattr(exc, "error", None), "code", None)
    return code if isinstance(code, int) else None


def _payload_argument(payload: Any, encoding: str) -> tuple[Any, str]:
    """Bytes travel as UTF-8 text when they are UTF-8 (the server's digest check then
    holds), else as base64 (the server hashes the transport string, so it will refuse)."""
    if isinstance(payload, bytes | bytearray | memoryview):
        raw = bytes(payload)
        try:
            return raw.decode("utf-8"), "utf8"
        except UnicodeDecodeError:
            return base64.b64encode(raw).decode("ascii"), "base64"
    if isinstance(payload, str):
        return payload, encoding
    return json.loads(json.dumps(payload, default=str)), encoding


class _Worker:
    """The background thread, its event loop and the one MCP session."""

    def __init__(self, config: MemoryConfig) -> None:
        self.config = config
        self.ready: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        self.loop = asyncio.new_event_loop()
        self.done = asyncio.Event()  # set: leave the session
        self.lock = threading.Lock()
        self.closed = False
        self.session: Any = None  # and ``anyio``, once connected
        self.anyio: Any = None
        self.task: asyncio.Task[None] | None = None
        self.thread = threading.Thread(target=self._run, name="eidolons-memory-mcp", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.task = self.loop.create_task(self._main())
            self.loop.run_until_complete(self.task)
        except BaseException as exc:  # includes cancellation while connecting
            if not self.ready.done():
                self.ready.set_exception(Unavailable(f"session ended: {exc!r}"))
        finally:
            if not self.ready.done():
                self.ready.set_exception(Unavailable("session closed before it was ready"))
            with self.lock:
                self.closed = True
            with contextlib.suppress(Exception):
                self.loop.run_until_complete(asyncio.sleep(0))  # calls already handed over
                pending = asyncio.all_tasks(self.loop)
                for task in pending:  # their callers hear "session closed"
                    task.cancel()
                self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    async def _main(self) -> None:
        try:
            import anyio
            from mcp import ClientSession
        except ImportError as exc:
            self.ready.set_exception(
                Unavailable(f"mcp SDK not importable ({exc}); pip install 'eidolons[mcp]'")
            )
            return
        self.anyio = anyio
        logger = logging.getLogger("mcp")
        if not logger.handlers:  # SDK warnings must not leak onto a gate's stderr
            logger.addHandler(logging.NullHandler())
        try:
            async with contextlib.AsyncExitStack() as stack:
                # Only the handshake sits in the deadline's scope: a cancel scope must not
                # enclose the entry of a task group that outlives it (anyio's LIFO rule).
                streams = await stack.enter_async_context(self._transport(stack))
                session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
                with anyio.fail_after(self.config.first_call_timeout):
                    init = await session.initialize()
                    listing = await session.list_tools()
                info = getattr(init, "server_info", getattr(init, "serverInfo", None))
                self.session = session
                self.ready.set_result(
                    {
                        "tools": [tool.name for tool in listing.tools],
                        "server": {
                            "name": getattr(info, "name", None),
                            "version": getattr(info, "version", None),
                        },
                        "protocol_version": getattr(
                            init, "protocol_version", getattr(init, "protocolVersion", None)
                        ),
                    }
                )
                await self.done.wait()
        except Exception as exc:
            if not self.ready.done():
                self.ready.set_exception(Unavailable(f"cannot reach the server: {_describe(exc)}"))
            raise

    async def _call(self, name: str, arguments: dict[str, Any], timeout: float) -> Any:
        try:
            with self.anyio.fail_after(timeout):
                return await self.session.call_tool(name, arguments)
        except Exception as exc:
            if _rpc_code(exc) in (None, _CONNECTION_CLOSED, _REQUEST_TIMEOUT):
                self.done.set()  # transport trouble or a timeout: end the session
            raise

    def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        config = self.config
        if config.url:
            try:
                from mcp.client.streamable_http import streamable_http_client as http_client
            except ImportError:  # SDK 1.x spelling
                from mcp.client.streamable_http import (  # type: ignore[attr-defined,no-redef]
                    streamablehttp_client as http_client,
                )
            return http_client(config.url)
        from mcp import StdioServerParameters, stdio_client

        env = {k: v for k, v in os.environ.items() if k.startswith("CRYSTALIUM_")}
        env.update(config.extra_env)
        log_path = os.environ.get("EIDOLONS_MEMORY_SERVER_LOG")
        errlog = open(log_path or os.devnull, "a", encoding="utf-8")
        stack.callback(errlog.close)
        params = StdioServerParameters(
            command=config.command[0], args=list(config.command[1:]), env=env
        )
        return stdio_client(params, errlog=errlog)

    def submit(
        self, name: str, arguments: dict[str, Any], timeout: float
    ) -> concurrent.futures.Future[Any]:
        with self.lock:
            if not self.closed:
                return asyncio.run_coroutine_threadsafe(
                    self._call(name, arguments, timeout), self.loop
                )
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        future.set_exception(Unavailable("session closed"))
        return future

    def stop(self, timeout: float) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed already
            self.loop.call_soon_threadsafe(self._stop_in_loop)
        if self.thread.is_alive() and threading.current_thread() is not self.thread:
            self.thread.join(timeout)

    def _stop_in_loop(self) -> None:
        if self.session is not None:
            self.done.set()
        elif self.task is not None:
            self.task.cancel()  # still connecting: stop trying


def _describe(exc: BaseException) -> str:
    """One line for an exception, looking inside exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if str(exc) else text


class McpMemory:
    """The ``mcp`` backend: a CRYSTALIUM server behind :class:`~eidolons.memory.Memory`."""

    def __init__(self, config: MemoryConfig) -> None:
        self.config = config
        self.transport = "http" if config.url else "stdio"
        self._lock = threading.Lock()
        self._worker: _Worker | None = None
        self._info: dict[str, Any] = {}
        self._tools: dict[str, str] = {}
        self._called = False
        self._failure: str | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None

    @property
    def backend(self) -> str:
        return "unavailable" if self._failure else BACKEND_MCP

    @property
    def project(self) -> str | None:
        return self.config.project

    # -- the Memory interface ----------------------------------------------------------

    def recall(
        self,
        scope: Mapping[str, Any],
        query: str,
        k: int = 5,
        layers: Sequence[str] | None = None,
        *,
        explain: bool = False,
    ) -> dict[str, Any]:
        arguments: dict[str, Any] = {
            "scope": {
                key: value
                for key, value in dict(scope).items()
                if not (key == "project" and not value)
            }
            if isinstance(scope, Mapping)
            else scope,
            "query": query,
            "k": k,
        }
        if layers is not None:
            arguments["layers"] = list(layers)
        if explain:
            arguments["explain"] = True
        answer = self._call("recall", arguments)
        return skipped_recall(answer, k) if isinstance(answer, str) else answer

    def ingest(
        self,
        envelope: Mapping[str, Any],
        payload: Any,
        *,
        payload_encoding: str = "utf8",
        gated: bool = False,
    ) -> dict[str, Any]:
        del gated  # the server's tool has no such argument: it sets its own validation state
        value, encoding = _payload_argument(payload, payload_encoding)
        try:
            envelope_arg = json.loads(json.dumps(envelope, default=str))
        except (TypeError, ValueError):
            envelope_arg = envelope
        arguments = {"envelope": envelope_arg, "payload": value, "payload_encoding": encoding}
        answer = self._call("ingest", arguments)
        return skipped_ingest(answer) if isinstance(answer, str) else answer

    def stats(self) -> dict[str, Any]:
        with self._lock:
            reason = self._connect(self.config.first_call_timeout)
        if reason is not None:
            return {"backend": "unavailable", "status": "unavailable", "reason": reason}
        return {
            "backend": BACKEND_MCP,
            "status": "connected",
            "transport": self.transport,
            "server": self._info.get("server"),
            "protocol_version": self._info.get("protocol_version"),
            "tools": dict(self._tools),
            "advertised": self._info.get("tools", []),
        }

    def close(self) -> None:
        with self._lock:
            self._fail(self._failure or "memory client closed")
        if self._finalizer is not None:
            self._finalizer.detach()

    # -- plumbing ------------------------------------------------------------------------

    def _fail(self, reason: str) -> str:
        self._failure = reason
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.stop(self.config.close_timeout)
        return reason

    def _connect(self, budget: float) -> str | None:
        """Start the session if needed; a reason string when it cannot be used."""
        if self._failure is not None:
            return self._failure
        if self._worker is None:
            if self.config.url is None and not self.config.command:
                return self._fail("no server command or URL configured")
            worker = _Worker(self.config)
            self._worker = worker
            self._finalizer = weakref.finalize(self, worker.stop, self.config.close_timeout)
            worker.start()
        try:
            self._info = self._worker.ready.result(timeout=budget)
        except concurrent.futures.TimeoutError:
            return self._fail(f"no answer from the server within {budget:g}s")
        except Unavailable as exc:
            return self._fail(str(exc))
        except Exception as exc:  # anything the SDK raised while connecting
            return self._fail(f"cannot reach the server: {_describe(exc)}")
        self._tools = resolve_tools(self._info.get("tools", []))
        return None

    def _call(self, logical: str, arguments: dict[str, Any]) -> dict[str, Any] | str:
        """The tool's answer, or a reason string when the call was skipped."""
        with self._lock:
            budget = self.config.call_timeout if self._called else self.config.first_call_timeout
            start = time.monotonic()
            reason = self._connect(budget)
            if reason is not None:
                return reason
            name = self._tools.get(logical)
            if name is None:
                return f"the server does not advertise a {logical} tool"
            remaining = max(0.1, budget - (time.monotonic() - start))
            assert self._worker is not None
            future = self._worker.submit(name, arguments, remaining)
            try:
                result = future.result(timeout=remaining + 1.0)
            except concurrent.futures.TimeoutError:
                return self._fail(f"{name} got no answer within {budget:g}s")
            except Unavailable as exc:
                return self._fail(str(exc))
            except concurrent.futures.CancelledError:
                return self._fail("session closed")
            except Exception as exc:
                code = _rpc_code(exc)
                if code is None or code in (_CONNECTION_CLOSED, _REQUEST_TIMEOUT):
                    return self._fail(f"{name} failed: {_describe(exc)}")
                self._called = True
                if code == _METHOD_NOT_FOUND or "unknown tool" in str(exc).lower():
                    return error_result(UNKNOWN_TOOL, str(exc), BACKEND_MCP)
                return error_result(SERVER_ERROR, str(exc), BACKEND_MCP, rpc_code=code)
            self._called = True
            return interpret_tool_result(result)
