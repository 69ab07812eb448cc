"""Errors the user can act on.

    GpuplanError
     ├── InputError        bad scenario / catalog / series input: names file, field path and problem
     └── SolverError       the solver could not produce a plan (not installed, crashed, no incumbent in time)

The CLI turns an InputError into exit code 2 and a one-line message, never a traceback.
"""

from __future__ import annotations

from pathlib import Path


class GpuplanError(Exception):
    """Base of every error gpuplan raises on purpose."""


class InputError(GpuplanError):
    """A problem in something the user gave us.

    ``where`` is the field path inside the file (``inference[0].replicas.peak``) or a row/column
    reference for CSV files (``row 12, column spot_usd_h``).
    """

    def __init__(self, file: str | Path | None, where: str | None, problem: str) -> None:
        self.file = str(file) if file is not None else None
        self.where = where
        self.problem = problem
        super().__init__(self.format())

    def format(self) -> str:
        parts = [p for p in (self.file, self.where) if p]
        prefix = ": ".join(parts)
        return f"{prefix}: {self.problem}" if prefix else self.problem


class SolverError(GpuplanError):
    """The optimization could not produce a usable plan."""
