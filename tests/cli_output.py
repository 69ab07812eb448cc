"""Not a test module: what the CLI tests check of a command's output (``from cli_output import ...``;
pytest puts ``tests/`` on the path for the conftest beside this file)."""

from __future__ import annotations

from typing import Any


def output_lines(text: str) -> list[str]:
    """The non-blank lines, stripped."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def assert_input_error(result: Any, *needles: str) -> str:
    """Exit 2, exactly one line of output, no traceback, and the message names every needle."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output
    lines = output_lines(result.output)
    assert len(lines) == 1, lines
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]
