"""Every `--help` reads whole in an 80-column terminal, as written (issue 42, point 4).

Rich's help panels cut long option names to fit (``--clusters-per-blo…``, ``--no-fail-on-unser…``) and
turned ``:100:`` in ``50:100:5`` into an emoji (``50💯5``). Each command's and sub-command's help is
rendered at COLUMNS=80 and must have no ellipsis, no emoji, no line wider than 80 columns, and every
option name (and its ``--no-`` form) spelled out whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from planner.cli import app

#: The emoji blocks Rich's ``:name:`` codes map into (pictographs, symbols, dingbats, flags).
EMOJI = re.compile("[\U0001f000-\U0001faff\u2600-\u27bf\u2b00-\u2bff\ufe0f]")


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    for name, sub in sorted((getattr(command, "commands", None) or {}).items()):
        if not getattr(sub, "hidden", False):
            yield from _commands(sub, (*path, name))


COMMANDS = list(_commands(typer.main.get_command(app)))


def test_every_command_is_walked() -> None:
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"", "plan", "provision", "simulate openb", "simulate philly", "catalog fetch"} <= names
    assert len(names) >= 20


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[" ".join(p) or "gpuplan" for p, _ in COMMANDS])
def test_help_fits_80_columns_whole(path: tuple[str, ...], command: Any) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0, result.output
    text = result.output
    assert "…" not in text, text
    assert not EMOJI.search(text), text
    wide = [line for line in text.splitlines() if len(line) > 80]
    assert not wide, wide
    names = [
        name
        for param in command.params
        if not getattr(param, "hidden", False)
        for name in (*param.opts, *param.secondary_opts)
        if name.startswith("--")
    ]
    missing = [name for name in names if not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text)]
    assert not missing, (missing, text)


def test_a_colon_range_is_not_an_emoji() -> None:
    result = CliRunner().invoke(
        app, ["simulate", "openb", "--help"], env={"COLUMNS": "80"}, terminal_width=80
    )
    assert "50:100:5" in result.output, result.output
