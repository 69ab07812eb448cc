"""A stand-in for GCP's price and shape APIs on 127.0.0.1:0: the Cloud Billing Catalog and Compute Engine's
``regions.get`` and ``machineTypes.list``, served from recorded-format fixtures.

- ``GET /v1/services/6F81-5844-456A/skus?pageToken=...`` answers the fixture pages of
  ``tests/fixtures/prices/gcp/billing/skus-page-N.json`` as the API does
  (https://cloud.google.com/billing/docs/reference/rest/v1/services.skus/list): the first page for no token,
  then the page each ``nextPageToken`` names; an unknown token is a 400, an unknown service a 404;
- ``GET /compute/v1/projects/{p}/regions/{r}`` answers ``compute/region-{r}.json`` (its ``zones`` URLs) and
  ``GET /compute/v1/projects/{p}/zones/{z}/machineTypes`` answers ``compute/machine-types-{z}.json``; a
  region or zone without a fixture is a 404, as Compute Engine answers for a name it does not know.

Faults (:meth:`PriceFake.fail`) are queued per path pattern and consumed in order by the first request that
matches: ``fail(r"/skus", 429, times=1)`` throttles one page as the API's quota does (``RESOURCE_EXHAUSTED``),
then the page is served. Errors have Google's JSON error body, so the REST clients raise the real
``google.api_core.exceptions`` classes. Every request is recorded (:attr:`PriceFake.requests`).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "prices" / "gcp"
SERVICE = "6F81-5844-456A"
STATUS = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


@dataclass
class Fault:
    pattern: str
    status: int
    times: int
    message: str


@dataclass
class PriceFake:
    """The fixtures served and the faults queued; ``pages`` may be edited by a test before it fetches."""

    pages: list[dict[str, Any]] = field(default_factory=list)
    regions: dict[str, dict[str, Any]] = field(default_factory=dict)
    machine_types: dict[str, dict[str, Any]] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    requests: list[tuple[str, dict[str, list[str]]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def from_fixtures(cls, root: Path = FIXTURES) -> PriceFake:
        fake = cls()
        for path in sorted(
            (root / "billing").glob("skus-page-*.json"), key=lambda p: int(p.stem.rsplit("-")[-1])
        ):
            fake.pages.append(json.loads(path.read_text()))
        for path in (root / "compute").glob("region-*.json"):
            body = json.loads(path.read_text())
            fake.regions[body["name"]] = body
        for path in (root / "compute").glob("machine-types-*.json"):
            fake.machine_types[path.stem.removeprefix("machine-types-")] = json.loads(path.read_text())
        return fake

    def fail(self, pattern: str, status: int, *, times: int = 1, message: str = "") -> None:
        """The next ``times`` requests whose path and query (``/v1/...?pageToken=...``) match ``pattern``
        get ``status`` and Google's error body."""
        self.faults.append(Fault(pattern, status, times, message or f"fake {STATUS.get(status, status)}"))

    def edit_skus(self, change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> None:
        """Each SKU of every page replaced by ``change(sku)``; None removes it (a SKU the catalog lacks)."""
        for page in self.pages:
            page["skus"] = [s for s in (change(sku) for sku in page["skus"]) if s is not None]

    def count(self, pattern: str, token: str | None = None) -> int:
        """Requests whose path matches ``pattern`` (and that asked for page ``token``, when given)."""
        return sum(
            1
            for path, query in self.requests
            if re.search(pattern, path) and (token is None or query.get("pageToken", [""])[0] == token)
        )

    # ---- answering -------------------------------------------------------------------------------------

    def answer(self, path: str, raw_query: str) -> tuple[int, dict[str, Any]]:
        query = parse_qs(raw_query)
        with self.lock:
            self.requests.append((path, query))
            for fault in self.faults:
                if fault.times > 0 and re.search(fault.pattern, f"{path}?{raw_query}"):
                    fault.times -= 1
                    return fault.status, error(fault.status, fault.message)
        skus = re.fullmatch(r"/v1/services/([^/]+)/skus", path)
        if skus:
            if skus.group(1) != SERVICE:
                return 404, error(404, f"Service {skus.group(1)} not found.")
            return self._page(query.get("pageToken", [""])[0])
        region = re.fullmatch(r"/compute/v1/projects/[^/]+/regions/([^/]+)", path)
        if region:
            body = self.regions.get(region.group(1))
            return (
                (200, body)
                if body
                else (404, error(404, f"The resource 'regions/{region.group(1)}' was not found"))
            )
        zone = re.fullmatch(r"/compute/v1/projects/[^/]+/zones/([^/]+)/machineTypes", path)
        if zone:
            body = self.machine_types.get(zone.group(1))
            return (
                (200, body)
                if body
                else (404, error(404, f"The resource 'zones/{zone.group(1)}' was not found"))
            )
        return 404, error(404, f"no such path {path}")

    def _page(self, token: str) -> tuple[int, dict[str, Any]]:
        if not token:
            return 200, self.pages[0]
        for previous, page in zip(self.pages, self.pages[1:], strict=False):
            if previous.get("nextPageToken") == token:
                return 200, page
        return 400, error(400, "Invalid page token.")


def error(status: int, message: str) -> dict[str, Any]:
    """Google's JSON error body (https://cloud.google.com/apis/design/errors#http_mapping)."""
    return {"error": {"code": status, "message": message, "status": STATUS.get(status, "UNKNOWN")}}


class _Handler(BaseHTTPRequestHandler):
    fake: PriceFake

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        status, body = self.fake.answer(url.path, url.query)
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serve(fake: PriceFake) -> Iterator[str]:
    """``fake`` on 127.0.0.1 at a free port; yields its ``http://`` address, stops it on exit."""
    handler = type("Handler", (_Handler,), {"fake": fake})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
