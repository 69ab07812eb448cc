"""A local stand-in for AWS's price APIs, for the real boto3 clients pointed at loopback.

One HTTP server on 127.0.0.1 answers the three protocols the price fetcher speaks, as AWS documents them:

- the **Price List Query API** (``awsJson1_1``: ``POST /`` with ``X-Amz-Target:
  AWSPriceListService.GetProducts``; https://docs.aws.amazon.com/aws-cost-management/latest/APIReference/API_pricing_GetProducts.html):
  applies the ``TERM_MATCH`` filters to each item's ``product.attributes`` and answers pages of
  ``PriceList`` items, each a JSON *string*, with an opaque ``NextToken``;
- **Savings Plans** ``DescribeSavingsPlansOfferingRates`` (``restJson``: ``POST
  /DescribeSavingsPlansOfferingRates``): filters ``searchResults`` by plan type and the ``region``,
  ``instanceType``, ``tenancy`` and ``productDescription`` filters, pages with ``nextToken``;
- **EC2** (query protocol, XML; the region is the SigV4 credential scope's): ``DescribeSpotPriceHistory``
  from the fixtures, filtered by type, product description and the time window (plus the price in force at
  ``StartTime``, as EC2 returns it), paged; every other action (``DescribeInstanceTypes``) is forwarded to
  moto's server, which carries EC2's real instance-type data.

Faults: :meth:`AwsPriceFake.throttle` answers a given page of a given call with the API's throttling error
(``ThrottlingException``; EC2's ``RequestLimitExceeded``) a number of times, then serves it;
:meth:`AwsPriceFake.fail_region` answers every call about one region with an error. Every request is
recorded in :attr:`AwsPriceFake.calls` (operation, region, page, HTTP status) so tests can see retries.
Fixtures: ``tests/fixtures/prices/aws/`` (see its README).
"""

from __future__ import annotations

import base64
import json
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Generator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs
from xml.sax.saxutils import escape

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "prices" / "aws"
REGIONS = ("us-east-1", "us-west-2")
EC2_NS = "http://ec2.amazonaws.com/doc/2016-11-15/"
_SCOPE = re.compile(r"Credential=[^/]+/\d{8}/([a-z0-9-]+)/")


@dataclass(frozen=True)
class Call:
    operation: str
    region: str
    page: int
    status: int


@dataclass
class AwsPriceFake:
    """The price APIs' state: fixtures (tests may change them before fetching), page sizes, faults, calls."""

    ec2_upstream: str | None = None
    items: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    rates: list[dict[str, Any]] = field(default_factory=list)
    spot: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: rows per page, per operation (small, so the fixtures span several pages)
    page_size: dict[str, int] = field(
        default_factory=lambda: {
            "GetProducts": 3,
            "DescribeSavingsPlansOfferingRates": 4,
            "DescribeSpotPriceHistory": 5,
        }
    )
    calls: list[Call] = field(default_factory=list)
    requests: list[tuple[str, str, Any]] = field(default_factory=list)  # operation, region, parsed request
    _throttles: dict[tuple[str, str, int], int] = field(default_factory=dict)
    _failing: dict[str, tuple[int, str, str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def from_fixtures(cls, ec2_upstream: str | None = None) -> AwsPriceFake:
        fake = cls(ec2_upstream=ec2_upstream)
        for region in REGIONS:
            fake.items[region] = json.loads((FIXTURES / f"price-list-{region}.json").read_text())["PriceList"]
            history = json.loads((FIXTURES / f"spot-price-history-{region}.json").read_text())
            fake.spot[region] = history["SpotPriceHistory"]
        fake.rates = json.loads((FIXTURES / "savings-plans-rates.json").read_text())["searchResults"]
        return fake

    # ---- faults ----
    def throttle(self, operation: str, region: str, page: int = 1, times: int = 1) -> None:
        """Answer ``operation``'s ``page`` for ``region`` with the throttling error ``times`` times."""
        self._throttles[(operation, region, page)] = times

    def fail_region(
        self, region: str, status: int = 500, code: str = "InternalFailure", message: str = ""
    ) -> None:
        """Answer every call about ``region`` (every API) with ``status``/``code``, every time."""
        self._failing[region] = (status, code, message or f"stand-in: {region} is failing")

    def count(self, operation: str, region: str | None = None, status: int | None = None) -> int:
        return sum(
            1
            for c in self.calls
            if c.operation == operation
            and (region is None or c.region == region)
            and (status is None or c.status == status)
        )

    def pages(self, operation: str, region: str) -> set[int]:
        return {
            c.page for c in self.calls if c.operation == operation and c.region == region and c.status == 200
        }

    # ---- dispatch ----
    def _fault(self, operation: str, region: str, page: int) -> tuple[int, str, str] | None:
        with self._lock:
            if region in self._failing:
                return self._failing[region]
            left = self._throttles.get((operation, region, page), 0)
            if left:
                self._throttles[(operation, region, page)] = left - 1
                if operation.startswith("DescribeSpot") or operation == "DescribeInstanceTypes":
                    return (503, "RequestLimitExceeded", "Request limit exceeded.")
                return (400, "ThrottlingException", "Rate exceeded")
        return None

    def _record(self, operation: str, region: str, page: int, status: int, parsed: Any) -> None:
        with self._lock:
            self.calls.append(Call(operation, region, page, status))
            self.requests.append((operation, region, parsed))

    def get_products(self, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        filters = {f["Field"]: f["Value"] for f in body.get("Filters", []) if f.get("Type") == "TERM_MATCH"}
        region = filters.get("regionCode", "")
        offset = _offset(body.get("NextToken"))
        size = min(self.page_size["GetProducts"], int(body.get("MaxResults") or 100))
        page = offset // size + 1
        headers = {"Content-Type": "application/x-amz-json-1.1"}
        fault = self._fault("GetProducts", region, page)
        if fault:
            self._record("GetProducts", region, page, fault[0], body)
            return fault[0], headers, json.dumps({"__type": fault[1], "message": fault[2]}).encode()
        matching = [
            item
            for item in self.items.get(region, [])
            if all(
                item["product"]["attributes"].get(name, "").lower() == value.lower()
                for name, value in filters.items()
            )
        ]
        chunk = matching[offset : offset + size]
        answer: dict[str, Any] = {"FormatVersion": "aws_v1", "PriceList": [json.dumps(i) for i in chunk]}
        if offset + size < len(matching):
            answer["NextToken"] = _token(offset + size)
        self._record("GetProducts", region, page, 200, body)
        return 200, headers, json.dumps(answer).encode()

    def offering_rates(self, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        filters = {f["name"]: set(f["values"]) for f in body.get("filters", [])}
        region = ",".join(sorted(filters.get("region", set())))
        offset = _offset(body.get("nextToken"))
        size = min(self.page_size["DescribeSavingsPlansOfferingRates"], int(body.get("maxResults") or 1000))
        page = offset // size + 1
        fault = self._fault("DescribeSavingsPlansOfferingRates", region, page)
        if fault:
            self._record("DescribeSavingsPlansOfferingRates", region, page, fault[0], body)
            headers = {"Content-Type": "application/json", "x-amzn-ErrorType": f"{fault[1]}:http://internal/"}
            return fault[0], headers, json.dumps({"message": fault[2]}).encode()
        plan_types = set(body.get("savingsPlanTypes") or ["Compute", "EC2Instance"])

        def keep(row: dict[str, Any]) -> bool:
            if row["savingsPlanOffering"]["planType"] not in plan_types:
                return False
            properties = {p["name"]: p["value"] for p in row["properties"]}
            return all(properties.get(name) in values for name, values in filters.items())

        matching = [row for row in self.rates if keep(row)]
        answer: dict[str, Any] = {"searchResults": matching[offset : offset + size]}
        if offset + size < len(matching):
            answer["nextToken"] = _token(offset + size)
        self._record("DescribeSavingsPlansOfferingRates", region, page, 200, body)
        return 200, {"Content-Type": "application/json"}, json.dumps(answer).encode()

    def spot_history(self, region: str, form: dict[str, list[str]]) -> tuple[int, dict[str, str], bytes]:
        types = {v[0] for k, v in form.items() if k.startswith("InstanceType.")}
        products = {v[0] for k, v in form.items() if k.startswith("ProductDescription.")}
        start = _when(form["StartTime"][0]) if "StartTime" in form else None
        end = _when(form["EndTime"][0]) if "EndTime" in form else None
        offset = _offset(form.get("NextToken", [None])[0])
        size = min(self.page_size["DescribeSpotPriceHistory"], int(form.get("MaxResults", ["1000"])[0]))
        page = offset // size + 1
        fault = self._fault("DescribeSpotPriceHistory", region, page)
        if fault:
            self._record("DescribeSpotPriceHistory", region, page, fault[0], form)
            return _ec2_error(*fault)
        rows = [
            r
            for r in self.spot.get(region, [])
            if (not types or r["InstanceType"] in types)
            and (not products or r["ProductDescription"] in products)
            and (end is None or _when(r["Timestamp"]) <= end)
        ]
        if start is not None:  # the rows inside the window, and per series the one in force at its start
            before: dict[tuple[str, str], dict[str, Any]] = {}
            inside = []
            for r in rows:
                if _when(r["Timestamp"]) >= start:
                    inside.append(r)
                else:
                    key = (r["InstanceType"], r["AvailabilityZone"])
                    if key not in before or _when(before[key]["Timestamp"]) < _when(r["Timestamp"]):
                        before[key] = r
            rows = inside + list(before.values())
        rows.sort(key=lambda r: r["Timestamp"], reverse=True)  # EC2 answers newest first
        chunk = rows[offset : offset + size]
        items = "".join(
            "<item>"
            f"<instanceType>{escape(r['InstanceType'])}</instanceType>"
            f"<productDescription>{escape(r['ProductDescription'])}</productDescription>"
            f"<spotPrice>{escape(r['SpotPrice'])}</spotPrice>"
            f"<timestamp>{escape(r['Timestamp'])}</timestamp>"
            f"<availabilityZone>{escape(r['AvailabilityZone'])}</availabilityZone>"
            "</item>"
            for r in chunk
        )
        token = f"<nextToken>{_token(offset + size)}</nextToken>" if offset + size < len(rows) else ""
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<DescribeSpotPriceHistoryResponse xmlns="{EC2_NS}">'
            f"<requestId>6f0b1a4e-stand-in</requestId><spotPriceHistorySet>{items}</spotPriceHistorySet>{token}"
            "</DescribeSpotPriceHistoryResponse>"
        )
        self._record("DescribeSpotPriceHistory", region, page, 200, form)
        return 200, {"Content-Type": "text/xml;charset=UTF-8"}, body.encode()

    def forward_ec2(
        self, action: str, region: str, raw: bytes, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        fault = self._fault(action, region, 1)
        if fault:
            self._record(action, region, 1, fault[0], raw)
            return _ec2_error(*fault)
        if self.ec2_upstream is None:
            return _ec2_error(400, "InvalidAction", f"the stand-in has no upstream for {action}")
        keep = {
            k: v for k, v in headers.items() if k.lower() in ("authorization", "x-amz-date", "content-type")
        }
        request = urllib.request.Request(self.ec2_upstream + "/", data=raw, headers=keep, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                status, body, kind = (
                    answer.status,
                    answer.read(),
                    answer.headers.get("Content-Type", "text/xml"),
                )
        except urllib.error.HTTPError as error:
            status, body, kind = error.code, error.read(), error.headers.get("Content-Type", "text/xml")
        self._record(action, region, 1, status, raw)
        return status, {"Content-Type": kind}, body

    # ---- the server ----
    def serve(self) -> Generator[str, None, None]:
        """Serve on 127.0.0.1 and a free port until the generator is closed; yields the endpoint URL."""
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = (
                True  # headers and body go out in two writes: no 40 ms delayed-ACK stall
            )

            def log_message(self, *_: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                target = self.headers.get("X-Amz-Target", "")
                if target == "AWSPriceListService.GetProducts":
                    status, headers, body = fake.get_products(json.loads(raw or b"{}"))
                elif self.path.startswith("/DescribeSavingsPlansOfferingRates"):
                    status, headers, body = fake.offering_rates(json.loads(raw or b"{}"))
                else:
                    form = parse_qs(raw.decode(), keep_blank_values=True)
                    action = form.get("Action", [""])[0]
                    scope = _SCOPE.search(self.headers.get("Authorization", ""))
                    region = scope.group(1) if scope else ""
                    if action == "DescribeSpotPriceHistory":
                        status, headers, body = fake.spot_history(region, form)
                    else:
                        status, headers, body = fake.forward_ec2(action, region, raw, dict(self.headers))
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("x-amzn-RequestId", "stand-in")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.02}, name="aws-price-fake", daemon=True
        )
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            server.server_close()
            thread.join()


def _ec2_error(status: int, code: str, message: str) -> tuple[int, dict[str, str], bytes]:
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
        f"<Code>{escape(code)}</Code><Message>{escape(message)}</Message>"
        "</Error></Errors><RequestID>stand-in</RequestID></Response>"
    )
    return status, {"Content-Type": "text/xml;charset=UTF-8"}, body.encode()


def _token(offset: int) -> str:
    return base64.b64encode(json.dumps({"offset": offset}).encode()).decode()


def _offset(token: str | None) -> int:
    return int(json.loads(base64.b64decode(token))["offset"]) if token else 0


def _when(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
