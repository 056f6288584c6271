"""A local fake of the Anthropic Messages API that plays scripted turns for Claude Code.

Listens on 127.0.0.1 only. ``POST /v1/messages`` answers in the streaming SSE shape
Claude Code expects (``message_start``, ``content_block_*``, ``message_delta``,
``message_stop``), or as one JSON message when the request is not streamed.

Script: the first ``ECLTEST <action> ...`` line found in a conversation decides the turn.

- ``ECLTEST read PATH``: ask for a ``Read`` of PATH;
- ``ECLTEST bash COMMAND...``: ask for a ``Bash`` call;
- ``ECLTEST agent NAME <directive>``: ask for an ``Agent`` call to subagent NAME whose
  prompt is ``ECLTEST <directive>`` (the subagent then plays that directive);
- ``ECLTEST tool NAME {json}``: ask for a call of any tool NAME with that input;
- ``ECLTEST seq ["<directive>", ...]``: the directives one after another in one
  conversation, each recorded under its own text (many tool calls per session).

Once the conversation carries the ``tool_result`` for the tool use the
fake asked for, the result is recorded (``results[tool_use_id]``) and the turn ends with
a short text. Any request without a directive gets a plain text answer.
"""

from __future__ import annotations

import json
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "claude-sonnet-4-5"


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict):
                if block.get("type") == "text":
                    parts.append(str(block.get("text", "")))
                elif block.get("type") == "tool_result":
                    parts.append(_text_of(block.get("content")))
    return "\n".join(parts)


def _tool_results(messages: list[dict[str, Any]]) -> dict[str, tuple[dict[str, Any], str]]:
    """Each tool_result in the conversation by its tool_use_id, with the text of the
    message that carried it (the hook's context rides beside the result)."""
    out: dict[str, tuple[dict[str, Any], str]] = {}
    for i, msg in enumerate(messages):
        content = msg.get("content")
        if msg.get("role") != "user" or not isinstance(content, list):
            continue
        # the context a hook adds rides in the same message or the user message after it
        after = messages[i + 1] if i + 1 < len(messages) else {}
        beside = (
            _text_of(content)
            + "\n"
            + (_text_of(after.get("content")) if after.get("role") == "user" else "")
        )
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                out[str(block.get("tool_use_id"))] = (block, beside)
    return out


def find_directive(messages: list[dict[str, Any]]) -> str | None:
    for msg in messages:
        if msg.get("role") != "user":
            continue
        for line in _text_of(msg.get("content")).splitlines():
            line = line.strip()
            if line.startswith("ECLTEST "):
                return line[len("ECLTEST ") :]
    return None


def tool_for(directive: str) -> tuple[str, dict[str, Any]]:
    action, _, rest = directive.partition(" ")
    if action == "read":
        return "Read", {"file_path": rest}
    if action == "bash":
        return "Bash", {"command": rest, "description": "Run the scripted command"}
    if action == "grep":
        pattern, _, glob = rest.partition(" ")
        return "Grep", {
            "pattern": pattern,
            **({"glob": glob} if glob else {}),
            "output_mode": "content",
        }
    if action == "glob":
        pattern, _, path = rest.partition(" ")
        return "Glob", {"pattern": pattern, **({"path": path} if path else {})}
    if action == "tool":
        name, _, raw = rest.partition(" ")
        return name, json.loads(raw)
    if action == "agent":
        name, _, inner = rest.partition(" ")
        return "Agent", {
            "subagent_type": name,
            "description": "Scripted subagent",
            "prompt": f"ECLTEST {inner}",
            "run_in_background": False,
        }
    raise ValueError(f"unknown directive {directive!r}")


class FakeAnthropic:
    def __init__(self) -> None:
        self.results: dict[str, dict[str, Any]] = {}
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        handler = self._handler()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        assert isinstance(host, str)  # an AF_INET server's address: (host, port)
        return f"http://{host}:{port}"

    def start(self) -> FakeAnthropic:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # the scripted model -------------------------------------------------------------
    def reply(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The content blocks of the assistant's answer to one request."""
        messages = body.get("messages") or []
        directive = find_directive(messages)
        if directive is None:
            return [{"type": "text", "text": "ok"}]
        steps = json.loads(directive[4:]) if directive.startswith("seq ") else [directive]
        answered = _tool_results(messages)
        for i, step in enumerate(steps):
            name, tool_input = tool_for(step)
            tag = zlib.crc32(f"{directive}#{i}".encode())
            tool_id = "toolu_" + format(tag, "08x") + name.lower().replace("_", "")[:24]
            if tool_id in answered:
                block, context = answered[tool_id]
                with self._lock:
                    self.results[step] = {
                        "is_error": bool(block.get("is_error")),
                        "text": _text_of(block.get("content")),
                        "context": context,
                    }
                continue
            return [{"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}]
        return [{"type": "text", "text": "done"}]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._json(200, {"data": [], "has_more": False})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {}
                path = self.path.split("?")[0]
                if not path.endswith("/v1/messages"):
                    if path.endswith("/count_tokens"):
                        self._json(200, {"input_tokens": 10})
                    else:
                        self._json(200, {})
                    return
                with fake._lock:
                    fake.requests.append(body)
                blocks = fake.reply(body)
                stop = "tool_use" if blocks[-1]["type"] == "tool_use" else "end_turn"
                if body.get("stream"):
                    self._stream(blocks, stop, body.get("model") or MODEL)
                else:
                    self._json(200, _message(blocks, stop, body.get("model") or MODEL))

            def _json(self, status: int, doc: Any) -> None:
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, blocks: list[dict[str, Any]], stop: str, model: str) -> None:
                events = list(_sse_events(blocks, stop, model))
                data = b"".join(
                    f"event: {kind}\ndata: {json.dumps(doc)}\n\n".encode() for kind, doc in events
                )
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


_USAGE = {
    "input_tokens": 10,
    "output_tokens": 5,
    "cache_read_input_tokens": 0,
    "cache_creation_input_tokens": 0,
}


def _message(blocks: list[dict[str, Any]], stop: str, model: str) -> dict[str, Any]:
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": _USAGE,
    }


def _sse_events(blocks: list[dict[str, Any]], stop: str, model: str) -> Any:
    start = _message([], stop, model)
    start["stop_reason"] = None
    yield "message_start", {"type": "message_start", "message": start}
    for i, block in enumerate(blocks):
        if block["type"] == "text":
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": i,
                    "content_block": {"type": "text", "text": ""},
                },
            )
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": i,
                    "delta": {"type": "text_delta", "text": block["text"]},
                },
            )
        else:
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": i,
                    "content_block": {**block, "input": {}},
                },
            )
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": i,
                    "delta": {
                        "type": "input_json_delta",
                        "partial_json": json.dumps(block["input"]),
                    },
                },
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": 5},
        },
    )
    yield "message_stop", {"type": "message_stop"}
