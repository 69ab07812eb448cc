"""A stand-in for the Azure Retail Prices API on 127.0.0.1, serving the fixtures under
``tests/fixtures/prices/azure/`` as the real API would, for the price fetcher's tests with httpx.

What the real API does, and so does this (https://learn.microsoft.com/rest/api/cost-management/retail-prices/
azure-retail-prices):

- ``GET /api/retail/prices`` with an OData ``$filter``: ``field eq 'v'``, ``field ne 'v'``, ``contains(field,
  'v')``, ``and``, ``or`` and parentheses. Values are compared case-sensitively (api-version
  2023-01-01-preview and later); the filter calls the item's ``type`` ``priceType``. A filter it cannot parse
  is a 400 with an error body.
- Answers ``{"BillingCurrency", "CustomerEntityId", "CustomerEntityType", "Items", "NextPageLink", "Count"}``,
  ``page_size`` items a page (1,000 on the real API; small here so the fixtures span pages), and a
  ``NextPageLink`` that repeats the query with ``$skip``; null on the last page.
- ``savingsPlan`` is only in the items with ``api-version=2023-01-01-preview``, as the docs say.

Faults, for the behaviours the tests need: :class:`Fault` answers a status (429 with ``Retry-After``, 500,
...) or a malformed body to the requests of one region (and page), ``times`` times or always. Every request is
recorded (region, page, query, status).
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "prices" / "azure"
PREVIEW = "2023-01-01-preview"
#: The filter's names that differ from the item's.
FILTER_FIELDS = {"priceType": "type"}


@dataclass
class Fault:
    """The answer to the requests for ``region`` (its ``armRegionName`` in the filter) on ``page`` (1-based;
    None: any page): ``status`` with ``body`` (raw text; an API error body by default) and ``headers``,
    ``times`` times (None: always)."""

    region: str
    status: int = 500
    page: int | None = None
    times: int | None = 1
    body: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Recorded:
    region: str | None
    page: int
    query: dict[str, list[str]]
    status: int


class AzurePriceFake:
    """The server, its items and faults; ``start()`` returns the base URL (the fetcher's endpoint)."""

    def __init__(self, page_size: int = 4) -> None:
        self.page_size = page_size
        self.items: list[dict[str, Any]] = []
        self.faults: list[Fault] = []
        self.requests: list[Recorded] = []
        self.lock = threading.Lock()
        self.base = ""
        self._server: ThreadingHTTPServer | None = None

    def load(self, *regions: str) -> AzurePriceFake:
        """Serve the fixture responses of ``regions`` (every fixture when none is named)."""
        paths = [FIXTURES / f"{r}.json" for r in regions] if regions else sorted(FIXTURES.glob("*.json"))
        for path in paths:
            self.items.extend(json.loads(path.read_text(encoding="utf-8"))["Items"])
        return self

    def start(self) -> str:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, headers, body = fake._answer(self.path)
                data = body.encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # a short poll so stop() returns at once (the default 0.5 s is half a second per test)
        threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True).start()
        self.base = f"http://127.0.0.1:{self._server.server_address[1]}"
        return self.base

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def pages_of(self, region: str) -> list[Recorded]:
        return [r for r in self.requests if r.region == region]

    # -- the API ------------------------------------------------------------------------------------------

    def _answer(self, target: str) -> tuple[int, dict[str, str], str]:
        parts = urlsplit(target)
        query = parse_qs(parts.query, keep_blank_values=True)
        text = (query.get("$filter") or [""])[0]
        skip = int((query.get("$skip") or ["0"])[0])
        region_match = re.search(r"armRegionName eq '([^']*)'", text)
        region = region_match.group(1) if region_match else None
        page = skip // self.page_size + 1
        with self.lock:
            fault = next(
                (
                    f
                    for f in self.faults
                    if f.region == region and (f.page is None or f.page == page) and f.times != 0
                ),
                None,
            )
            if fault is not None and fault.times is not None:
                fault.times -= 1
        status, headers, body = self._page(parts.path, query, text, skip)
        if fault is not None:
            status, headers = fault.status, fault.headers
            body = fault.body if fault.body is not None else _error(fault.status, "injected fault")
        with self.lock:
            self.requests.append(Recorded(region, page, query, status))
        return status, headers, body

    def _page(
        self, path: str, query: dict[str, list[str]], text: str, skip: int
    ) -> tuple[int, dict[str, str], str]:
        if path != "/api/retail/prices":
            return 404, {}, _error(404, f"no such path {path}")
        try:
            keep = _parse(text) if text else (lambda item: True)
        except ValueError as problem:
            return 400, {}, _error(400, f"Invalid OData filter: {problem}")
        version = (query.get("api-version") or [""])[0]
        matched = [copy.deepcopy(i) for i in self.items if keep(i)]
        if version != PREVIEW:
            for item in matched:
                item.pop("savingsPlan", None)
        chunk = matched[skip : skip + self.page_size]
        link = None
        if skip + self.page_size < len(matched):
            again = {k: v[0] for k, v in query.items() if k != "$skip"}
            link = f"{self.base}/api/retail/prices?{urlencode({**again, '$skip': skip + self.page_size})}"
        body = {
            "BillingCurrency": "USD",
            "CustomerEntityId": "Default",
            "CustomerEntityType": "Retail",
            "Items": chunk,
            "NextPageLink": link,
            "Count": len(chunk),
        }
        return 200, {}, json.dumps(body)


def _error(status: int, message: str) -> str:
    return json.dumps({"Error": {"Code": str(status), "Message": message}})


# -- a small OData filter: or > and > (expr) | contains(f, 'v') | f eq 'v' | f ne 'v' -----------------------

_TOKEN = re.compile(r"\s*(?:(\()|(\))|(,)|'((?:[^']|'')*)'|([A-Za-z_][A-Za-z0-9_]*))")
Predicate = Callable[[dict[str, Any]], bool]


def _parse(text: str) -> Predicate:
    tokens: list[tuple[str, str]] = []
    position = 0
    while position < len(text.rstrip()):
        match = _TOKEN.match(text, position)
        if match is None:
            raise ValueError(f"unexpected text at {position}: {text[position : position + 20]!r}")
        position = match.end()
        opened, closed, comma, string, word = match.groups()
        if string is not None:
            tokens.append(("str", string.replace("''", "'")))
        else:
            tokens.append(("sym", opened or closed or comma or word))
    predicate, rest = _or(tokens)
    if rest:
        raise ValueError(f"unexpected {rest[0][1]!r}")
    return predicate


def _or(tokens: list[tuple[str, str]]) -> tuple[Predicate, list[tuple[str, str]]]:
    left, tokens = _and(tokens)
    while tokens and tokens[0] == ("sym", "or"):
        right, tokens = _and(tokens[1:])
        left = (lambda a, b: lambda i: a(i) or b(i))(left, right)
    return left, tokens


def _and(tokens: list[tuple[str, str]]) -> tuple[Predicate, list[tuple[str, str]]]:
    left, tokens = _factor(tokens)
    while tokens and tokens[0] == ("sym", "and"):
        right, tokens = _factor(tokens[1:])
        left = (lambda a, b: lambda i: a(i) and b(i))(left, right)
    return left, tokens


def _factor(tokens: list[tuple[str, str]]) -> tuple[Predicate, list[tuple[str, str]]]:
    if not tokens:
        raise ValueError("the filter ends early")
    if tokens[0] == ("sym", "("):
        inner, rest = _or(tokens[1:])
        if not rest or rest[0] != ("sym", ")"):
            raise ValueError("a '(' is not closed")
        return inner, rest[1:]
    if tokens[0] == ("sym", "contains"):
        shape = [t[0] for t in tokens[1:6]]
        if shape != ["sym", "sym", "sym", "str", "sym"] or tokens[1][1] != "(" or tokens[3][1] != ",":
            raise ValueError("contains takes (field, 'value')")
        if tokens[5][1] != ")":
            raise ValueError("contains takes (field, 'value')")
        name, value = FILTER_FIELDS.get(tokens[2][1], tokens[2][1]), tokens[4][1]
        return (lambda i: value in str(i.get(name, ""))), tokens[6:]
    if len(tokens) >= 3 and tokens[0][0] == "sym" and tokens[1][1] in ("eq", "ne") and tokens[2][0] == "str":
        name, op, value = FILTER_FIELDS.get(tokens[0][1], tokens[0][1]), tokens[1][1], tokens[2][1]
        if op == "eq":
            return (lambda i: str(i.get(name)) == value), tokens[3:]
        return (lambda i: str(i.get(name)) != value), tokens[3:]
    raise ValueError(f"unexpected {tokens[0][1]!r}")
