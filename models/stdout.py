"""Silencing C libraries that print to the process's stdout (HiGHS prints a banner when created).

Shared by the planner's solver calls and the MIG packing, which both create HiGHS objects; Python's own
``sys.stdout`` redirection cannot catch what C code writes to file descriptor 1.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def quiet_stdout(active: bool = True) -> Iterator[None]:
    """Point file descriptor 1 at /dev/null while the block runs (no-op when ``active`` is False)."""
    if not active:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
