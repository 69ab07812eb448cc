"""What every command module shares: exit codes, the stderr console, one line for a ``GpuplanError``
(never a traceback) and progress messages. Output directories that appear whole or not at all are
``models.files.atomic_directory``.
"""

from __future__ import annotations

from collections.abc import Callable

import typer
from rich.console import Console
from rich.markup import escape

from models.errors import GpuplanError, InputError
from planner.history.errors import HistorySourceError
from providers.errors import ProviderError

__all__ = [
    "EXIT_CLOUD",
    "EXIT_INPUT",
    "EXIT_SELF_CHECK",
    "EXIT_SOLVER",
    "EXIT_UNSERVED",
    "EXIT_VIOLATIONS",
    "err",
    "fail",
    "out",
    "progress_messages",
]

EXIT_INPUT, EXIT_SOLVER, EXIT_UNSERVED = 2, 3, 4
EXIT_VIOLATIONS = 1  # gpuplan verify: the plan breaks a rule
EXIT_SELF_CHECK = 5  # gpuplan plan: the plan it wrote breaks a rule (a planner bug)
EXIT_CLOUD = 6  # gpuplan provision: the provider could not be read (credentials, network, settings)

err = Console(stderr=True)
#: stdout; a summary line is one line, whatever the terminal's width (greppable)
out = Console(soft_wrap=True)


def fail(error: GpuplanError) -> typer.Exit:
    """Print ``error`` as one line on stderr; the exit to raise: 2 for bad input, 6 for a cloud that could
    not be read or refused (any command that talks to one) or a history source (gpuplan demand's Prometheus)
    that could not be read, 3 for the solver."""
    if isinstance(error, InputError):
        code, kind = EXIT_INPUT, "error"
    elif isinstance(error, ProviderError):
        code, kind = EXIT_CLOUD, "cloud error"
    elif isinstance(error, HistorySourceError):
        code, kind = EXIT_CLOUD, "source error"
    else:
        code, kind = EXIT_SOLVER, "solver error"
    # escaped: a message may hold brackets (``pip install 'gpuplan[aws]'``) that rich would read as markup
    err.print(f"[bold red]{kind}:[/] {escape(str(error))}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def progress_messages(quiet: bool) -> Callable[[str], None]:
    """A ``say(message)`` that prints dimmed progress lines on stderr, or nothing when ``quiet``."""

    def say(message: str) -> None:
        if not quiet:
            err.print(f"[dim]·[/] {message}", highlight=False, soft_wrap=True)

    return say
