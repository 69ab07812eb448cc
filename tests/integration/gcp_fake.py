"""A small fake of the Compute Engine REST API (v1) for the GCP provider's tests, on 127.0.0.1:0.

It keeps what is posted (instances, resource policies, reservations), answers gets, lists (with a
``field = "value"`` filter), aggregated lists and deletes, creates the instances of a bulkInsert, and
returns operations that are RUNNING when made and DONE once waited or read. It replays an operation for a
repeated ``requestId`` (as Compute Engine does), answers 409 for a name taken and 404 for a name missing,
and refuses the enum strings the client does not check. Faults are queued with :meth:`FakeCompute.fail`
and consumed in order by the first request that matches. Every request is recorded for assertions.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

PREFIX = "/compute/v1/projects/"
ENUMS = {  # field path in a posted body -> the values Compute Engine accepts
    "scheduling.provisioningModel": {"SPOT", "STANDARD"},
    "scheduling.instanceTerminationAction": {"DELETE", "STOP"},
    "scheduling.onHostMaintenance": {"MIGRATE", "TERMINATE"},
    "groupPlacementPolicy.collocation": {"COLLOCATED", "UNSPECIFIED_COLLOCATION"},
    "reservationAffinity.consumeReservationType": {
        "ANY_RESERVATION",
        "NO_RESERVATION",
        "SPECIFIC_RESERVATION",
    },
}
NIC_TYPES = {"GVNIC", "VIRTIO_NET", "MRDMA", "IRDMA", "IDPF"}  # NetworkInterface.nicType
STATUS = {"instances": "RUNNING", "resourcePolicies": "READY", "reservations": "READY"}


@dataclass
class Request:
    method: str
    path: str  # after /compute/v1/projects/<project>/
    query: dict[str, str]
    body: Any
    authorization: bool = False  # whether an Authorization header came (anonymous clients send none)


@dataclass
class Fault:
    method: str
    path: re.Pattern[str]
    status: int = 200
    body: Any = None
    operation_error: str | None = None  # accept the request, then end its operation with this error code
    skip: int = 0  # matching requests let through before this fault applies


@dataclass
class FakeCompute:
    project: str = "test-project"
    url: str = ""  # set by FakeServer
    store: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # "zones/z/instances" -> name
    requests: list[Request] = field(default_factory=list)
    faults: deque[Fault] = field(default_factory=deque)
    operations: dict[str, dict[str, Any]] = field(default_factory=dict)
    by_request_id: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    serial: int = 0

    # --- test helpers --------------------------------------------------------------------------------

    def fail(
        self,
        method: str,
        path: str,
        status: int = 200,
        body: Any = None,
        *,
        op_error: str | None = None,
        skip: int = 0,
    ) -> None:
        """Queue a fault for the next request whose method and path (regex, searched) match, after letting
        ``skip`` of them through."""
        self.faults.append(Fault(method, re.compile(path), status, body, op_error, skip))

    def throttle(self, method: str, path: str, times: int = 1) -> None:
        for _ in range(times):
            self.fail(method, path, 429, error(429, "Rate Limit Exceeded", "rateLimitExceeded"))

    def put(self, collection: str, body: dict[str, Any]) -> dict[str, Any]:
        """Store a resource directly (a machine type, someone else's policy, a preempted instance)."""
        with self.lock:
            return self._create(collection, copy.deepcopy(body))

    def sent(self, method: str, path: str) -> list[Request]:
        return [r for r in self.requests if r.method == method and re.search(path, r.path)]

    def preempt(self, zone: str, instance: str, at: str = "2026-12-01T10:00:00.000-08:00") -> None:
        """GCP's record of a spot preemption: a DONE compute.instances.preempted operation."""
        with self.lock:
            op = self._operation(f"zones/{zone}", f"zones/{zone}/instances/{instance}", None)
            op.update(status="DONE", operationType="compute.instances.preempted", insertTime=at)

    # --- the API ---------------------------------------------------------------------------------------

    def handle(self, method: str, url: str, body: Any, authorization: bool = False) -> tuple[int, Any]:
        parts = urlsplit(url)
        if not parts.path.startswith(PREFIX + self.project + "/"):
            return 404, error(404, f"unknown path {parts.path}")
        path = parts.path[len(PREFIX + self.project) + 1 :]
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        with self.lock:
            self.requests.append(Request(method, path, query, copy.deepcopy(body), authorization))
            fault = None
            for f in self.faults:
                if f.method == method and f.path.search(path):
                    if f.skip == 0:
                        fault = f
                        break
                    f.skip -= 1
            if fault is not None:
                self.faults.remove(fault)
                if fault.operation_error is None:
                    return fault.status, fault.body
            segs = path.split("/")
            if segs[0] == "aggregated":
                return 200, self._aggregated(segs[1], query.get("filter"))
            scope, rest = "/".join(segs[:2]), segs[2:]
            collection = f"{scope}/{rest[0]}"
            if rest[0] == "operations":
                return self._op_call(method, collection, rest)
            if method == "GET" and len(rest) == 1:
                return 200, {
                    "items": self._filtered(self.store.get(collection, {}).values(), query.get("filter"))
                }
            if method in ("GET", "DELETE") and len(rest) == 2:
                item = self.store.get(collection, {}).get(rest[1])
                if item is None:
                    return 404, error(404, f"The resource '{collection}/{rest[1]}' was not found", "notFound")
                if method == "GET":
                    return 200, item
                del self.store[collection][rest[1]]
                return 200, self._operation(scope, f"{collection}/{rest[1]}", None, "delete")
            if method == "POST":
                replay = self.by_request_id.get(query.get("requestId", ""))
                if replay is not None:
                    return 200, self.operations[replay]
                bodies = self._bulk(scope, body) if rest[-1] == "bulkInsert" else [body]
                problem = self._check(
                    collection if rest[-1] != "bulkInsert" else f"{scope}/instances", bodies
                )
                if problem is not None:
                    return problem
                target = f"{scope}/instances" if rest[-1] == "bulkInsert" else collection
                error_code = fault.operation_error if fault is not None else None
                if error_code is None:
                    for b in bodies:
                        self._create(target, b)
                op = self._operation(scope, f"{target}/{bodies[0]['name']}", error_code, "insert")
                if "requestId" in query:
                    self.by_request_id[query["requestId"]] = op["name"]
                return 200, op
        return 400, error(400, f"the fake does not know {method} {path}")

    # --- internals -------------------------------------------------------------------------------------

    def _url(self, path: str) -> str:
        return f"https://compute.googleapis.com{PREFIX}{self.project}/{path}"

    def _create(self, collection: str, body: dict[str, Any]) -> dict[str, Any]:
        self.serial += 1
        scope_key, scope_name, kind = collection.split("/")
        body.setdefault("id", str(1000 + self.serial))
        body.setdefault("status", STATUS.get(kind, "READY"))
        body.setdefault("creationTimestamp", "2026-12-01T09:00:00.000-08:00")
        body["selfLink"] = self._url(f"{collection}/{body['name']}")
        body[scope_key[:-1]] = self._url(f"{scope_key}/{scope_name}")
        self.store.setdefault(collection, {})[body["name"]] = body
        return body

    def _bulk(self, scope: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The instances a bulkInsert makes: names from perInstanceProperties or namePattern."""
        count = int(body.get("count", 0))
        names = list(body.get("perInstanceProperties", {}))
        if not names and "namePattern" in body:
            pattern = body["namePattern"]
            width = pattern.count("#")
            names = [pattern.replace("#" * width, str(i + 1).zfill(width)) for i in range(count)]
        props = body.get("instanceProperties", {})
        region = scope.split("/")[1].rsplit("-", 1)[0]
        made = []
        for name in names[:count]:
            instance = copy.deepcopy(props)
            instance["name"] = name
            instance["machineType"] = self._url(f"{scope}/machineTypes/{props.get('machineType')}")
            instance["resourcePolicies"] = [
                self._url(f"regions/{region}/resourcePolicies/{p}") for p in props.get("resourcePolicies", [])
            ]
            made.append(instance)
        return made

    def _check(self, collection: str, bodies: list[dict[str, Any]]) -> tuple[int, Any] | None:
        """400 for an enum value Compute Engine refuses or a missing policy, 409 for a name taken."""
        if not bodies:
            return 400, error(400, "Invalid value for field 'count': no instances to create", "invalid")
        for b in bodies:
            for path, allowed in ENUMS.items():
                value = dig(b, path)
                if value is not None and value not in allowed:
                    return 400, error(400, f"Invalid value for field '{path}': '{value}'", "invalid")
            for nic in b.get("networkInterfaces", []):
                if nic.get("nicType", "GVNIC") not in NIC_TYPES:
                    return 400, error(
                        400, f"Invalid value for field 'nicType': '{nic['nicType']}'", "invalid"
                    )
            policies = b.get("resourcePolicies", [])  # a list on instances, a map on reservations
            for policy in policies.values() if isinstance(policies, dict) else policies:
                ref = "/".join(policy.split("/")[-4:])
                if ref.split("/")[-1] not in self.store.get("/".join(ref.split("/")[:3]), {}):
                    return 400, error(400, f"The resource policy '{policy}' was not found", "invalid")
            if b["name"] in self.store.get(collection, {}):
                return 409, error(
                    409, f"The resource '{collection}/{b['name']}' already exists", "alreadyExists"
                )
        return None

    def _operation(
        self, scope: str, target: str, error_code: str | None, kind: str = "insert"
    ) -> dict[str, Any]:
        self.serial += 1
        op: dict[str, Any] = {
            "kind": "compute#operation",
            "name": f"operation-{self.serial}",
            "status": "RUNNING",
            "operationType": kind,
            "targetLink": self._url(target),
            "selfLink": self._url(f"{scope}/operations/operation-{self.serial}"),
            "insertTime": "2026-12-01T09:00:00.000-08:00",
            scope.split("/")[0][:-1]: self._url(scope),
        }
        if error_code is not None:
            op["_error"] = error_code
        self.operations[op["name"]] = op
        return op

    def _op_call(self, method: str, collection: str, rest: list[str]) -> tuple[int, Any]:
        if method == "GET" and len(rest) == 1:
            ops = [
                o for o in self.operations.values() if o["selfLink"].startswith(self._url(collection) + "/")
            ]
            return 200, {"items": self._filtered(ops, None)}
        op = self.operations.get(rest[1])
        if op is None:
            return 404, error(404, f"operation {rest[1]} not found", "notFound")
        if op["status"] != "DONE":
            op["status"] = "DONE"
            code = op.pop("_error", None)
            if code is not None:
                op["error"] = {"errors": [{"code": code, "message": f"the fake failed it with {code}"}]}
                op["httpErrorStatusCode"] = 503 if "EXHAUSTED" in code else 403
        return 200, op

    def _aggregated(self, kind: str, flt: str | None) -> dict[str, Any]:
        items: dict[str, Any] = {}
        for collection, resources in self.store.items():
            scope_key, scope_name, k = collection.split("/")
            if k == kind:
                found = self._filtered(resources.values(), flt)
                if found:
                    items[f"{scope_key}/{scope_name}"] = {kind: found}
        return {"items": items}

    def _filtered(self, items: Any, flt: str | None) -> list[dict[str, Any]]:
        if not flt:
            return [copy.deepcopy(i) for i in items]
        m = re.fullmatch(r'\s*([\w.-]+)\s*(?:=|eq)\s*"?([^"]*)"?\s*', flt)
        if m is None:
            raise ValueError(f"the fake cannot read the filter {flt!r}")
        key, value = m.groups()
        return [copy.deepcopy(i) for i in items if dig(i, key) == value]


def dig(body: Any, path: str) -> Any:
    """``body["a"]["b"]`` for ``"a.b"``; label keys keep their dashes (``labels.gpuplan-plan``)."""
    for part in path.split("."):
        if not isinstance(body, dict) or part not in body:
            return None
        body = body[part]
    return body


def error(code: int, message: str, reason: str | None = None) -> dict[str, Any]:
    errors = [{"message": message, "domain": "global", "reason": reason}] if reason else []
    return {"error": {"code": code, "message": message, "errors": errors}}


class FakeServer:
    """:class:`FakeCompute` served over HTTP on 127.0.0.1 (a free port), in a thread."""

    def __init__(self, fake: FakeCompute) -> None:
        self.fake = fake
        handler = type("Handler", (_Handler,), {"fake": fake})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = fake.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self) -> FakeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


class _Handler(BaseHTTPRequestHandler):
    fake: FakeCompute
    protocol_version = "HTTP/1.1"

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        try:
            status, answer = self.fake.handle(self.command, self.path, body, "Authorization" in self.headers)
        except Exception as exc:  # a fake bug: say so instead of hanging the client
            status, answer = 500, error(500, f"fake error: {exc!r}")
        data = json.dumps(
            {k: v for k, v in answer.items() if not k.startswith("_")} if answer else {}
        ).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:
        pass
