"""A small fake of the ARM Compute REST API (and the Retail Prices API) on 127.0.0.1, for the Azure adapter's
tests with the real azure-mgmt-compute client pointed at it.

What it does, and why:

- PUT stores a deep copy of the body under its path (adding ``id``, ``name``, ``provisioningState``) and
  answers 201 with ``Azure-AsyncOperation`` + ``Retry-After: 0`` for the resources ARM creates as long-running
  operations (scale sets, capacity reservations), 200 for the synchronous ones (proximity placement groups,
  capacity reservation groups); GET reads one resource, GET on a collection lists it (``value``, no
  ``nextLink``); DELETE answers 202 with an async operation; POST ``.../delete`` on a scale set is
  deleteInstances.
- A scale set's VMs follow its ``sku.capacity``: instance ids count 0, 1, 2, ... and never reuse an id after a
  delete, as Azure's do.
- Faults are a queue of :class:`Fault` (method, path regex, status, body) consumed in order by the first
  request that matches; a fault with ``lro_error`` lets the request through but ends its async operation
  ``Failed``.
- Every request is recorded (method, path, query, the Authorization header, the JSON body).
- The enum strings the client does not check (priority, evictionPolicy) are checked here: a wrong one is a 400
  as ARM would answer.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

LRO_TYPES = {"virtualMachineScaleSets", "capacityReservations"}
PRIORITIES = {"Regular", "Low", "Spot"}
EVICTION_POLICIES = {"Delete", "Deallocate"}


@dataclass
class Fault:
    """One injected answer: the first request matching ``method`` and ``path`` (a regex searched in the URL
    path) gets ``status`` with ``body`` (an ARM error body by default), or, with ``lro_error``, is applied but
    its async operation ends ``Failed`` with that error; ``vms`` is then how many of the scale set's new VMs
    were made before the failure."""

    method: str
    path: str
    status: int = 0
    body: dict[str, Any] | None = None
    lro_error: dict[str, Any] | None = None
    vms: int = 0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    authorization: str | None
    body: Any


class AzureFake:
    """The server and its state; ``start()`` returns the base URL."""

    def __init__(self, location: str = "eastus") -> None:
        self.location = location
        self.resources: dict[str, dict[str, Any]] = {}  # lower-case path -> resource JSON
        self.vms: dict[str, dict[str, dict[str, Any]]] = {}  # scale set path -> instance id -> VM JSON
        self.next_instance: dict[str, int] = {}
        self.operations: dict[str, dict[str, Any]] = {}
        self.faults: list[Fault] = []
        self.requests: list[Recorded] = []
        self.skus: list[dict[str, Any]] = []
        self.prices: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------------------

    def start(self) -> str:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fake._handle(self, "GET")

            def do_PUT(self) -> None:
                fake._handle(self, "PUT")

            def do_POST(self) -> None:
                fake._handle(self, "POST")

            def do_DELETE(self) -> None:
                fake._handle(self, "DELETE")

            def do_PATCH(self) -> None:
                fake._handle(self, "PATCH")

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self.base_url

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # -- helpers for tests ------------------------------------------------------------------------------

    def fail(self, method: str, path: str, status: int, code: str, message: str = "") -> None:
        """Queue an ARM error answer for the next matching request."""
        self.faults.append(Fault(method, path, status, {"error": {"code": code, "message": message or code}}))

    def fail_lro(self, method: str, path: str, code: str, vms: int = 0, message: str = "") -> None:
        """Queue a long-running operation that ends Failed with ``code``."""
        self.faults.append(Fault(method, path, lro_error={"code": code, "message": message or code}, vms=vms))

    def sent(self, method: str, pattern: str = "") -> list[Recorded]:
        return [r for r in self.requests if r.method == method and re.search(pattern, r.path)]

    def put_resource(self, path: str, body: dict[str, Any]) -> None:
        """Seed a resource as if someone else had made it."""
        res = copy.deepcopy(body)
        res.setdefault("id", path)
        res.setdefault("name", path.rsplit("/", 1)[-1])
        res.setdefault("properties", {}).setdefault("provisioningState", "Succeeded")
        self.resources[path.lower()] = res

    def scale_set_vms(self, path: str) -> dict[str, dict[str, Any]]:
        return self.vms.setdefault(path.lower(), {})

    def set_vm_power_state(self, scale_set_path: str, instance_id: str, code: str) -> None:
        """Put a PowerState status (``PowerState/deallocated`` for an evicted Deallocate-policy spot VM) in a
        VM's instance view."""
        vm = self.vms[scale_set_path.lower()][instance_id]
        statuses = vm["properties"]["instanceView"]["statuses"]
        statuses[:] = [s for s in statuses if not s["code"].startswith("PowerState/")]
        statuses.append({"code": code, "level": "Info"})

    # -- request handling -------------------------------------------------------------------------------

    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        url = urlsplit(h.path)
        path, query = url.path, parse_qs(url.query)
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        with self.lock:
            self.requests.append(
                Recorded(method, path, query, h.headers.get("Authorization"), copy.deepcopy(body))
            )
            fault = self._take_fault(method, path)
            if fault is not None and fault.lro_error is None:
                self._send(h, fault.status, fault.body or {}, fault.headers)
                return
            try:
                status, payload, headers = self._route(method, path, query, body, fault)
            except _ArmError as exc:
                status, payload, headers = exc.status, {"error": {"code": exc.code, "message": exc.msg}}, {}
        self._send(h, status, payload, headers)

    def _take_fault(self, method: str, path: str) -> Fault | None:
        for i, f in enumerate(self.faults):
            if f.method == method and re.search(f.path, path):
                return self.faults.pop(i)
        return None

    def _send(self, h: BaseHTTPRequestHandler, status: int, payload: Any, headers: dict[str, str]) -> None:
        data = b"" if payload is None else json.dumps(payload).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        for k, v in headers.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)

    def _async(self, result: dict[str, Any]) -> dict[str, str]:
        op = uuid.uuid4().hex
        self.operations[op] = result
        url = (
            f"{self.base_url}/subscriptions/sub/providers/Microsoft.Compute/locations/{self.location}"
            f"/operations/{op}?api-version=2026-04-01"
        )
        return {"Azure-AsyncOperation": url, "Retry-After": "0"}

    def _route(
        self, method: str, path: str, query: dict[str, list[str]], body: Any, fault: Fault | None
    ) -> tuple[int, Any, dict[str, str]]:
        if path == "/api/retail/prices":
            return 200, self._prices(query), {}
        m = re.search(r"/providers/Microsoft\.Compute/locations/[^/]+/operations/([0-9a-f]+)$", path)
        if m:
            return 200, self.operations.get(m.group(1), {"status": "Succeeded"}), {}
        if re.search(r"/providers/Microsoft\.Compute/skus$", path):
            return 200, {"value": copy.deepcopy(self.skus)}, {}
        m = re.search(r"^(.*/virtualMachineScaleSets/[^/]+)/virtualMachines$", path)
        if m and method == "GET":
            if m.group(1).lower() not in self.resources:
                raise _ArmError(404, "ParentResourceNotFound", f"{m.group(1)} not found")
            return 200, {"value": [copy.deepcopy(v) for v in self.scale_set_vms(m.group(1)).values()]}, {}
        m = re.search(r"^(.*/virtualMachineScaleSets/[^/]+)/delete$", path)
        if m and method == "POST":
            return self._delete_instances(m.group(1), body)
        key = path.lower()
        parts = path.split("/")
        kind = parts[-2] if len(parts) >= 2 else ""
        if method == "PUT":
            return self._put(path, kind, body, fault)
        if method == "GET":
            if key in self.resources:
                return 200, copy.deepcopy(self.resources[key]), {}
            if parts[-1] in (
                "virtualMachineScaleSets",
                "proximityPlacementGroups",
                "capacityReservationGroups",
                "capacityReservations",
            ):
                prefix = key + "/"
                items = [
                    copy.deepcopy(r)
                    for k, r in self.resources.items()
                    if k.startswith(prefix) and "/" not in k[len(prefix) :]
                ]
                return 200, {"value": items}, {}
            raise _ArmError(404, "ResourceNotFound", f"{path} not found")
        if method == "DELETE":
            if key not in self.resources:
                return 204, None, {}
            if any(k.startswith(key + "/") for k in self.resources):
                raise _ArmError(409, "CapacityReservationGroupDeletionNotAllowed", "it still holds resources")
            del self.resources[key]
            self.vms.pop(key, None)
            self.next_instance.pop(key, None)  # a new scale set of that name counts from 0 again
            return 202, None, self._async({"status": "Succeeded"})
        raise _ArmError(405, "MethodNotAllowed", f"{method} {path}")

    def _put(self, path: str, kind: str, body: Any, fault: Fault | None) -> tuple[int, Any, dict[str, str]]:
        key = path.lower()
        if not isinstance(body, dict) or "location" not in body:
            raise _ArmError(400, "InvalidRequestContent", "a resource needs a location")
        if kind == "virtualMachineScaleSets":
            profile = body.get("properties", {}).get("virtualMachineProfile", {})
            if profile.get("priority", "Regular") not in PRIORITIES:
                raise _ArmError(400, "InvalidParameter", f"priority {profile.get('priority')!r}")
            if "evictionPolicy" in profile and profile["evictionPolicy"] not in EVICTION_POLICIES:
                raise _ArmError(400, "InvalidParameter", f"evictionPolicy {profile['evictionPolicy']!r}")
        existed = key in self.resources
        res = copy.deepcopy(body)
        res["id"] = path
        res["name"] = path.rsplit("/", 1)[-1]
        res.setdefault("properties", {})["provisioningState"] = "Succeeded" if fault is None else "Failed"
        self.resources[key] = res
        if kind == "virtualMachineScaleSets":
            want = int(res.get("sku", {}).get("capacity", 0))
            vms = self.scale_set_vms(path)
            if fault is not None:
                want = min(want, len(vms) + fault.vms)
            self._scale(path, res, want)
        if kind in LRO_TYPES:
            result: dict[str, Any] = {"status": "Succeeded"}
            if fault is not None and fault.lro_error is not None:
                result = {"status": "Failed", "error": fault.lro_error}
            return (200 if existed else 201), copy.deepcopy(res), self._async(result)
        return (200 if existed else 201), copy.deepcopy(res), {}

    def _scale(self, path: str, vmss: dict[str, Any], want: int) -> None:
        vms = self.scale_set_vms(path)
        while len(vms) > want:  # scale-in removes the newest, as the default scale-in policy may
            vms.pop(max(vms, key=int))
        while len(vms) < want:
            n = self.next_instance.get(path.lower(), 0)
            self.next_instance[path.lower()] = n + 1
            vms[str(n)] = {
                "id": f"{path}/virtualMachines/{n}",
                "name": f"{vmss['name']}_{n}",
                "instanceId": str(n),
                "location": vmss["location"],
                "sku": copy.deepcopy(vmss.get("sku")),
                "properties": {
                    "provisioningState": "Succeeded",
                    "latestModelApplied": True,
                    "instanceView": {
                        "statuses": [
                            {"code": "ProvisioningState/succeeded", "level": "Info"},
                            {"code": "PowerState/running", "level": "Info"},
                        ]
                    },
                },
            }

    def _delete_instances(self, path: str, body: Any) -> tuple[int, Any, dict[str, str]]:
        key = path.lower()
        if key not in self.resources:
            raise _ArmError(404, "ResourceNotFound", f"{path} not found")
        ids = (body or {}).get("instanceIds") or []
        vms = self.scale_set_vms(path)
        unknown = [i for i in ids if i not in vms]
        if unknown:
            raise _ArmError(400, "InvalidParameter", f"instance ids not in the scale set: {unknown}")
        for i in ids:
            del vms[i]
        self.resources[key].setdefault("sku", {})["capacity"] = len(vms)
        return 202, None, self._async({"status": "Succeeded"})

    def _prices(self, query: dict[str, list[str]]) -> dict[str, Any]:
        flt = (query.get("$filter") or [""])[0]
        wanted = dict(re.findall(r"(\w+) eq '([^']*)'", flt))
        if "priceType" in wanted:  # the filter says priceType, the items say type
            wanted["type"] = wanted.pop("priceType")
        items = [p for p in self.prices if all(p.get(k) == v for k, v in wanted.items())]
        return {
            "BillingCurrency": "USD",
            "Items": copy.deepcopy(items),
            "NextPageLink": None,
            "Count": len(items),
        }


class _ArmError(Exception):
    def __init__(self, status: int, code: str, msg: str) -> None:
        super().__init__(msg)
        self.status, self.code, self.msg = status, code, msg
