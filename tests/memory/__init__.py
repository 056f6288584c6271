"""Tests of the hand-off memory: local store, MCP client, CLI."""
