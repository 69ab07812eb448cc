"""A simulated cloud with the provider protocol: for dry runs, demos and the daemon's tests.

It sells every offering of every cloud, keeps its state in a JSON file so that separate runs (two
``gpuplan provision`` calls, a daemon and its restart) see the same cloud as they would a real one, and
behaves like one where it matters to a provisioner:

- nodes are ``pending`` for ``boot_seconds`` after launch, then ``running`` (wall-clock time);
- every call takes ``api_latency_seconds``;
- client tokens are replayed: a launch repeated with its token returns the nodes it made, creating none;
- capacity is limited where the state says so (``capacity``: ``"OFFERING/spot": nodes``), and a request
  beyond it fails with InsufficientCapacity (a gang all or nothing, a pool launch too);
- faults are injected through the state (``faults``), each consumed when it fires: an operation
  (``launch``, ``ensure_placement_group``, ...), an optional ``match`` (a substring of the pool, run or
  name the call acts on) and the error kind (``throttled``, ``insufficient-capacity``,
  ``quota-exceeded``, ``conflict``, ``not-found``, ``auth``, ``invalid-request``, ``operation-failed``,
  ``timeout``), raised before the call acts, or ``after`` it (the answer lost), or, for a launch, once it
  made part of its nodes (``made``);
- spot interruptions and rebalance notices are announced with :meth:`SimProvider.interrupt`: an
  interrupted node runs on until its deadline (two minutes on by default, as EC2's warning), then the
  cloud takes it;
- quotas are set in the state (``quotas``, :meth:`SimProvider.configure`): a limit in some unit and the
  units one node of each ``"OFFERING/capacity"`` uses; their usage is what the live nodes use.

The file is locked (``fcntl``) for each call and replaced atomically, so concurrent runs and a killed
process never leave it half-written. The default file is one per plan,
``$XDG_STATE_HOME/gpuplan/sim-cloud/<plan id>.json`` (``~/.local/state/...``): two plans tried side by
side do not share a simulated account (its quotas, capacity and faults), as they would share one file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar, Final, TypeVar, cast

from models.errors import InputError
from models.naming import TAG_PLAN, parse_offering, safe_name
from providers.base import (
    Auth,
    Capability,
    CapacityReservation,
    CapacityType,
    Conflict,
    InsufficientCapacity,
    Interruption,
    InvalidRequest,
    Inventory,
    LaunchSpec,
    NoCapacityBlocks,
    Node,
    NotFound,
    OfferingInfo,
    OperationFailed,
    PlacementGroup,
    PlacementGroupSpec,
    Provider,
    ProviderError,
    Quota,
    QuotaExceeded,
    ReservationSpec,
    RetryPolicy,
    SpotPrice,
    Throttled,
    Timeout,
    retry_throttled,
    tags_match,
)

__all__ = ["FAULT_KINDS", "SimProvider", "default_state_path"]

#: Error kinds a fault may raise, as ``ProviderError.kind`` names them.
FAULT_KINDS: Final[dict[str, type[ProviderError]]] = {
    cls.kind: cls
    for cls in (
        Throttled,
        InsufficientCapacity,
        QuotaExceeded,
        Conflict,
        NotFound,
        Auth,
        InvalidRequest,
        OperationFailed,
        Timeout,
    )
}
_VERSION: Final = 1
#: Calls the state remembers (the newest), for tests and for seeing what a run did.
_CALLS_KEPT: Final = 1000
T = TypeVar("T")
_DEFAULT_SETTINGS: Final = {"boot_seconds": 90.0, "api_latency_seconds": 0.02}


#: How long before it takes a spot node the simulated cloud warns (EC2's two-minute interruption notice).
SPOT_WARNING: Final = timedelta(minutes=2)


def default_state_path(plan_id: str | None = None) -> Path:
    """The simulated cloud's file for the plan ``plan_id`` (its resources' ``gpuplan-plan`` tag), so each
    plan gets its own simulated account; ``sim-cloud.json`` beside them when no plan is named."""
    base = Path(os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")) / "gpuplan"
    if plan_id is None:
        return base / "sim-cloud.json"
    return base / "sim-cloud" / f"{safe_name(plan_id)}.json"


def _now() -> datetime:
    return datetime.now(UTC)


def _empty_state() -> dict[str, Any]:
    return {
        "version": _VERSION,
        "settings": dict(_DEFAULT_SETTINGS),
        "capacity": {},
        "faults": [],
        "prices": {},
        "nodes": {},
        "placement_groups": {},
        "reservations": {},
        "tokens": {},
        "interruptions": [],
        "quotas": {},
        "counter": 0,
        "calls": [],
    }


class SimProvider(NoCapacityBlocks):
    """The simulated cloud (cloud = ``sim``), its state in ``path``."""

    cloud = "sim"
    capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {Capability.GANG_RESERVATIONS, Capability.SPOT_PRICES, Capability.REBALANCE_SIGNALS}
    )

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        retry: RetryPolicy | None = None,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.path = Path(path) if path is not None else default_state_path()
        self._sleep = sleep
        self._retry = retry or RetryPolicy()
        self._clock = clock
        if self.path.exists() and self.path.is_dir():
            raise InputError(self.path, None, "is a directory; --sim-state names a file")
        # creates the file, or checks the one there is readable; the latency slept before each call
        self._latency = self._transaction(_latency)

    # ------------------------------------------------------------------------------------------------------
    # state

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.path.with_name(self.path.name + ".lock")
        with open(lock_path, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                state = self._read()
                yield state
                self._write(state)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _read(self) -> dict[str, Any]:
        if not self.path.exists():
            return _empty_state()
        try:
            state = json.loads(self.path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputError(self.path, None, f"not a simulated cloud's state file: {exc}") from None
        if not isinstance(state, dict) or state.get("version") != _VERSION:
            raise InputError(self.path, "version", f"not a simulated cloud's state file (version {_VERSION})")
        for key, value in _empty_state().items():
            state.setdefault(key, value)
        return state

    def _write(self, state: dict[str, Any]) -> None:
        staging = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        staging.write_text(json.dumps(state, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(staging, self.path)

    def _transaction(self, body: Callable[[dict[str, Any]], T]) -> T:
        with self._locked() as state:
            return body(state)

    def _call(self, operation: str, subject: str, body: Callable[..., T]) -> T:
        """One API call: latency, then, on the locked state (once), the call recorded, the fault injected for
        it taken, and ``body`` run unless the fault stops it first. A fault ``after`` the call lets it act
        and then loses the answer (a timeout: the caller cannot know it acted); one with ``made`` lets a
        launch make that many of its nodes and fail with them (a pool filled part way)."""

        def attempt() -> T:
            if self._latency > 0:
                self._sleep(self._latency)
            failure: ProviderError | None = None
            with self._locked() as state:
                self._latency = _latency(state)
                state["calls"] = [*state["calls"][-(_CALLS_KEPT - 1) :], operation]
                fault = _take_fault(state, operation, subject)
                if fault is None:
                    return body(state)
                kind = FAULT_KINDS[fault["error"]]
                message = fault.get("message") or f"injected {fault['error']} on {operation} {subject}"
                launched: tuple[Node, ...] = ()
                if fault.get("after"):
                    body(state)
                elif fault.get("made"):  # only launch faults have it (inject_fault checks)
                    launched = tuple(cast("list[Node]", body(state, count=int(fault["made"]))))
                failure = kind(
                    message, cloud=self.cloud, operation=operation, code=fault["error"], launched=launched
                )
            raise failure  # after the state (the fault taken, what the call did) is written

        return retry_throttled(attempt, self._retry, sleep=self._sleep)

    # ------------------------------------------------------------------------------------------------------
    # the test and demo controls (not part of the protocol)

    def configure(
        self,
        *,
        boot_seconds: float | None = None,
        api_latency_seconds: float | None = None,
        capacity: dict[str, int] | None = None,
        spot_prices: dict[str, float] | None = None,
        quotas: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        """Set delays, capacity limits (``"OFFERING/on-demand"`` or ``"OFFERING/spot"`` -> nodes the cloud
        can hold), spot prices (offering -> USD per node-hour) and quotas (name -> ``{"limit": 64,
        "unit": "GPUs", "per_node": {"OFFERING/on-demand": 8}}``)."""

        def body(state: dict[str, Any]) -> None:
            if boot_seconds is not None:
                state["settings"]["boot_seconds"] = boot_seconds
            if api_latency_seconds is not None:
                state["settings"]["api_latency_seconds"] = api_latency_seconds
                self._latency = api_latency_seconds
            if capacity is not None:
                state["capacity"].update(capacity)
            if spot_prices is not None:
                state["prices"].update(spot_prices)
            if quotas is not None:
                state["quotas"].update(quotas)

        self._transaction(body)

    def inject_fault(
        self,
        operation: str,
        error: str,
        *,
        match: str = "",
        times: int = 1,
        after: bool = False,
        made: int = 0,
    ) -> None:
        """The next ``times`` calls of ``operation`` whose subject contains ``match`` raise ``error``:
        before acting (the default), ``after`` acting (the answer lost, as on a timeout), or, for a launch,
        having ``made`` that many of its nodes (``ProviderError.launched`` carries them)."""
        if error not in FAULT_KINDS:
            raise ValueError(f"unknown fault {error!r}; valid: {', '.join(FAULT_KINDS)}")
        if made and operation != "launch":
            raise ValueError("made= is for launch faults (a launch that made part of its nodes)")
        fault = {"operation": operation, "error": error, "match": match, "times": times}
        if after:
            fault["after"] = True
        if made:
            fault["made"] = made
        self._transaction(lambda state: state["faults"].append(fault))

    def clear_faults(self) -> None:
        """Drop the faults not fired yet (a storm that ends)."""
        self._transaction(lambda state: state["faults"].clear())

    def interrupt(
        self, node_id: str, kind: str = "interruption", *, warning: timedelta = SPOT_WARNING
    ) -> None:
        """Announce a spot interruption (the node runs on until ``warning`` has passed, then the cloud
        takes it) or a rebalance notice."""

        def body(state: dict[str, Any]) -> None:
            if node_id not in state["nodes"]:
                raise NotFound(f"no node {node_id}", cloud=self.cloud, operation="interrupt")
            now = self._clock()
            item = {"node": node_id, "kind": kind, "at": now.isoformat()}
            if kind == "interruption":
                item["deadline"] = (now + warning).isoformat()
                state["nodes"][node_id]["reclaim"] = item["deadline"]
            state["interruptions"].append(item)

        self._transaction(body)

    def calls(self) -> list[str]:
        """Every API call made so far, in order (for tests)."""
        return list(self._transaction(lambda state: state["calls"]))

    # ------------------------------------------------------------------------------------------------------
    # the protocol

    def handles(self, offering: str) -> bool:
        return True

    def offerings(self, regions: Sequence[str]) -> list[OfferingInfo]:
        """The simulated cloud sells whatever the plan asks for: it has no catalog of its own."""
        return []

    def spot_prices(self, offerings: Sequence[str]) -> list[SpotPrice]:
        def body(state: dict[str, Any]) -> list[SpotPrice]:
            now = self._clock()
            prices = state["prices"]
            return [SpotPrice(o, float(prices[o]), now) for o in offerings if o in prices]

        return self._call("spot_prices", "", body)

    def inventory(self, plan_id: str) -> Inventory:
        wanted = {TAG_PLAN: safe_name(plan_id)}

        def body(state: dict[str, Any]) -> Inventory:
            now = self._clock()
            boot = float(state["settings"].get("boot_seconds", 0.0))
            for node in list(state["nodes"].values()):
                reclaim = node.get("reclaim")
                if reclaim and (reclaim is True or now >= datetime.fromisoformat(reclaim)):
                    node["state"] = "terminated"
            nodes = []
            for node in state["nodes"].values():
                if node["state"] == "terminated" or not tags_match(node["tags"], wanted):
                    continue
                launched = datetime.fromisoformat(node["launched"])
                up = (now - launched).total_seconds() >= boot
                nodes.append(_node(node, "running" if up else "pending"))
            groups = [_group(g) for g in state["placement_groups"].values() if tags_match(g["tags"], wanted)]
            reservations = [
                _reservation(r) for r in state["reservations"].values() if tags_match(r["tags"], wanted)
            ]
            return Inventory(tuple(nodes), tuple(groups), tuple(reservations))

        return self._call("inventory", plan_id, body)

    def ensure_placement_group(self, spec: PlacementGroupSpec) -> PlacementGroup:
        def body(state: dict[str, Any]) -> PlacementGroup:
            existing = state["placement_groups"].get(spec.name)
            if existing is not None:
                if not tags_match(existing["tags"], spec.tags):
                    raise Conflict(
                        f"placement group {spec.name} exists and is not ours",
                        cloud=self.cloud,
                        operation="ensure_placement_group",
                    )
                return _group(existing)
            record = {
                "name": spec.name,
                "region": spec.region,
                "fabric": spec.fabric,
                "nodes": spec.nodes,
                "run": spec.tags.get("gpuplan-run"),
                "tags": dict(spec.tags),
            }
            state["placement_groups"][spec.name] = record
            return _group(record)

        return self._call("ensure_placement_group", spec.name, body)

    def ensure_reservation(self, spec: ReservationSpec) -> CapacityReservation:
        def body(state: dict[str, Any]) -> CapacityReservation:
            existing = state["reservations"].get(spec.name)
            if existing is not None:
                if not tags_match(existing["tags"], spec.tags):
                    raise Conflict(
                        f"reservation {spec.name} exists and is not ours",
                        cloud=self.cloud,
                        operation="ensure_reservation",
                    )
                return _reservation(existing)
            if spec.placement_group and spec.placement_group not in state["placement_groups"]:
                raise NotFound(
                    f"placement group {spec.placement_group} does not exist",
                    cloud=self.cloud,
                    operation="ensure_reservation",
                )
            _check_capacity(state, spec.offering, CapacityType.ON_DEMAND, spec.nodes, "ensure_reservation")
            record = {
                "name": spec.name,
                "offering": spec.offering,
                "nodes": spec.nodes,
                "placement_group": spec.placement_group,
                "run": spec.tags.get("gpuplan-run"),
                "tags": dict(spec.tags),
                "ends": None if spec.ends is None else spec.ends.isoformat(),
            }
            state["reservations"][spec.name] = record
            return _reservation(record)

        return self._call("ensure_reservation", spec.name, body)

    def launch(self, spec: LaunchSpec) -> list[Node]:
        if spec.count < 1:
            raise InvalidRequest(f"count must be at least 1, got {spec.count}", cloud=self.cloud)
        parse_offering(spec.offering)

        def body(state: dict[str, Any], count: int = spec.count) -> list[Node]:
            replay = state["tokens"].get(spec.token)
            if replay is not None:
                return [_node(state["nodes"][i], state["nodes"][i]["state"]) for i in replay]
            if spec.placement_group and spec.placement_group not in state["placement_groups"]:
                raise NotFound(
                    f"placement group {spec.placement_group} does not exist",
                    cloud=self.cloud,
                    operation="launch",
                )
            reservation = None
            if spec.reservation:
                reservation = state["reservations"].get(spec.reservation)
                if reservation is None:
                    raise NotFound(
                        f"reservation {spec.reservation} does not exist", cloud=self.cloud, operation="launch"
                    )
            if reservation is None:
                _check_capacity(state, spec.offering, spec.capacity, count, "launch")
            made = []
            for _ in range(count):
                state["counter"] += 1
                node_id = f"sim-{state['counter']:06d}"
                record = {
                    "id": node_id,
                    "offering": spec.offering,
                    "capacity": str(spec.capacity),
                    "pool": spec.pool,
                    "run": spec.run,
                    "placement_group": spec.placement_group,
                    "reservation": spec.reservation,
                    "state": "pending",
                    "launched": self._clock().isoformat(),
                    "tags": dict(spec.tags),
                }
                state["nodes"][node_id] = record
                made.append(node_id)
            state["tokens"][spec.token] = made
            return [_node(state["nodes"][i], "pending") for i in made]

        return self._call("launch", f"{spec.pool} {spec.run or ''}", body)

    def terminate(self, nodes: Sequence[Node]) -> None:
        def body(state: dict[str, Any]) -> None:
            for node in nodes:
                record = state["nodes"].get(node.id)
                if record is not None:
                    record["state"] = "terminated"

        self._call("terminate", " ".join(n.pool for n in nodes), body)

    def release_reservation(self, reservation: CapacityReservation) -> None:
        self._call(
            "release_reservation",
            reservation.name,
            lambda state: state["reservations"].pop(reservation.name, None),
        )

    def delete_placement_group(self, group: PlacementGroup) -> None:
        def body(state: dict[str, Any]) -> None:
            inside = [
                n
                for n in state["nodes"].values()
                if n.get("placement_group") == group.name and n["state"] != "terminated"
            ]
            if inside:
                raise Conflict(
                    f"placement group {group.name} still holds {len(inside)} nodes",
                    cloud=self.cloud,
                    operation="delete_placement_group",
                )
            state["placement_groups"].pop(group.name, None)

        self._call("delete_placement_group", group.name, body)

    def interruptions(self, plan_id: str) -> list[Interruption]:
        wanted = {TAG_PLAN: safe_name(plan_id)}

        def body(state: dict[str, Any]) -> list[Interruption]:
            notices = []
            for item in state["interruptions"]:
                node = state["nodes"].get(item["node"])
                if node is None or not tags_match(node["tags"], wanted):
                    continue
                at = datetime.fromisoformat(item["at"])
                notices.append(
                    Interruption(
                        node_id=item["node"],
                        kind=item["kind"],
                        at=at,
                        offering=node["offering"],
                        pool=node["pool"],
                        run=node["run"],
                        deadline=datetime.fromisoformat(item["deadline"]) if item.get("deadline") else None,
                    )
                )
            return notices

        return self._call("interruptions", plan_id, body)

    def quotas(self, wanted: Sequence[tuple[str, CapacityType]]) -> list[Quota]:
        """The configured quotas that count any of ``wanted``; used: what the live nodes use of each."""
        keys = {f"{offering}/{capacity}" for offering, capacity in wanted}

        def body(state: dict[str, Any]) -> list[Quota]:
            found = []
            live = [n for n in state["nodes"].values() if n["state"] not in ("terminated", "failed")]
            for name, quota in sorted(state["quotas"].items()):
                per_node: dict[str, float] = {k: float(v) for k, v in quota["per_node"].items()}
                if not keys & set(per_node):
                    continue
                used = sum(per_node.get(f"{n['offering']}/{n['capacity']}", 0.0) for n in live)
                counted = {
                    (key.rsplit("/", 1)[0], CapacityType(key.rsplit("/", 1)[1])): units
                    for key, units in per_node.items()
                }
                found.append(
                    Quota(
                        name=name,
                        region=str(quota.get("region", "")),
                        limit=float(quota["limit"]),
                        used=used,
                        unit=str(quota.get("unit", "nodes")),
                        per_node=counted,
                    )
                )
            return found

        return self._call("quotas", "", body)


def _latency(state: dict[str, Any]) -> float:
    return float(state["settings"].get("api_latency_seconds", 0.0))


def _take_fault(state: dict[str, Any], operation: str, subject: str) -> dict[str, Any] | None:
    for fault in state["faults"]:
        if fault["operation"] == operation and fault.get("match", "") in subject and fault["times"] > 0:
            fault["times"] -= 1
            if fault["times"] <= 0:
                state["faults"].remove(fault)
            return dict(fault)
    return None


def _check_capacity(
    state: dict[str, Any], offering: str, capacity: CapacityType, count: int, operation: str
) -> None:
    """InsufficientCapacity when ``count`` more nodes exceed the limit the state sets for the offering."""
    limit = state["capacity"].get(f"{offering}/{capacity}")
    if limit is None:
        return
    used = sum(
        1
        for n in state["nodes"].values()
        if n["offering"] == offering and n["capacity"] == str(capacity) and n["state"] != "terminated"
    )
    if capacity is CapacityType.ON_DEMAND:
        used += sum(r["nodes"] for r in state["reservations"].values() if r["offering"] == offering)
    if used + count > int(limit):
        raise InsufficientCapacity(
            f"{offering} {capacity}: {count} nodes asked, {max(int(limit) - used, 0)} available",
            cloud="sim",
            operation=operation,
            code="InsufficientInstanceCapacity",
        )


def _node(record: dict[str, Any], state: str) -> Node:
    return Node(
        id=record["id"],
        offering=record["offering"],
        capacity=CapacityType(record["capacity"]),
        pool=record["pool"],
        run=record["run"],
        placement_group=record["placement_group"],
        reservation=record["reservation"],
        state=state,
        launched=datetime.fromisoformat(record["launched"]),
        tags=dict(record["tags"]),
    )


def _group(record: dict[str, Any]) -> PlacementGroup:
    return PlacementGroup(
        name=record["name"],
        region=record["region"],
        run=record["run"],
        id=record["name"],
        tags=record["tags"],
    )


def _reservation(record: dict[str, Any]) -> CapacityReservation:
    return CapacityReservation(
        name=record["name"],
        offering=record["offering"],
        nodes=record["nodes"],
        placement_group=record["placement_group"],
        run=record["run"],
        id=record["name"],
        tags=record["tags"],
        ends=datetime.fromisoformat(record["ends"]) if record.get("ends") else None,
    )


def _conforms(provider: SimProvider) -> Provider:
    """Never called: mypy checks here that SimProvider has every call of the Provider protocol."""
    return provider
