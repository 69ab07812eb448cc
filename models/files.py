"""Output directories that appear whole or not at all.

Every command that writes a directory (a plan, a what-if, Terraform roots, the daemon's replans) writes
into a staging sibling and swaps it in at the end, so a failed or interrupted run leaves no half-written
directory and never loses the one that was there.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from models.errors import InputError

__all__ = ["atomic_directory"]


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
