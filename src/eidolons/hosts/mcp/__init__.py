"""``eidolons mcp serve``: the gates as MCP tools (ADR 0020).

:mod:`eidolons.hosts.mcp.tools` holds what each tool does, without the SDK, so it is
importable and testable without ``mcp``; :mod:`eidolons.hosts.mcp.server` is the only
module that imports the ``mcp`` SDK, and only ``eidolons mcp serve`` imports it.
"""
