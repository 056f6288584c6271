"""The MCP server over stdio (the only module importing the ``mcp`` SDK).

Each tool wraps a :class:`~eidolons.hosts.mcp.tools.Toolbox` method, whose type hints are
the input schema, and returns the toolbox's :class:`~eidolons.hosts.mcp.tools.Reply` as a
``CallToolResult``. Reading tools are ``readOnlyHint``; the others append trace events or
write a new envelope, never destroy (``destructiveHint: false``); none reaches outside
the project.
"""

from __future__ import annotations

import base64
import functools
import inspect
from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp.server import MCPServer

from eidolons import __version__
from eidolons.hosts.mcp.tools import Reply, Toolbox

__all__ = ["build_server", "serve"]

#: Claude Code caps MCP results at 25,000 tokens unless a tool raises it (hosts §1.9).
MAX_RESULT_CHARS = 500_000

_READS = types.ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
_APPENDS = types.ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)


def _result(reply: Reply) -> types.CallToolResult:
    content: list[Any] = [types.TextContent(type="text", text=reply.text)]
    if reply.blob is not None:
        content.append(
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(
                    uri="eidolons://read_verified/payload",
                    blob=base64.b64encode(reply.blob).decode("ascii"),
                    mime_type=reply.mime_type,
                ),
            )
        )
    return types.CallToolResult(
        content=content, structured_content=reply.structured, is_error=reply.is_error
    )


def _tool(method: Callable[..., Reply]) -> Callable[..., types.CallToolResult]:
    """The MCP tool for a :class:`Toolbox` method: the method's own signature (its type
    hints are the input schema), returning the ``CallToolResult`` built from its reply."""

    @functools.wraps(method)
    def tool(*args: Any, **kwargs: Any) -> types.CallToolResult:
        return _result(method(*args, **kwargs))

    signature = inspect.signature(method, eval_str=True)
    tool.__signature__ = signature.replace(  # type: ignore[attr-defined]
        return_annotation=types.CallToolResult
    )
    return tool


def _instructions(box: Toolbox) -> str:
    who = f"this server acts for receiver {box.bound} only" if box.bound else "unbound"
    return (
        "ECL hand-off gates for this project "
        f"({who}). Read a hand-off payload (a file with a sibling .envelope.json) only through "
        "read_verified: it returns exactly the bytes the receiver gate verified, and on refusal "
        "an error starting with '[<receiver>-verify-incoming] REFUSE: <CODE> from <sender>'. "
        "On a refusal do not process the payload: hand the refusal back to the orchestrator."
    )


def build_server(box: Toolbox) -> MCPServer[Any]:
    """The server with its seven tools registered."""
    server: MCPServer[Any] = MCPServer(
        "eidolons", version=__version__, instructions=_instructions(box), log_level="WARNING"
    )
    bound = f" This server is bound to {box.bound}; receiver defaults to it." if box.bound else ""

    server.tool(
        title="Read a hand-off payload through the receiver gate",
        description="Run the receiver gate on ARTIFACT (a hand-off payload path, relative to the "
        "project root) for RECEIVER and, only if it passes, return exactly the verified bytes, "
        "with message_id, thread_id, sender, kind and digest as structured content. On "
        "refusal: an error carrying the REFUSE line and no byte of the payload." + bound,
        annotations=_APPENDS,
        meta={"anthropic/maxResultSizeChars": MAX_RESULT_CHARS},
    )(_tool(box.read_verified))

    server.tool(
        title="Receiver gate decision",
        description="Run the receiver gate on ARTIFACT for RECEIVER and return its decision "
        "(every failed check); records verify_pass/receive or verify_fail in the thread's "
        "trace like eidolons verify-incoming. Never returns the payload." + bound,
        annotations=_APPENDS,
    )(_tool(box.verify_incoming))

    server.tool(
        title="Check an envelope's digest (not recorded)",
        description="Compute the orchestrator gate's verdict for ENVELOPE (pass, tamper, "
        "inconsistent, missing_payload, no_key, unverifiable, unsupported_algo, malformed). "
        "Read-only: the verdict is NOT recorded in the trace, so it is never evidence a "
        "receiver accepts; the orchestrator records with eidolons verify-envelope --block.",
        annotations=_READS,
    )(_tool(box.verify_envelope))

    server.tool(
        title="Emit an envelope for a payload",
        description="Write the ECL envelope beside PAYLOAD (never over an existing one) and "
        "record the emit event, as eidolons emit. sender is name@version (a bound server "
        "emits only as its receiver); to likewise.",
        annotations=_APPENDS,
    )(_tool(box.emit))

    server.tool(
        title="Show a thread's trace",
        description="The events of one thread's trace (the last LIMIT, at most 1000), "
        "verify failures flagged with !!.",
        annotations=_READS,
    )(_tool(box.trace_show))

    server.tool(
        title="ECL conformance check",
        description="Run every conformance gate on the envelopes at PATHS (files or "
        "directories under the project root), as eidolons check.",
        annotations=_READS,
    )(_tool(box.check))

    server.tool(
        title="Show the contracts in force",
        description="The effective hand-off contracts, optionally only those from SENDER "
        "and/or to RECEIVER.",
        annotations=_READS,
    )(_tool(box.contracts_show))

    return server


def serve(box: Toolbox) -> None:
    """Serve ``box`` over stdio until the client closes the connection."""
    build_server(box).run()
