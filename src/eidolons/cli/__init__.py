"""The command line: `main` and one module per command."""
