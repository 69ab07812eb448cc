"""Reading a file the user named: every way it can fail is an InputError naming the file, never a traceback.

A path the user typed can be missing, a directory, unreadable, too long for the file system, a FIFO or
``/dev/zero``; each reader of user files (catalog, demand series, usage, plan files, YAML) reads through
here, so each of those says the same thing and none reads more than its limit.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from models.errors import InputError
from models.numbers import number_text

__all__ = ["decode_utf8", "read_input_bytes", "size_text"]


def read_input_bytes(
    path: Path,
    max_bytes: int,
    *,
    missing: str = "file not found",
    directory: str = "is a directory",
    too_large: Callable[[int], str] | None = None,
) -> bytes:
    """At most ``max_bytes`` bytes of ``path``; a larger file is refused without reading it all.

    ``missing`` and ``directory`` are the messages for those two cases (they name what the file should
    have been); ``too_large(size)`` the message for a file over the limit (default: its size and the limit).
    Any other OSError (permission, a name too long, an I/O error) is "cannot read: <reason>".
    """
    try:
        with path.open("rb") as stream:
            data = stream.read(max_bytes + 1)
            size = os.fstat(stream.fileno()).st_size
    except FileNotFoundError:
        raise InputError(path, None, missing) from None
    except IsADirectoryError:
        raise InputError(path, None, directory) from None
    except PermissionError:
        raise InputError(path, None, "cannot read: permission denied") from None
    except OSError as exc:
        raise InputError(path, None, f"cannot read: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        size = max(size, len(data))
        problem = too_large(size) if too_large else f"{size_text(size)}; at most {size_text(max_bytes)}"
        raise InputError(path, None, problem)
    return data


def decode_utf8(path: Path, data: bytes) -> str:
    """``data`` as UTF-8 text (a byte-order mark dropped: spreadsheets write one), else an InputError."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(path, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def size_text(count: int) -> str:
    """``64 MiB``, ``1.5 MiB``, ``398 bytes``."""
    if count < 2**20:
        return f"{count:,} bytes"
    return f"{number_text(round(count / 2**20, 1))} MiB"
