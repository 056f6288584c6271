"""A small, real CRYSTALIUM-shaped MCP server for the memory tests.

Built with the same `mcp` SDK as the client (low-level ``Server``), it speaks the tool
surface described in ``crystalium.md`` §1: ``recall``, ``ingest`` and ``commit`` with their
input schemas, answers as one ``TextContent`` whose text is JSON, refuses schema violations
with the plain text ``Input validation error: <message>`` and ``isError: true``, and its own
refusals as ``{"error": <reason code>, "message"}``. The answers come from the embedded
store (:class:`eidolons.memory.local.LocalMemory`) so they are real; ``commit`` is only
advertised (the client never calls it).

Options reproduce the server generations and failure modes the client must handle:

- ``--spelling old``: advertise ``crystalium.recall`` etc. (v0.1-v1.x) and, like those
  versions, return refusals with ``isError: false``.
- ``--rate-limit N``: after N tool calls every call answers ``RATE_LIMIT``.
- ``--fail-tool NAME``: that tool raises, so the client sees a JSON-RPC error.
- ``--hang-tool NAME``: that tool never answers (for timeouts).
- ``--omit-tool NAME``: do not advertise that tool.
- ``--pid-file PATH``: write the server's process id there (so a test can kill it).
- ``--transport http --port P``: streamable HTTP on 127.0.0.1:P at ``/mcp`` (JSON
  responses, stateless, as the real server's HTTP mode).

The canonical project key is ``--project``, else ``CRYSTALIUM_TEST_PROJECT`` (which the
client must forward to a stdio server, as it forwards every ``CRYSTALIUM_*`` variable).

Run: ``python tests/memory/crystalium_server.py --data-dir DIR [options]`` (stdio).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

from eidolons.memory import LAYERS, RATE_LIMIT
from eidolons.memory.local import LocalMemory

SCHEMAS: dict[str, dict[str, Any]] = {
    "recall": {
        "type": "object",
        "properties": {
            "scope": {
                "type": "object",
                "properties": {
                    "project": {"type": ["string", "null"]},
                    "agent_class_visibility": {"type": ["string", "null"]},
                    "sensitivity_tag": {"type": ["string", "null"]},
                },
            },
            "query": {"type": "string"},
            "k": {"type": "integer", "default": 10},
            "layers": {"type": "array", "items": {"enum": list(LAYERS)}},
            "explain": {"type": "boolean", "default": False},
        },
        "required": ["scope", "query"],
    },
    "ingest": {
        "type": "object",
        "properties": {
            "envelope": {"type": "object"},
            "payload": {},
            "payload_encoding": {"enum": ["utf8", "base64", "json"], "default": "utf8"},
        },
        "required": ["envelope", "payload"],
    },
    "commit": {
        "type": "object",
        "properties": {
            "layer": {"enum": list(LAYERS)},
            "payload": {"type": "object"},
            "provenance": {"type": "object"},
        },
        "required": ["layer", "payload", "provenance"],
    },
}


def build_server(args: argparse.Namespace) -> Server[Any]:
    memory = LocalMemory(Path(args.data_dir), project=args.project)
    prefix = "crystalium." if args.spelling == "old" else ""
    calls = {"n": 0}

    def text(body: Any, *, error: bool) -> types.CallToolResult:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(body))], is_error=error
        )

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=prefix + name, description=f"CRYSTALIUM {name}", input_schema=schema
                )
                for name, schema in SCHEMAS.items()
                if name not in args.omit_tool
            ]
        )

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        name = params.name.removeprefix("crystalium.").removeprefix("crystalium_")
        arguments = dict(params.arguments or {})
        if name not in SCHEMAS:
            return text({"error": "UNKNOWN_TOOL", "message": f"no tool {params.name}"}, error=True)
        calls["n"] += 1
        if args.rate_limit is not None and calls["n"] > args.rate_limit:
            body = {"error": RATE_LIMIT, "message": "rate limit exceeded", "advice": "wait"}
            return text(body, error=args.spelling != "old")
        try:
            jsonschema.validate(arguments, SCHEMAS[name])
        except jsonschema.ValidationError as exc:
            return types.CallToolResult(
                content=[
                    types.TextContent(type="text", text=f"Input validation error: {exc.message}")
                ],
                is_error=True,
            )
        if name in args.fail_tool:
            raise RuntimeError(f"{name} exploded")
        if name in args.hang_tool:
            await anyio.sleep_forever()
        if name == "commit":
            return text(
                {"error": "UNKNOWN_TOOL", "message": "commit is advertised only"}, error=True
            )
        if name == "recall":
            answer = memory.recall(
                arguments["scope"],
                arguments["query"],
                arguments.get("k", 10),
                arguments.get("layers"),
                explain=bool(arguments.get("explain")),
            )
        else:
            answer = memory.ingest(
                arguments["envelope"],
                arguments["payload"],
                payload_encoding=arguments.get("payload_encoding", "utf8"),
            )
        answer.pop("backend", None)  # the real server does not say
        refused = "error" in answer
        return text(answer, error=refused and args.spelling != "old")

    return Server(
        "crystalium-test", version="2.1.0", on_list_tools=on_list_tools, on_call_tool=on_call_tool
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument(
        "--project", default=os.environ.get("CRYSTALIUM_TEST_PROJECT", "testproject")
    )
    parser.add_argument("--spelling", choices=("new", "old"), default="new")
    parser.add_argument("--rate-limit", type=int, default=None)
    parser.add_argument("--fail-tool", action="append", default=[])
    parser.add_argument("--hang-tool", action="append", default=[])
    parser.add_argument("--omit-tool", action="append", default=[])
    parser.add_argument("--pid-file", default=None)
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--port", type=int, default=8848)
    args = parser.parse_args(argv)
    if args.pid_file:
        Path(args.pid_file).write_text(str(os.getpid()), encoding="utf-8")
    server = build_server(args)
    if args.transport == "http":
        import uvicorn

        app = server.streamable_http_app(json_response=True, stateless_http=True)
        uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
        return 0

    async def serve() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(serve)
    return 0


if __name__ == "__main__":
    sys.exit(main())
