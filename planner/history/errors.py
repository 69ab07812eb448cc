"""The history layer's own error: a history source that could not be read.

    GpuplanError (models/errors.py)
     └── HistorySourceError   a Prometheus server unreachable, refusing (4xx), failing (5xx after retries)
                              or answering something that is not the HTTP API's JSON

Bad *input* (a mapping or queries file, a query that returns nothing, an OpenCost export or usage CSV that
does not parse) is a :class:`models.errors.InputError`, as everywhere else. The CLI prints either as one
line; a HistorySourceError exits 6, like a cloud that could not be read. The message names the URL
*without* credentials and the query, never a token or password.
"""

from __future__ import annotations

from models.errors import GpuplanError

__all__ = ["HistorySourceError"]


class HistorySourceError(GpuplanError):
    """A history source could not be read: ``url`` (no credentials in it), ``query`` (PromQL or empty)."""

    def __init__(self, url: str, query: str, problem: str) -> None:
        self.url = url
        self.query = query
        self.problem = problem
        shown = " ".join(query.split())
        if len(shown) > 160:
            shown = shown[:157] + "..."
        where = f"{url} (query {shown!r})" if shown else url
        super().__init__(f"{where}: {problem}")
