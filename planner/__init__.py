"""Decisions and their outputs: the optimizer, baselines, reports and the CLI."""
