"""A fake of the Compute Engine REST API (v1) for the GCP provider's tests, on 127.0.0.1:0.

It keeps what is posted (instances, resource policies, reservations), answers gets, lists (with a
``field = "value"`` filter), aggregated lists, deletes and ``regions.get`` (with quotas), creates the
instances of a bulkInsert, and behaves as Compute Engine does where the provider must cope:

- operations are RUNNING when made and stay RUNNING for ``op_polls`` reads (GET or ``wait``; a fault can
  set its own count); a ``wait`` that answers RUNNING has blocked for :data:`WAIT_SECONDS` as the real
  one does (it moves :attr:`FakeCompute.clock`). What an operation does shows at once in transitional
  states (PROVISIONING instances, CREATING policies and reservations, STOPPING/DELETING deletes) and
  takes effect when it is DONE;
- a bulkInsert that cannot make ``minCount`` instances makes none: its operation ends DONE with an
  ``error``, and the instances it had made part way (``fail(..., created=k)``) are deleted as it fails,
  or left STOPPING for the caller to see (``rollback_lag``) when the rollback is slower than the report;
- quotas (:attr:`FakeCompute.quotas`, per region and metric) are enforced on instance and reservation
  inserts from the machine types stored in the zone: an insert over a limit ends its operation with
  QUOTA_EXCEEDED and the real error's ``quotaInfo`` details; ``regions.get`` reports limit and usage. A
  reservation takes its ``count`` VMs' quota from its insert, and an instance that consumes it
  (``SPECIFIC_RESERVATION``) takes none of its own; its ``specificReservation.inUseCount`` is the
  instances consuming it that are not TERMINATED;
- a resource whose create is still RUNNING is ``resourceNotReady`` (400) to a delete or to an instance
  that names it; a placement policy still used by instances is ``resourceInUseByAnotherResource``;
- a repeated ``requestId`` replays the first operation only within :attr:`request_id_ttl` (an hour) of
  the first request; after that the request runs again (and meets the name it made: 409);
- a FLEX_START instance (Dynamic Workload Scheduler flex-start) needs ``scheduling.maxRunDuration`` between
  10 minutes and 7 days (the range gcloud states for a flex-start run duration,
  https://cloud.google.com/sdk/gcloud/reference/compute/instance-groups/managed/resize-requests/create)
  and draws on the PREEMPTIBLE_ quota metrics as spot does (flex-start "consumes the preemptible version
  of the GPU quota pool", https://docs.cloud.google.com/managed-spark/docs/guides/dws-serverless);
- a spot preemption (:meth:`FakeCompute.preempt`) is a DONE ``compute.instances.preempted`` system
  operation and the instance's termination action (STOP: TERMINATED with ``lastStopTimestamp``; DELETE:
  STOPPING, then gone).

It refuses the enum strings the client does not check, answers 409 for a name taken and 404 for a name
missing. Faults are queued with :meth:`FakeCompute.fail` and consumed in order by the first request that
matches. Every request is recorded for assertions.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

PREFIX = "/compute/v1/projects/"
ENUMS = {  # field path in a posted body -> the values Compute Engine accepts
    "scheduling.provisioningModel": {"SPOT", "STANDARD", "FLEX_START"},
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
CREATING = {"instances": "PROVISIONING", "resourcePolicies": "CREATING", "reservations": "CREATING"}
DELETING = {"instances": "STOPPING", "resourcePolicies": "DELETING", "reservations": "DELETING"}
#: how long Compute Engine's operations.wait holds a request before it answers RUNNING
WAIT_SECONDS = 120.0
#: accelerator type -> regional GPU quota metric (https://cloud.google.com/compute/resource-usage)
GPU_METRICS = {
    "nvidia-l4": "NVIDIA_L4_GPUS",
    "nvidia-tesla-a100": "NVIDIA_A100_GPUS",
    "nvidia-a100-80gb": "NVIDIA_A100_80GB_GPUS",
    "nvidia-h100-80gb": "NVIDIA_H100_GPUS",
    "nvidia-h100-mega-80gb": "NVIDIA_H100_MEGA_GPUS",
    "nvidia-h200-141gb": "NVIDIA_H200_GPUS",
    "nvidia-b200": "NVIDIA_B200_GPUS",
}
EPOCH = datetime(2026, 12, 1, 17, 0, tzinfo=UTC)  # what the clock's 0 is, for timestamps


@dataclass
class FakeClock:
    """Seconds since :data:`EPOCH`; shared by the fake and a provider under test (``clock=``/``sleep=``)."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)

    def stamp(self, offset: float = 0.0) -> str:
        """RFC 3339 as Compute Engine writes it (milliseconds, a UTC offset)."""
        return (EPOCH + timedelta(seconds=self.now + offset)).isoformat(timespec="milliseconds")


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
    created: int = 0  # a failing bulkInsert: instances it makes before it fails (deleted as it fails)
    rollback_lag: bool = False  # ... still there (STOPPING) when its operation reports the failure
    polls: int | None = None  # reads its operation answers RUNNING (None: FakeCompute.op_polls)


@dataclass
class FakeCompute:
    project: str = "test-project"
    url: str = ""  # set by FakeServer
    store: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # "zones/z/instances" -> name
    requests: list[Request] = field(default_factory=list)
    faults: deque[Fault] = field(default_factory=deque)
    operations: dict[str, dict[str, Any]] = field(default_factory=dict)
    by_request_id: dict[str, tuple[str, float]] = field(default_factory=dict)  # -> (operation, when)
    lock: threading.Lock = field(default_factory=threading.Lock)
    serial: int = 0
    clock: FakeClock = field(default_factory=FakeClock)
    op_polls: int = 0  # reads (GET or wait) an operation answers RUNNING before DONE
    wait_seconds: float = WAIT_SECONDS  # how long a wait that answers RUNNING held the request
    request_id_ttl: float = 3600.0  # how long a requestId is remembered (Google: at least 60 minutes)
    quotas: dict[str, dict[str, float]] = field(default_factory=dict)  # region -> metric -> limit
    quota_usage: dict[str, dict[str, float]] = field(default_factory=dict)  # usage not from instances here

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
        created: int = 0,
        rollback_lag: bool = False,
        polls: int | None = None,
    ) -> None:
        """Queue a fault for the next request whose method and path (regex, searched) match, after letting
        ``skip`` of them through."""
        self.faults.append(
            Fault(method, re.compile(path), status, body, op_error, skip, created, rollback_lag, polls)
        )

    def throttle(self, method: str, path: str, times: int = 1) -> None:
        for _ in range(times):
            self.fail(method, path, 429, error(429, "Rate Limit Exceeded", "rateLimitExceeded"))

    def put(self, collection: str, body: dict[str, Any]) -> dict[str, Any]:
        """Store a resource directly (a machine type, someone else's policy, a preempted instance)."""
        with self.lock:
            return self._create(collection, copy.deepcopy(body))

    def sent(self, method: str, path: str) -> list[Request]:
        return [r for r in self.requests if r.method == method and re.search(path, r.path)]

    def preempt(
        self, zone: str, instance: str, at: str = "2026-12-01T10:00:00.000-08:00", *, over: bool = False
    ) -> dict[str, Any]:
        """A spot preemption as Compute Engine records it: a DONE ``compute.instances.preempted`` system
        operation on the instance, and its termination action: STOP leaves it TERMINATED with
        ``lastStopTimestamp``; DELETE leaves it STOPPING for the 30 s soft-off, then (``over``) gone."""
        with self.lock:
            collection = f"zones/{zone}/instances"
            item = self.store.get(collection, {}).get(instance)
            self.serial += 1
            op: dict[str, Any] = {
                "kind": "compute#operation",
                "id": str(7_000_000 + self.serial),
                "name": f"systemevent-{1764600000000 + self.serial}-{self.serial:08x}-preempted",
                "zone": self._url(f"zones/{zone}"),
                "operationType": "compute.instances.preempted",
                "targetLink": self._url(f"{collection}/{instance}"),
                "targetId": item["id"] if item else str(9_000_000 + self.serial),
                "status": "DONE",
                "statusMessage": "Instance was preempted.",
                "user": "system",
                "progress": 100,
                "insertTime": at,
                "startTime": at,
                "endTime": at,
                "selfLink": self._url(f"zones/{zone}/operations/systemevent-{self.serial}"),
            }
            op["selfLink"] = self._url(f"zones/{zone}/operations/{op['name']}")
            self.operations[op["name"]] = op
            if item is not None:
                action = (
                    dig(item, "scheduling.instanceTerminationAction") or "STOP"
                )  # STOP: the API's default
                if action == "STOP":
                    item.update(status="TERMINATED", lastStopTimestamp=at)
                elif over:
                    del self.store[collection][instance]
                else:
                    item["status"] = "STOPPING"
            return op

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
                if fault.operation_error is None and fault.polls is None:
                    return fault.status, fault.body
            segs = path.split("/")
            if method == "GET":
                self._count_in_use()
            if segs[0] == "aggregated":
                return 200, self._aggregated(segs[1], query.get("filter"))
            if len(segs) == 2 and segs[0] == "regions" and method == "GET":
                return 200, self._region(segs[1])
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
                return self._delete(scope, collection, item, fault)
            if method == "POST":
                return self._insert(scope, collection, rest, query, body, fault)
        return 400, error(400, f"the fake does not know {method} {path}")

    # --- internals -------------------------------------------------------------------------------------

    def _insert(
        self,
        scope: str,
        collection: str,
        rest: list[str],
        query: dict[str, str],
        body: Any,
        fault: Fault | None,
    ) -> tuple[int, Any]:
        replay = self.by_request_id.get(query.get("requestId", ""))
        if replay is not None and self.clock.now - replay[1] < self.request_id_ttl:
            return 200, self.operations[replay[0]]
        bulk = rest[-1] == "bulkInsert"
        bodies = self._bulk(scope, body) if bulk else [body]
        target = f"{scope}/instances" if bulk else collection
        problem = self._check(target, bodies)
        if problem is not None:
            return problem
        kind = target.split("/")[-1]
        error_code = fault.operation_error if fault is not None else None
        details: list[dict[str, Any]] = []
        if error_code is None and kind in ("instances", "reservations"):
            error_code, details = self._over_quota(scope, bodies)
        made: list[dict[str, Any]] = []
        if error_code is None:
            made = [self._create(target, b, CREATING[kind]) for b in bodies]
        elif bulk and fault is not None and fault.created:
            made = [self._create(target, b, CREATING[kind]) for b in bodies[: fault.created]]
        op = self._operation(scope, f"{target}/{bodies[0]['name']}", error_code, "insert", fault, details)
        names = [m["name"] for m in made]
        if error_code is None:
            op["_done"] = [("status", target, n, STATUS.get(kind, "READY")) for n in names]
        elif bulk:  # minCount not met: what it made is deleted as it fails (or later: rollback_lag)
            lag = fault is not None and fault.rollback_lag
            op["_done"] = [("status" if lag else "delete", target, n, "STOPPING") for n in names]
        if "requestId" in query:
            self.by_request_id[query["requestId"]] = (op["name"], self.clock.now)
        return 200, op

    def _delete(
        self, scope: str, collection: str, item: dict[str, Any], fault: Fault | None
    ) -> tuple[int, Any]:
        kind = collection.split("/")[-1]
        if item.get("status") == CREATING.get(kind):
            return 400, error(
                400, f"The resource '{collection}/{item['name']}' is not ready", "resourceNotReady"
            )
        if kind == "resourcePolicies":
            users = [
                i["name"]
                for c, items in self.store.items()
                if c.endswith("/instances")
                for i in items.values()
                if any(p.endswith(f"/resourcePolicies/{item['name']}") for p in i.get("resourcePolicies", []))
            ]
            if users:
                return 400, error(
                    400,
                    f"The resource_policy resource '{collection}/{item['name']}' is already being used by "
                    f"'{users[0]}'",
                    "resourceInUseByAnotherResource",
                )
        item["status"] = DELETING.get(kind, "DELETING")
        op = self._operation(scope, f"{collection}/{item['name']}", None, "delete", fault)
        op["_done"] = [("delete", collection, item["name"], "")]
        return 200, op

    def _url(self, path: str) -> str:
        return f"https://compute.googleapis.com{PREFIX}{self.project}/{path}"

    def _create(self, collection: str, body: dict[str, Any], status: str | None = None) -> dict[str, Any]:
        self.serial += 1
        scope_key, scope_name, kind = collection.split("/")
        body.setdefault("id", str(1000 + self.serial))
        body.setdefault("status", status or STATUS.get(kind, "READY"))
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
        """400 for an enum value Compute Engine refuses or a missing policy, resourceNotReady for a policy
        still being made, 409 for a name taken."""
        if not bodies:
            return 400, error(400, "Invalid value for field 'count': no instances to create", "invalid")
        for b in bodies:
            for path, allowed in ENUMS.items():
                value = dig(b, path)
                if value is not None and value not in allowed:
                    return 400, error(400, f"Invalid value for field '{path}': '{value}'", "invalid")
            if dig(b, "scheduling.provisioningModel") == "FLEX_START":
                seconds = float(dig(b, "scheduling.maxRunDuration.seconds") or 0)
                if not 600 <= seconds <= 7 * 24 * 3600:
                    return 400, error(
                        400, "Invalid value for field 'scheduling.maxRunDuration': a FLEX_START instance "
                        "runs between 10 minutes and 7 days", "invalid",
                    )  # fmt: skip
            for nic in b.get("networkInterfaces", []):
                if nic.get("nicType", "GVNIC") not in NIC_TYPES:
                    return 400, error(
                        400, f"Invalid value for field 'nicType': '{nic['nicType']}'", "invalid"
                    )
            policies = b.get("resourcePolicies", [])  # a list on instances, a map on reservations
            for policy in policies.values() if isinstance(policies, dict) else policies:
                ref = "/".join(policy.split("/")[-4:])
                found = self.store.get("/".join(ref.split("/")[:3]), {}).get(ref.split("/")[-1])
                if found is None:
                    return 400, error(400, f"The resource policy '{policy}' was not found", "invalid")
                if found.get("status") == CREATING["resourcePolicies"]:
                    return 400, error(400, f"The resource '{ref}' is not ready", "resourceNotReady")
            if b["name"] in self.store.get(collection, {}):
                return 409, error(
                    409, f"The resource '{collection}/{b['name']}' already exists", "alreadyExists"
                )
        return None

    def _units(self, zone: str, instance: dict[str, Any], region: str) -> dict[str, float]:
        """Quota units one instance uses: its GPUs and vCPUs (spot ones under PREEMPTIBLE_ metrics where the
        region has that quota), from the machine type stored in its zone."""
        machine = self.store.get(f"zones/{zone}/machineTypes", {}).get(
            instance["machineType"].rsplit("/", 1)[-1]
        )
        if machine is None:
            return {}
        limits = self.quotas.get(region, {})
        spot = dig(instance, "scheduling.provisioningModel") in ("SPOT", "FLEX_START")
        units: dict[str, float] = {}
        series = f"{machine['name'].split('-', 1)[0].upper()}_CPUS"
        wanted = [(series if series in limits else "CPUS", float(machine.get("guestCpus", 0)))]
        for acc in machine.get("accelerators", []):
            metric = GPU_METRICS.get(acc["guestAcceleratorType"])
            if metric:
                wanted.append((metric, float(acc["guestAcceleratorCount"])))
        for metric, n in wanted:
            if spot and limits.get(f"PREEMPTIBLE_{metric}", 0) > 0:
                metric = f"PREEMPTIBLE_{metric}"
            units[metric] = units.get(metric, 0.0) + n
        return units

    def _consumed(self, zone: str, instance: dict[str, Any]) -> str | None:
        """The reservation of ``zone`` an instance consumes (SPECIFIC_RESERVATION naming one that exists)."""
        affinity = instance.get("reservationAffinity") or {}
        if affinity.get("consumeReservationType") != "SPECIFIC_RESERVATION" or not affinity.get("values"):
            return None
        name = str(affinity["values"][0]).rsplit("/", 1)[-1]
        return name if name in self.store.get(f"zones/{zone}/reservations", {}) else None

    def _use(self, zone: str, body: dict[str, Any], region: str) -> dict[str, float]:
        """Quota units an instance or reservation body takes: a reservation its ``count`` VMs', an instance
        consuming a reservation none (the reservation holds its quota)."""
        sku = body.get("specificReservation")
        if sku is not None:
            machine = (sku.get("instanceProperties") or {}).get("machineType", "")
            one = self._units(zone, {"machineType": machine}, region)
            return {m: n * int(sku.get("count", 0)) for m, n in one.items()}
        if self._consumed(zone, body) is not None:
            return {}
        return self._units(zone, body, region)

    def _usage(self, region: str) -> dict[str, float]:
        used = dict(self.quota_usage.get(region, {}))
        for collection, items in self.store.items():
            _, zone, kind = collection.split("/")
            if kind not in ("instances", "reservations") or zone.rsplit("-", 1)[0] != region:
                continue
            for item in items.values():
                if item.get("status") in ("TERMINATED", "DELETING"):  # stopped VMs use no CPU or GPU quota
                    continue
                for metric, n in self._use(zone, item, region).items():
                    used[metric] = used.get(metric, 0.0) + n
        return used

    def _count_in_use(self) -> None:
        """Every reservation's ``specificReservation.inUseCount``: its consumers not TERMINATED."""
        for collection, items in self.store.items():
            _, zone, kind = collection.split("/")
            if kind != "reservations":
                continue
            instances = self.store.get(f"zones/{zone}/instances", {}).values()
            for item in items.values():
                used = sum(
                    1
                    for i in instances
                    if i.get("status") != "TERMINATED" and self._consumed(zone, i) == item["name"]
                )
                item.setdefault("specificReservation", {})["inUseCount"] = str(used)

    def _over_quota(
        self, scope: str, bodies: list[dict[str, Any]]
    ) -> tuple[str | None, list[dict[str, Any]]]:
        """QUOTA_EXCEEDED and its real details when the instances would pass a regional limit."""
        zone = scope.split("/")[1]
        region = zone.rsplit("-", 1)[0]
        limits = self.quotas.get(region, {})
        used = self._usage(region)
        for b in bodies:
            for metric, n in self._use(zone, b, region).items():
                used[metric] = used.get(metric, 0.0) + n
        for metric, limit in sorted(limits.items()):
            if used.get(metric, 0.0) > limit:
                return "QUOTA_EXCEEDED", [
                    {
                        "quotaInfo": {
                            "metricName": f"compute.googleapis.com/{metric.lower()}",
                            "limitName": f"{metric.replace('_', '-')}-per-project-region",
                            "dimensions": {"region": region},
                            "limit": limit,
                        }
                    },
                    {"_message": f"Quota '{metric}' exceeded.  Limit: {limit} in region {region}."},
                ]
        return None, []

    def _region(self, region: str) -> dict[str, Any]:
        """regions.get: the region with its quotas (metric, limit, usage) as Compute Engine reports them."""
        used = self._usage(region)
        return {
            "kind": "compute#region",
            "id": "1000",
            "name": region,
            "status": "UP",
            "selfLink": self._url(f"regions/{region}"),
            "zones": [self._url(f"zones/{region}-{z}") for z in "abcf"],
            "quotas": [
                {"metric": m, "limit": limit, "usage": used.get(m, 0.0)}
                for m, limit in sorted(self.quotas.get(region, {}).items())
            ],
        }

    def _operation(
        self,
        scope: str,
        target: str,
        error_code: str | None,
        kind: str = "insert",
        fault: Fault | None = None,
        details: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        self.serial += 1
        op: dict[str, Any] = {
            "kind": "compute#operation",
            "id": str(5_000_000 + self.serial),
            "name": f"operation-{self.serial}",
            "status": "RUNNING",
            "operationType": kind,
            "targetLink": self._url(target),
            "selfLink": self._url(f"{scope}/operations/operation-{self.serial}"),
            "insertTime": self.clock.stamp(),
            "startTime": self.clock.stamp(),
            "progress": 0,
            scope.split("/")[0][:-1]: self._url(scope),
            "_polls": fault.polls if fault is not None and fault.polls is not None else self.op_polls,
        }
        if error_code is not None:
            op["_error"] = error_code
            op["_details"] = details or []
        self.operations[op["name"]] = op
        return op

    def _finish(self, op: dict[str, Any]) -> None:
        """DONE: the operation's effects take hold; an error ends it as the real one does."""
        op.update(status="DONE", progress=100, endTime=self.clock.stamp())
        for what, collection, name, status in op.pop("_done", []):
            items = self.store.get(collection, {})
            if name not in items:
                continue
            if what == "delete":
                del items[name]
            else:
                items[name]["status"] = status
        code = op.pop("_error", None)
        details = op.pop("_details", [])
        if code is not None:
            message = next((d["_message"] for d in details if "_message" in d), None) or {
                "ZONE_RESOURCE_POOL_EXHAUSTED": "The zone does not have enough resources available to "
                "fulfill the request. Try a different zone, or try again later."
            }.get(code, f"the fake failed it with {code}")
            entry: dict[str, Any] = {"code": code, "message": message}
            shown = [d for d in details if "_message" not in d]
            if shown:
                entry["errorDetails"] = shown
            op["error"] = {"errors": [entry]}
            op["httpErrorStatusCode"] = 503 if "EXHAUSTED" in code else 403
            op["httpErrorMessage"] = "SERVICE UNAVAILABLE" if "EXHAUSTED" in code else "FORBIDDEN"

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
            if op["_polls"] > 0:
                op["_polls"] -= 1
                if method == "POST":  # wait: held ~2 minutes, then RUNNING
                    self.clock.sleep(self.wait_seconds)
            else:
                self._finish(op)
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


def _public(value: Any) -> Any:
    """The answer without the fake's own bookkeeping (keys starting with ``_``), at any depth."""
    if isinstance(value, dict):
        return {k: _public(v) for k, v in value.items() if not k.startswith("_")}
    if isinstance(value, list):
        return [_public(v) for v in value]
    return value


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
        data = json.dumps(_public(answer) if answer else {}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:
        pass
