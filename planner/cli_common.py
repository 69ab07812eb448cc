"""What the two command lines share (``planner/cli.py`` and ``planner/simulate/cli.py``).

Exit codes, the stderr console, one line for a ``GpuplanError`` (never a traceback), progress messages,
and output directories that appear whole or not at all. Both CLIs import from here; neither imports the
other's helpers.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from models.errors import GpuplanError, InputError

__all__ = [
    "EXIT_CLOUD",
    "EXIT_INPUT",
    "EXIT_SELF_CHECK",
    "EXIT_SOLVER",
    "EXIT_UNSERVED",
    "EXIT_VIOLATIONS",
    "atomic_directory",
    "err",
    "fail",
    "progress_messages",
]

EXIT_INPUT, EXIT_SOLVER, EXIT_UNSERVED = 2, 3, 4
EXIT_VIOLATIONS = 1  # gpuplan verify: the plan breaks a rule
EXIT_SELF_CHECK = 5  # gpuplan plan: the plan it wrote breaks a rule (a planner bug)
EXIT_CLOUD = 6  # gpuplan provision: the provider could not be read (credentials, network, settings)

err = Console(stderr=True)


def fail(error: GpuplanError) -> typer.Exit:
    """Print ``error`` as one line on stderr; the exit to raise: 2 for bad input, 3 for the solver."""
    code = EXIT_INPUT if isinstance(error, InputError) else EXIT_SOLVER
    kind = "error" if isinstance(error, InputError) else "solver error"
    # escaped: a message may hold brackets (``pip install 'gpuplan[aws]'``) that rich would read as markup
    err.print(f"[bold red]{kind}:[/] {escape(str(error))}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


@contextmanager
def atomic_directory(target: Path) -> Iterator[Path]:
    """Write into a temporary sibling and swap it in at the end: a failed run leaves no half-written plan.

    The directory's mode follows the umask, as ``mkdir`` would make it (0755 under umask 022), so the
    user's group (a teammate, a web server) can read the plan; the files written inside follow it too.
    """
    if target.exists() and not target.is_dir():
        raise InputError(target, None, "exists and is not a directory")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = _staging_directory(target)
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    backup = None
    if target.exists():
        backup = target.with_name(f".{target.name}.old-{os.getpid()}")
        target.rename(backup)
    staging.rename(target)
    if backup is not None:
        shutil.rmtree(backup, ignore_errors=True)


def _staging_directory(target: Path) -> Path:
    """A new empty sibling ``.NAME.tmp-XXXXXXXX`` of ``target``, made by a plain mkdir.

    Not ``tempfile.mkdtemp``: its 0700 would become the plan directory's mode at the rename. A mkdir
    takes the umask as it stands, without ``os.umask`` (setting it to read it is racy with threads).
    """
    for _ in range(100):
        staging = target.parent / f".{target.name}.tmp-{secrets.token_hex(4)}"
        try:
            staging.mkdir()
        except FileExistsError:
            continue
        return staging
    raise FileExistsError(f"no free staging name next to {target}")


def progress_messages(quiet: bool) -> Callable[[str], None]:
    """A ``say(message)`` that prints dimmed progress lines on stderr, or nothing when ``quiet``."""

    def say(message: str) -> None:
        if not quiet:
            err.print(f"[dim]·[/] {message}", highlight=False, soft_wrap=True)

    return say
