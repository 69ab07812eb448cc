"""A small client of the Prometheus HTTP API's range queries (``GET /api/v1/query_range``), on httpx.

Why our own and not a client library: the one call needed is a GET with four parameters, and what matters
is around it: credentials from the environment that never reach a log or a message (httpx logs every request's
URL, so credentials written into the URL are moved into an Auth first), windows cut into
chunks (a range query answers at most 11,000 points per series: Prometheus ``web/api/v1/api.go``,
"exceeded maximum resolution of 11,000 points per timeseries"), retries on 5xx and 429 with backoff, and
one typed error that names the server and the query. Self-hosted Prometheus, Google Managed Prometheus
and Amazon Managed Prometheus serve the same API (https://prometheus.io/docs/prometheus/latest/querying/api/).

Credentials (environment, never arguments, so they stay out of shell history and ``ps``):
``GPUPLAN_PROMETHEUS_TOKEN`` (sent as ``Authorization: Bearer``), or ``GPUPLAN_PROMETHEUS_USER`` with
``GPUPLAN_PROMETHEUS_PASSWORD`` (HTTP basic). Credentials inside the URL (``https://u:p@host``) are used
but stripped from every message.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

import httpx

from models.errors import InputError
from planner.history.errors import HistorySourceError

__all__ = [
    "ENV_PASSWORD",
    "ENV_TOKEN",
    "ENV_USER",
    "MAX_POINTS",
    "PrometheusClient",
    "RangeSeries",
    "auth_from_env",
    "public_url",
]

ENV_TOKEN: Final = "GPUPLAN_PROMETHEUS_TOKEN"
ENV_USER: Final = "GPUPLAN_PROMETHEUS_USER"
ENV_PASSWORD: Final = "GPUPLAN_PROMETHEUS_PASSWORD"
#: Prometheus refuses a range query of more than 11,000 points per series.
MAX_POINTS: Final = 11_000
_RETRY_STATUS: Final = frozenset({429, 500, 502, 503, 504})


class _Bearer(httpx.Auth):
    """``Authorization: Bearer <token>``; a class (not a header dict) so the token is never in a repr."""

    def __init__(self, token: str) -> None:
        self._token = token

    def auth_flow(self, request: httpx.Request) -> Any:
        request.headers["Authorization"] = f"Bearer {self._token}"
        yield request

    def __repr__(self) -> str:
        return "_Bearer(***)"


def auth_from_env(env: Mapping[str, str] | None = None) -> httpx.Auth | None:
    """The credentials the environment gives (module docstring), or None; InputError naming the variable
    when they are half given or given both ways. Never echoes a value."""
    env = os.environ if env is None else env
    token = env.get(ENV_TOKEN, "")
    user, password = env.get(ENV_USER, ""), env.get(ENV_PASSWORD, "")
    if token and (user or password):
        raise InputError(None, ENV_TOKEN, f"give a bearer token or {ENV_USER}/{ENV_PASSWORD}, not both")
    if token:
        return _Bearer(token)
    if user and not password:
        raise InputError(None, ENV_PASSWORD, f"{ENV_USER} is set but {ENV_PASSWORD} is empty")
    if password and not user:
        raise InputError(None, ENV_USER, f"{ENV_PASSWORD} is set but {ENV_USER} is empty")
    return httpx.BasicAuth(user, password) if user else None


def public_url(url: str) -> str:
    """``url`` without user or password, for messages and provenance."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return "<an unparsable URL>"
    return str(parsed.copy_with(userinfo=b"")) if parsed.userinfo else str(parsed)


@dataclass
class RangeSeries:
    """One series of a range query: its labels and its samples (unix seconds, value) in time order.
    Values are floats as Prometheus writes them ("NaN" and "+Inf" included: the series layer decides)."""

    labels: dict[str, str]
    samples: list[tuple[float, float]] = field(default_factory=list)


@dataclass
class PrometheusClient:
    """Range queries against one Prometheus server (``url``: the base, e.g. ``http://prom:9090`` or a
    managed service's ``.../api/prom``-style prefix; ``/api/v1/query_range`` is appended).

    ``retries`` extra attempts on a 5xx, a 429 or a transport error, waiting ``backoff`` x 2^attempt
    seconds (a 429's ``Retry-After`` if longer, at most 30 s); tests pass a tiny backoff. ``transport``:
    an httpx transport, for tests; ``max_points``: the chunk size in steps."""

    url: str
    auth: httpx.Auth | None = None
    timeout: float = 60.0
    retries: int = 3
    backoff: float = 1.0
    max_points: int = MAX_POINTS
    transport: httpx.BaseTransport | None = None
    progress: Callable[[str], None] | None = None
    requests: int = 0  # how many HTTP requests were sent (a figure for the report and the tests)
    shown: str = field(init=False, default="")  # the URL without credentials: for messages and provenance
    _endpoint: str = field(init=False, default="", repr=False)

    def __post_init__(self) -> None:
        try:
            parsed = httpx.URL(self.url)
        except (httpx.InvalidURL, TypeError):
            raise InputError(None, "--prometheus", "not a URL (http://host:9090)") from None
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise InputError(None, "--prometheus", f"{public_url(self.url)!r} is not an http(s) URL")
        if not 1 <= self.max_points <= MAX_POINTS:
            raise ValueError(f"max_points must be 1 to {MAX_POINTS}")
        if parsed.userinfo and self.auth is None:
            # httpx logs each request's URL: credentials move from the URL into an Auth, never logged
            self.auth = httpx.BasicAuth(parsed.username, parsed.password)
        self.shown = public_url(self.url)
        self._endpoint = self.shown.rstrip("/") + "/api/v1/query_range"

    def query_range(self, query: str, start: datetime, end: datetime, step: timedelta) -> list[RangeSeries]:
        """Every series ``query`` gives from ``start`` to ``end`` (both included, as Prometheus does) at
        ``step``, read in chunks of at most ``max_points`` steps and joined per label set."""
        seconds = step.total_seconds()
        if seconds <= 0:
            raise ValueError("step must be positive")
        first, last = start.timestamp(), end.timestamp()
        steps = math.floor((last - first) / seconds) + 1
        chunks = math.ceil(steps / self.max_points)
        joined: dict[tuple[tuple[str, str], ...], RangeSeries] = {}
        with httpx.Client(auth=self.auth, timeout=self.timeout, transport=self.transport) as client:
            for index in range(chunks):
                chunk_start = first + index * self.max_points * seconds
                chunk_end = min(last, chunk_start + (self.max_points - 1) * seconds)
                if chunks > 1 and self.progress is not None:
                    self.progress(f"{query[:60]}: chunk {index + 1} of {chunks}")
                params = {
                    "query": query,
                    "start": _number(chunk_start),
                    "end": _number(chunk_end),
                    "step": _number(seconds),
                }
                for item in self._matrix(client, query, params):
                    key = tuple(sorted(item.labels.items()))
                    series = joined.setdefault(key, RangeSeries(item.labels))
                    series.samples.extend(item.samples)
        return list(joined.values())

    def _matrix(self, client: httpx.Client, query: str, params: dict[str, str]) -> list[RangeSeries]:
        body = self._get(client, query, params)
        data = body.get("data")
        if not isinstance(data, dict) or data.get("resultType") != "matrix":
            raise HistorySourceError(self.shown, query, "expected a matrix result from /api/v1/query_range")
        result = data.get("result")
        if not isinstance(result, list):
            raise HistorySourceError(self.shown, query, "the answer's data.result is not a list")
        series = []
        try:
            for item in result:
                labels = {str(k): str(v) for k, v in item["metric"].items()}
                samples = [(float(t), float(v)) for t, v in item["values"]]
                series.append(RangeSeries(labels, samples))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise HistorySourceError(
                self.shown, query, "the answer is not the HTTP API's matrix (metric, values)"
            ) from None
        return series

    def _get(self, client: httpx.Client, query: str, params: dict[str, str]) -> dict[str, Any]:
        """One GET, retried on 5xx/429/transport errors; the parsed JSON body of a success."""
        attempt = 0
        while True:
            self.requests += 1
            try:
                response = client.get(self._endpoint, params=params)
            except httpx.TransportError as exc:
                if attempt < self.retries:
                    self._wait(attempt, None)
                    attempt += 1
                    continue
                raise HistorySourceError(
                    self.shown, query, f"unreachable ({type(exc).__name__}); check the URL and the network"
                ) from None
            if response.status_code in _RETRY_STATUS and attempt < self.retries:
                self._wait(attempt, response.headers.get("Retry-After"))
                attempt += 1
                continue
            return self._body(response, query)

    def _wait(self, attempt: int, retry_after: str | None) -> None:
        delay = self.backoff * 2**attempt
        if retry_after is not None:
            with contextlib.suppress(ValueError):  # an HTTP date: the backoff is used
                delay = max(delay, float(retry_after))
        time.sleep(min(delay, 30.0))

    def _body(self, response: httpx.Response, query: str) -> dict[str, Any]:
        status = response.status_code
        try:
            body = response.json()
        except ValueError:
            body = None
        said = ""
        if isinstance(body, dict) and isinstance(body.get("error"), str):
            kind = body.get("errorType")
            said = f"{kind}: {body['error']}" if isinstance(kind, str) else body["error"]
            said = " ".join(said.split())[:300]
        if status in (401, 403):
            raise HistorySourceError(
                self.shown,
                query,
                f"HTTP {status}: not authorized; set {ENV_TOKEN} or {ENV_USER}/{ENV_PASSWORD}",
            )
        if 400 <= status < 500:
            raise HistorySourceError(self.shown, query, f"HTTP {status}: {said or 'refused'}")
        if status >= 500:
            hint = said or "the server failed"
            raise HistorySourceError(self.shown, query, f"HTTP {status} after retries: {hint}")
        if not isinstance(body, dict):
            raise HistorySourceError(
                self.shown, query, f"HTTP {status} but not JSON: is this a Prometheus API base URL?"
            )
        if body.get("status") != "success":
            raise HistorySourceError(self.shown, query, f"status {body.get('status')!r}: {said or 'failed'}")
        return body


def _number(value: float) -> str:
    """Seconds as the API takes them: an integer when whole (no float noise in the URL)."""
    return str(int(value)) if float(value).is_integer() else repr(value)
