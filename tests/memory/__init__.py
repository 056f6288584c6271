"""Tests of the hand-off memory (issue 4): local store, MCP client, CLI."""
