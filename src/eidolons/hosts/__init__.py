"""Adapters for the agent hosts: the hook, the wiring `init` writes, `doctor`, the MCP
server and the receiver skills. Nothing in the package imports this but the CLI."""
