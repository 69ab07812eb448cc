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
- Every request is recorded (method, path, query, the Authorization header, x-ms-client-request-id, the JSON
  body).
- The enum strings the client does not check (priority, evictionPolicy) are checked here: a wrong one is a 400
  as ARM would answer.

Behaving as ARM does, configurable per test (issue 35 point 6):

- **Operations take polls**: ``lro_polls`` (or a fault's ``polls``) answers ``{"status": "InProgress"}`` that
  many times before the terminal status, with ``Retry-After: retry_after``; the resource reads
  ``provisioningState`` Creating/Updating/Deleting meanwhile. PUTs answer 201/200 + ``Azure-AsyncOperation``;
  deleteInstances answers 202 + ``Location`` (202 while running, 200 when done), the two styles azure-core's
  ARM poller follows. A DELETE is 202 + ``Azure-AsyncOperation``.
- **Partial scale-out**: a scale set PUT with ``fail_lro(..., vms=k)`` ends Failed with the error;
  ``sku.capacity`` stays what was asked, ``k`` new VMs run and the rest stay in the scale set as VMs in
  provisioningState Failed (``ProvisioningState/failed/<code>``), as Uniform scale sets keep instances that
  could not be allocated.
- **Quotas**: ``usages[location]`` holds the compute usages (``name.value``, ``limit``; ``currentValue`` is
  computed from the VMs the fake holds plus ``base``), served at ``.../locations/{l}/usages``; a scale set PUT
  that would exceed a family quota, ``cores`` or ``lowPriorityCores`` answers 409 ``OperationNotAllowed``
  with Azure's "Operation could not be completed as it results in exceeding approved ... quota" message.
- **Concurrent writers**: every write gives the resource a new ``etag``; a PUT whose ``If-Match`` is stale, or
  with ``If-None-Match: *`` on an existing resource, answers 412 PreconditionFailed. ``before(method, path,
  fn)`` runs ``fn`` once just before a matching request is handled (another writer winning the race); 409
  "conflict with a concurrent request" and OperationPreempted are faults.
- **No request-id dedupe**: ARM keeps no server-side record of ``x-ms-client-request-id`` (it is for
  tracing); a PUT is idempotent by resource name only, so a create after a delete creates again.
- **Evictions**: ``evict(scale_set, instance_id, policy)`` does what Azure does to a spot VM (Delete: the VM
  goes and ``sku.capacity`` drops; Deallocate: ``PowerState/deallocated``) and writes the activity log events
  (``Microsoft.Compute/virtualMachineScaleSets/virtualMachines/evictSpotVM/action``, Started then
  Succeeded) served at ``/subscriptions/{s}/providers/Microsoft.Insights/eventtypes/management/values``
  with its ``$filter`` on eventTimestamp and resourceGroupName.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

LRO_TYPES = {"virtualMachineScaleSets", "capacityReservations"}
PRIORITIES = {"Regular", "Low", "Spot"}
EVICTION_POLICIES = {"Delete", "Deallocate"}
EVICT_VM = "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/evictSpotVM/action"
PRECONDITION = "The condition specified using HTTP conditional header(s) is not met."
CONCURRENT = (
    "The request failed due to conflict with a concurrent request. To resolve it, please refer to "
    "https://aka.ms/activitylog to get more details on the conflicting requests."
)


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
    polls: int | None = None  # InProgress polls of its operation (None: the fake's lro_polls)


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    authorization: str | None
    body: Any
    client_request_id: str | None = None
    if_match: str | None = None
    if_none_match: str | None = None


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
        self.lro_polls = 0  # InProgress answers before an operation's terminal status
        self.retry_after = "0"  # the Retry-After header of async answers (whole seconds)
        self.usages: dict[str, list[dict[str, Any]]] = {}  # location -> usages (limit, base usage)
        self.activity_log: list[dict[str, Any]] = []
        self.hooks: list[tuple[str, str, Callable[[AzureFake], None]]] = []
        self._etag = 0
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

    def before(self, method: str, path: str, fn: Callable[[AzureFake], None]) -> None:
        """Run ``fn(fake)`` once, just before the next request matching ``method`` and ``path`` is handled."""
        self.hooks.append((method, path, fn))

    def set_quota(self, location: str, name: str, limit: int, localized: str = "", base: int = 0) -> None:
        """A compute usage as ARM lists it; ``base`` vCPUs are in use by VMs outside the fake."""
        rows = self.usages.setdefault(location, [])
        rows[:] = [r for r in rows if r["name"]["value"] != name]
        rows.append(
            {
                "unit": "Count",
                "limit": limit,
                "base": base,
                "name": {"value": name, "localizedValue": localized or name},
            }
        )

    def evict(self, scale_set_path: str, instance_id: str, policy: str = "Delete", at: str = "") -> None:
        """A spot eviction of one VM, as Azure does it, with its activity log events."""
        key = scale_set_path.lower()
        vm = self.vms[key][instance_id]
        if policy == "Delete":
            del self.vms[key][instance_id]
            self.resources[key]["sku"]["capacity"] = len(self.vms[key])
        else:
            self.set_vm_power_state(scale_set_path, instance_id, "PowerState/deallocated")
        when = at or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        rg = scale_set_path.split("/resourceGroups/")[1].split("/")[0]
        for status in ("Started", "Succeeded"):
            self.activity_log.append(
                {
                    "authorization": {
                        "action": EVICT_VM,
                        "scope": vm["id"],
                    },
                    "caller": "Microsoft.Compute",
                    "category": {"value": "Administrative", "localizedValue": "Administrative"},
                    "correlationId": str(uuid.uuid4()),
                    "eventDataId": str(uuid.uuid4()),
                    "eventName": {"value": "EndRequest", "localizedValue": "End request"},
                    "eventTimestamp": when,
                    "id": f"{vm['id']}/events/{uuid.uuid4().hex}",
                    "level": "Informational",
                    "operationId": str(uuid.uuid4()),
                    "operationName": {
                        "value": EVICT_VM,
                        "localizedValue": "Evict Spot Virtual Machine Scale Set VM",
                    },
                    "resourceGroupName": rg,
                    "resourceProviderName": {"value": "Microsoft.Compute"},
                    "resourceType": {"value": "Microsoft.Compute/virtualMachineScaleSets/virtualMachines"},
                    "resourceId": vm["id"],
                    "status": {"value": status, "localizedValue": status},
                    "subStatus": {"value": "", "localizedValue": ""},
                    "submissionTimestamp": when,
                    "subscriptionId": scale_set_path.split("/")[2],
                }
            )

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
                Recorded(
                    method,
                    path,
                    query,
                    h.headers.get("Authorization"),
                    copy.deepcopy(body),
                    h.headers.get("x-ms-client-request-id"),
                    h.headers.get("If-Match"),
                    h.headers.get("If-None-Match"),
                )
            )
            for i, (m, pattern, fn) in enumerate(self.hooks):
                if m == method and re.search(pattern, path):
                    del self.hooks[i]
                    fn(self)
                    break
            fault = self._take_fault(method, path)
            if fault is not None and fault.lro_error is None:
                self._send(h, fault.status, fault.body or {}, fault.headers)
                return
            try:
                status, payload, headers = self._route(method, path, query, body, fault, h.headers)
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

    def _operation(
        self, result: dict[str, Any], polls: int | None = None, done: Callable[[], None] | None = None
    ) -> str:
        """A new operation: InProgress for ``polls`` reads, then ``result``; ``done`` runs once at the end."""
        op = uuid.uuid4().hex
        self.operations[op] = {
            "left": self.lro_polls if polls is None else polls,
            "result": result,
            "done": done,
        }
        return op

    def _op_url(self, op: str, kind: str = "operations") -> str:
        return (
            f"{self.base_url}/subscriptions/sub/providers/Microsoft.Compute/locations/{self.location}"
            f"/{kind}/{op}?api-version=2026-04-01"
        )

    def _async(
        self, result: dict[str, Any], polls: int | None = None, done: Callable[[], None] | None = None
    ) -> dict[str, str]:
        op = self._operation(result, polls, done)
        return {"Azure-AsyncOperation": self._op_url(op), "Retry-After": self.retry_after}

    def _poll(self, op: str) -> dict[str, Any] | None:
        """One read of an operation: None while it runs, its result when it has ended."""
        state = self.operations.get(op)
        if state is None:
            return {"status": "Succeeded"}
        if state["left"] > 0:
            state["left"] -= 1
            return None
        if state["done"] is not None:
            state["done"]()
            state["done"] = None
        return dict(state["result"])

    def _route(
        self,
        method: str,
        path: str,
        query: dict[str, list[str]],
        body: Any,
        fault: Fault | None,
        headers: Any,
    ) -> tuple[int, Any, dict[str, str]]:
        if path == "/api/retail/prices":
            return 200, self._prices(query), {}
        m = re.search(r"/providers/Microsoft\.Compute/locations/[^/]+/operations/([0-9a-f]+)$", path)
        if m:
            result = self._poll(m.group(1))
            if result is None:
                return 200, {"status": "InProgress"}, {"Retry-After": self.retry_after}
            return 200, result, {}
        m = re.search(r"/providers/Microsoft\.Compute/locations/[^/]+/operationResults/([0-9a-f]+)$", path)
        if m:  # the Location style: 202 while it runs, then 200 (or the operation's error)
            result = self._poll(m.group(1))
            if result is None:
                return (
                    202,
                    None,
                    {"Location": self._op_url(m.group(1), "operationResults"), "Retry-After": "0"},
                )
            if result.get("status") == "Failed":
                error = result["error"]
                raise _ArmError(400 if error["code"] != "Conflict" else 409, error["code"], error["message"])
            return 200, None, {}
        m = re.search(r"/providers/Microsoft\.Compute/locations/([^/]+)/usages$", path)
        if m:
            return 200, {"value": self._usages(m.group(1))}, {}
        if re.search(r"/providers/Microsoft\.Insights/eventtypes/management/values$", path):
            return 200, {"value": self._activity(query)}, {}
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
            return self._put(path, kind, body, fault, headers)
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
            if "/proximityplacementgroups/" in key:  # not a long-running operation: 200 when it is gone
                self.resources.pop(key)
                return 200, None, {}
            self.resources[key].setdefault("properties", {})["provisioningState"] = "Deleting"

            def gone() -> None:
                self.resources.pop(key, None)
                self.vms.pop(key, None)
                self.next_instance.pop(key, None)  # a new scale set of that name counts from 0 again

            if self.lro_polls == 0:
                gone()
                return 202, None, self._async({"status": "Succeeded"})
            return 202, None, self._async({"status": "Succeeded"}, done=gone)
        raise _ArmError(405, "MethodNotAllowed", f"{method} {path}")

    def _new_etag(self) -> str:
        self._etag += 1
        return f'"{self._etag}"'

    def _put(
        self, path: str, kind: str, body: Any, fault: Fault | None, headers: Any
    ) -> tuple[int, Any, dict[str, str]]:
        key = path.lower()
        if not isinstance(body, dict) or "location" not in body:
            raise _ArmError(400, "InvalidRequestContent", "a resource needs a location")
        existing = self.resources.get(key)
        if_match, if_none = headers.get("If-Match"), headers.get("If-None-Match")
        if (if_match and (existing is None or existing.get("etag") != if_match)) or (
            if_none == "*" and existing is not None
        ):
            raise _ArmError(
                412,
                "PreconditionFailed",
                "The condition specified using HTTP conditional header(s) is not met.",
            )
        if kind == "virtualMachineScaleSets":
            profile = body.get("properties", {}).get("virtualMachineProfile", {})
            if profile.get("priority", "Regular") not in PRIORITIES:
                raise _ArmError(400, "InvalidParameter", f"priority {profile.get('priority')!r}")
            if "evictionPolicy" in profile and profile["evictionPolicy"] not in EVICTION_POLICIES:
                raise _ArmError(400, "InvalidParameter", f"evictionPolicy {profile['evictionPolicy']!r}")
            if existing is not None and existing["properties"].get("provisioningState") in (
                "Creating",
                "Updating",
                "Deleting",
            ):
                raise _ArmError(409, "Conflict", CONCURRENT)
            self._check_quota(path, body)
        existed = existing is not None
        res = copy.deepcopy(body)
        res["id"] = path
        res["name"] = path.rsplit("/", 1)[-1]
        res["etag"] = self._new_etag()
        lro = kind in LRO_TYPES
        failed = fault is not None and fault.lro_error is not None
        final = "Failed" if failed else "Succeeded"
        polls = fault.polls if fault is not None and fault.polls is not None else self.lro_polls
        running = "Updating" if existed else "Creating"
        res.setdefault("properties", {})["provisioningState"] = running if lro and polls else final
        self.resources[key] = res
        new_vms: list[str] = []
        if kind == "virtualMachineScaleSets":
            want = int(res.get("sku", {}).get("capacity", 0))
            vms = self.scale_set_vms(path)
            ok = want if fault is None else min(want, len(vms) + fault.vms)
            new_vms = self._scale(path, res, want)
            made = len(vms) - len(new_vms)
            for i in new_vms:  # those beyond what Azure could allocate stay, Failed
                if made >= ok:
                    self._fail_vm(
                        vms[i], (fault.lro_error or {}).get("code", "AllocationFailed") if fault else ""
                    )
                made += 1
            for i in new_vms:
                if vms[i]["properties"]["provisioningState"] != "Failed":
                    vms[i]["properties"]["provisioningState"] = "Creating" if polls else "Succeeded"
        if lro:
            result: dict[str, Any] = {"status": "Succeeded"}
            if failed:
                result = {"status": "Failed", "error": fault.lro_error}  # type: ignore[union-attr]

            def done() -> None:
                current = self.resources.get(key)
                if current is not None:
                    current["properties"]["provisioningState"] = final
                for i in new_vms:
                    vm = self.scale_set_vms(path).get(i)
                    if vm is not None and vm["properties"]["provisioningState"] == "Creating":
                        vm["properties"]["provisioningState"] = "Succeeded"

            return (200 if existed else 201), copy.deepcopy(res), self._async(result, polls, done)
        return (200 if existed else 201), copy.deepcopy(res), {}

    def _fail_vm(self, vm: dict[str, Any], code: str) -> None:
        vm["properties"]["provisioningState"] = "Failed"
        vm["properties"]["instanceView"]["statuses"] = [
            {
                "code": f"ProvisioningState/failed/{code}",
                "level": "Error",
                "displayStatus": "Provisioning failed",
                "message": "Allocation failed. We do not have sufficient capacity for the requested VM size "
                "in this region.",
            }
        ]

    def _scale(self, path: str, vmss: dict[str, Any], want: int) -> list[str]:
        """Grow or shrink the scale set's VMs to ``want``; the instance ids it added."""
        vms = self.scale_set_vms(path)
        added: list[str] = []
        while len(vms) > want:  # scale-in removes the newest, as the default scale-in policy may
            vms.pop(max(vms, key=int))
        while len(vms) < want:
            n = self.next_instance.get(path.lower(), 0)
            self.next_instance[path.lower()] = n + 1
            added.append(str(n))
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
        return added

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
        self.resources[key]["etag"] = self._new_etag()
        op = self._operation({"status": "Succeeded"})
        return 202, None, {"Location": self._op_url(op, "operationResults"), "Retry-After": self.retry_after}

    # -- quotas and the activity log --------------------------------------------------------------------

    def _vcpus(self, sku: str) -> tuple[int, str | None]:
        for row in self.skus:
            if row.get("name") == sku:
                caps = {c["name"]: c["value"] for c in row.get("capabilities", [])}
                return int(caps.get("vCPUs", 0)), row.get("family")
        m = re.match(r"Standard_[A-Z]+(\d+)", sku)
        return (int(m.group(1)) if m else 0), None

    def _in_use(self, location: str) -> dict[str, int]:
        """vCPUs the fake's VMs use, per usage name (the family, cores, lowPriorityCores)."""
        used: dict[str, int] = {}
        for key, res in self.resources.items():
            if "/virtualmachinescalesets/" not in key or "/" in key.split("/virtualmachinescalesets/")[1]:
                continue
            if res.get("location") != location:
                continue
            vcpus, family = self._vcpus(res["sku"]["name"])
            count = len(self.vms.get(key, {}))
            spot = res["properties"].get("virtualMachineProfile", {}).get("priority") == "Spot"
            for name in ["lowPriorityCores"] if spot else ["cores", *([family] if family else [])]:
                used[name.lower()] = used.get(name.lower(), 0) + vcpus * count
        return used

    def _usages(self, location: str) -> list[dict[str, Any]]:
        used = self._in_use(location)
        return [
            {
                "unit": r["unit"],
                "limit": r["limit"],
                "currentValue": r["base"] + used.get(r["name"]["value"].lower(), 0),
                "name": dict(r["name"]),
            }
            for r in self.usages.get(location, [])
        ]

    def _check_quota(self, path: str, body: dict[str, Any]) -> None:
        location = body["location"]
        rows = {r["name"]["value"].lower(): r for r in self._usages(location)}
        if not rows:
            return
        vcpus, family = self._vcpus(body["sku"]["name"])
        more = (int(body["sku"].get("capacity", 0)) - len(self.vms.get(path.lower(), {}))) * vcpus
        if more <= 0:
            return
        spot = body.get("properties", {}).get("virtualMachineProfile", {}).get("priority") == "Spot"
        names = ["lowPriorityCores"] if spot else [*([family] if family else []), "cores"]
        labels = {"cores": "Total Regional Cores", "lowPriorityCores": "Low Priority Cores"}
        for name in names:
            row = rows.get(name.lower())
            if row is None or row["currentValue"] + more <= row["limit"]:
                continue
            raise _ArmError(
                409,
                "OperationNotAllowed",
                f"Operation could not be completed as it results in exceeding approved "
                f"{labels.get(name, name + ' Cores')} quota. Additional details - Deployment Model: "
                "Resource Manager, "
                f"Location: {location}, Current Limit: {row['limit']}, Current Usage: {row['currentValue']}, "
                f"Additional Required: {more}, (Minimum) New Limit Required: {row['currentValue'] + more}. "
                "Submit a request for Quota increase at https://aka.ms/ProdCoreQuotaIncrease by specifying "
                "parameters listed in the 'Details' section for deployment to succeed.",
            )

    def _activity(self, query: dict[str, list[str]]) -> list[dict[str, Any]]:
        flt = (query.get("$filter") or [""])[0]
        since = re.search(r"eventTimestamp ge '([^']+)'", flt)
        group = re.search(r"resourceGroupName eq '([^']+)'", flt)
        if since is None:  # ARM refuses a listing without a start time
            raise _ArmError(400, "BadRequest", "$filter must name eventTimestamp ge")

        def when(text: str) -> datetime:
            return datetime.fromisoformat(text.replace("Z", "+00:00"))

        return [
            copy.deepcopy(e)
            for e in self.activity_log
            if when(e["eventTimestamp"]) >= when(since.group(1))
            and (group is None or e["resourceGroupName"].lower() == group.group(1).lower())
        ]

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
