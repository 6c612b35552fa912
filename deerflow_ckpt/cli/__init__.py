"""The typer command line: thin adapters that turn options into calls and results into exit codes."""
