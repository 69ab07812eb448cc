"""Errors the user can act on: the root of every error gpuplan raises on purpose, and the domain's own.

    GpuplanError
     ├── InputError        bad scenario / catalog / series / plan input: names file, field path and problem
     ├── SolverError       the solver could not produce a plan (not installed, crashed, no incumbent in time)
     ├── ProviderError     a cloud call that did not do what it says; its tree: providers/errors.py
     ├── CycleFailed, StoreUnavailable, NameTaken: the daemon's and portal's, planner/operations/errors.py
     └── HistorySourceError  a Prometheus server gpuplan demand could not read: planner/history/errors.py

One module per layer boundary holds that layer's errors, and no two error classes share a name
(tests/unit/test_layers.py checks it). Exceptions that never leave their module (a search that gives up,
a YAML loader's refusal) stay private there. The CLI turns an InputError into exit code 2 and a one-line
message, a SolverError into 3, a ProviderError or HistorySourceError into 6, never a traceback.
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
