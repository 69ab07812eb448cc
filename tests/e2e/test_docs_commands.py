"""Every gpuplan command line the README and docs/ show is one the CLI takes.

The docs drift from the CLI when a flag is renamed or a command moves; this test reads every ``gpuplan
...`` in the README's and docs/'s shell blocks and inline code, and checks each against the CLI itself:
the subcommand exists, every option shown is one of that command's options (``--a/--b`` pairs and
short forms included), and ``gpuplan <command> --help`` runs. Synopsis notation is read as such:
``[--gap 0.005]``, ``--cloud aws|gcp`` and ``...`` are options and placeholders, not literal text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from planner.cli import app

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "scenarios" / "README.md"]
#: fenced blocks read as commands; ```text blocks show output
SHELL_BLOCKS = {"", "bash", "sh", "shell", "console"}
COMMAND = re.compile(r"(?<![\w./\[-])gpuplan\s+(?=[a-z])")
FENCE = re.compile(r"^\s*```(\w*)\s*$")
INLINE = re.compile(r"`([^`\n]+)`")


@dataclass(frozen=True)
class Shown:
    """One command line as a document shows it."""

    where: str  # file:line
    text: str  # from "gpuplan" to the end of the command


def _segments(line: str) -> list[str]:
    """The gpuplan commands on one shell line: each command of it (split at ``&&``, ``;`` or a spaced
    pipe, comments dropped) that starts with ``gpuplan``; a tree listing's prose is not a command."""
    line = re.sub(r"\s#.*$", "", line)
    return [part.strip() for part in re.split(r"\s(?:&&|;|\|)\s", line) if COMMAND.match(part.strip())]


def shown_commands() -> list[Shown]:
    shown: list[Shown] = []
    for path in DOCS:
        language: str | None = None  # inside a fence: its language
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            fence = FENCE.match(line)
            if fence:
                language = None if language is not None else fence.group(1).lower()
                continue
            where = f"{path.relative_to(ROOT)}:{number}"
            if language is not None:
                if language in SHELL_BLOCKS:
                    shown += [Shown(where, text) for text in _segments(line.removeprefix("$ "))]
                continue
            for span in INLINE.findall(line):
                shown += [Shown(where, text) for text in _segments(span)]
    return shown


# typer carries its own click (typer._click): commands and options are read by what they have, not by
# their classes
Command = Any


@cache
def cli() -> Command:
    return typer.main.get_command(app)


def is_group(command: Command) -> bool:
    return hasattr(command, "commands")


def resolve(tokens: list[str]) -> tuple[list[str], Command, list[str]]:
    """(the subcommand path, its command, the tokens after it) of ``gpuplan <tokens>``."""
    command = cli()
    path: list[str] = []
    rest = list(tokens)
    while is_group(command) and rest and rest[0] in command.commands:
        path.append(rest[0])
        command = command.commands[rest.pop(0)]
    return path, command, rest


def options_of(command: Command) -> set[str]:
    names = {"--help"}
    for param in command.params:
        if getattr(param, "param_type_name", "") == "option":
            names.update(param.opts)
            names.update(param.secondary_opts)
    return names


def flags(rest: list[str]) -> list[str]:
    """The options among the tokens after the command, synopsis brackets and alternatives read away."""
    found = []
    for token in rest:
        token = token.strip("[](),")
        if not token.startswith("-") or token in ("-", "--"):
            continue
        name = token.split("=", 1)[0]
        found += [part for part in name.split("/") if part.startswith("-")]
    return found


SHOWN = shown_commands()


def test_the_docs_show_commands() -> None:
    """The scan finds what it should (a regression in the scan would otherwise pass everything)."""
    assert len(SHOWN) > 40
    families = {resolve(s.text.split()[1:])[0][0] for s in SHOWN if resolve(s.text.split()[1:])[0]}
    assert {"plan", "verify", "whatif", "provision", "daemon", "simulate"} <= families


@pytest.mark.parametrize("shown", SHOWN, ids=[f"{s.where} {s.text[:60]}" for s in SHOWN])
def test_each_command_shown_is_one_the_cli_takes(shown: Shown) -> None:
    path, command, rest = resolve(shown.text.split()[1:])
    assert path, f"{shown.where}: {shown.text!r} names no gpuplan command"
    if is_group(command) and not command.params:  # `gpuplan simulate` alone: a group, named as such
        assert not flags(rest), f"{shown.where}: options given to the group {' '.join(path)}"
        return
    # a group that runs itself (`gpuplan catalog --gpu H100`) takes its own options, checked as a command's
    unknown = [flag for flag in flags(rest) if flag not in options_of(command)]
    assert not unknown, f"{shown.where}: `gpuplan {' '.join(path)}` has no option {', '.join(unknown)}"


@pytest.mark.parametrize(
    "path", sorted({tuple(resolve(s.text.split()[1:])[0]) for s in SHOWN} - {()}), ids=" ".join
)
def test_the_help_of_each_command_shown_runs(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output


def test_a_renamed_option_is_caught() -> None:
    """The check itself: an option the command does not have, and a command that does not exist."""
    _path, command, rest = resolve(["plan", "s.yaml", "-o", "out", "--time-limits", "10"])
    assert [f for f in flags(rest) if f not in options_of(command)] == ["--time-limits"]
    assert resolve(["plans", "x"])[0] == []
    assert flags(["[--solver", "highs|cbc]", "--mixed/--training-only", "-o", "DIR"]) == [
        "--solver", "--mixed", "--training-only", "-o",
    ]  # fmt: skip
