"""A local EC2 for the AWS adapter's tests: moto for what it implements, a botocore hook for the rest.

moto (5.2.5) has no placement groups, capacity reservations or capacity blocks, and does not replay
ClientTokens (see shared/reference/CLOUD-TESTING.md). :class:`Ec2StandIn` registers two hooks on a boto3
Session, so every client the adapter makes from it carries them:

- ``before-parameter-build.ec2.*`` hands the caller's parameters to the request context, and
  ``before-call.ec2.*`` records them (one entry per attempt, so retries show) and then either answers
  the call itself (a queued fault, a call moto lacks, a canned answer) or lets it go on to moto;
- ``after-call.ec2.*`` records what each launch asked for per instance id and puts it back on the
  instances moto returns (see below), then lets a test rewrite a parsed answer (a fleet that comes back
  short).

The placement groups and reservations it answers for live in its own small state, so a create and a
later describe agree, and a create of a reservation replays its ClientToken as EC2 does. A reservation's
``AvailableInstanceCount`` is its total less the instances launched into it and not terminated, as EC2
reports it (what the adapter's quota check reads).

moto drops ``Placement.GroupName`` (it comes back ``""``), keeps no capacity reservation on an instance,
and reports one ENI of type ``interface`` whatever the launch template says. So that tests can assert
what EC2 would report for the instances actually launched, the stand-in remembers, per instance id of a
RunInstances or CreateFleet answer, the placement group, the reservation target and the launch
template's network interfaces, and writes them into every RunInstances and DescribeInstances answer the
way EC2 shapes them (``Placement.GroupName``; ``CapacityReservationId`` and
``CapacityReservationSpecification.CapacityReservationTarget``; one ``NetworkInterfaces[]`` entry per
interface with its ``InterfaceType`` and ``Attachment.NetworkCardIndex``/``DeviceIndex``, and no private
address on an ``efa-only`` one). Like EC2 it refuses a launch into a placement group or a reservation
that does not exist, and an ``efa-only`` primary interface.
"""

from __future__ import annotations

import copy
import itertools
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

ACCOUNT = "123456789012"
FAKE_SECRET = "gpuplan-FAKE-SECRET-do-not-log-3f9c"  # planted in the environment; must never be logged

Handler = Callable[[str, dict[str, Any]], dict[str, Any] | None]

#: what nginx in front of an API sends when the API behind it is down (its default error page)
NGINX_502 = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    b"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
)


class _Raw:
    """The raw body of an AWSResponse (botocore reads it with ``stream()``)."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


def _ok(parsed: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
    parsed.setdefault("ResponseMetadata", {"HTTPStatusCode": 200, "RequestId": "stand-in"})
    return AWSResponse("https://stand-in.invalid/", 200, {}, None), parsed


def _fail(code: str, message: str, status: int = 400) -> tuple[AWSResponse, dict[str, Any]]:
    parsed = {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}
    return AWSResponse("https://stand-in.invalid/", status, {}, None), parsed


def _tags_of(params: dict[str, Any], resource_type: str) -> list[dict[str, str]]:
    for spec in params.get("TagSpecifications") or []:
        if spec["ResourceType"] == resource_type:
            return list(spec["Tags"])
    return []


def _matches(item: dict[str, Any], filters: list[dict[str, Any]], fields: dict[str, str]) -> bool:
    """EC2 filter semantics on a stand-in item: every filter matches, any of its values."""
    tags = {t["Key"]: t["Value"] for t in item.get("Tags") or []}
    for f in filters:
        name, values = f["Name"], f["Values"]
        if name.startswith("tag:"):
            have = tags.get(name[4:])
        elif name in fields:
            have = item.get(fields[name])
        else:
            raise NotImplementedError(f"stand-in filter {name}")
        if have not in values:
            return False
    return True


@dataclass
class Request:
    operation: str  # the API name, CreateFleet
    region: str
    params: dict[str, Any]


@dataclass
class Ec2StandIn:
    requests: list[Request] = field(default_factory=list)
    groups: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (region, name) -> group
    reservations: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> reservation
    block_offerings: list[dict[str, Any]] = field(default_factory=list)
    reservation_capacity: int | None = None  # instances EC2 can reserve per request (None: any)
    faults: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    always_fail: dict[str, tuple[str, int]] = field(default_factory=dict)
    answers: dict[str, Handler] = field(default_factory=dict)  # canned answers (None: go on to moto)
    rewrites: dict[str, Callable[[dict[str, Any]], None]] = field(default_factory=dict)
    pages: dict[str, tuple[int, bytes]] = field(default_factory=dict)  # operation -> a proxy's page
    #: Service Quotas of EC2: (region, code) -> the applied value, and AWS's defaults by code (moto's
    #: service-quotas knows only VPC's)
    applied_quotas: dict[tuple[str, str], float] = field(default_factory=dict)
    default_quotas: dict[str, float] = field(default_factory=dict)
    templates: dict[str, dict[str, Any]] = field(default_factory=dict)  # template id -> its data
    launched: dict[str, dict[str, Any]] = field(default_factory=dict)  # instance id -> what EC2 reports
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def install(self, session: Any) -> None:
        session.events.register("before-parameter-build.ec2.*", self._keep_params)
        session.events.register("before-call.ec2.*", self._before_call)
        session.events.register("after-call.ec2.*", self._after_call)
        session.events.register("before-send.ec2.*", self._before_send)
        session.events.register("before-parameter-build.service-quotas.*", self._keep_params)
        session.events.register("before-call.service-quotas.*", self._before_call)
        for step, hook in (("before-parameter-build", self._keep_params), ("before-call", self._before_call)):
            session.events.register(f"{step}.sqs.*", hook)  # recorded, then on to moto's SQS

    # what tests look at

    def calls(self, operation: str) -> list[dict[str, Any]]:
        return [r.params for r in self.requests if r.operation == operation]

    def fail(self, operation: str, code: str, *, times: int | None = 1, status: int = 400) -> None:
        """Answer ``operation`` with the error ``code`` the next ``times`` calls (None: every call)."""
        if times is None:
            self.always_fail[operation] = (code, status)
        else:
            self.faults.setdefault(operation, []).extend([(code, status)] * times)

    def proxy_page(self, operation: str, status: int = 502, body: bytes = NGINX_502) -> None:
        """Answer ``operation`` with an HTML page (a proxy's or a load balancer's), as raw bytes on the
        wire: botocore's own parser reads it, as it would read what a real proxy sends."""
        self.pages[operation] = (status, body)

    def add_group(self, region: str, name: str, tags: dict[str, str]) -> None:
        self._store_group(region, name, [{"Key": k, "Value": v} for k, v in tags.items()])

    def hold(self, region: str, nodes: int, state: str, reservation_type: str = "capacity-block") -> str:
        """A reservation the account holds already, bought outside gpuplan (no tags): a Capacity Block
        or, with ``reservation_type`` "default", an ODCR; its id."""
        rid = f"cr-{next(self._ids):017x}"
        self.reservations[rid] = {
            "_token": None,
            "_region": region,
            "CapacityReservationId": rid,
            "InstanceType": "p5.48xlarge",
            "InstancePlatform": "Linux/UNIX",
            "AvailabilityZone": f"{region}a",
            "TotalInstanceCount": nodes,
            "AvailableInstanceCount": nodes,
            "ReservationType": reservation_type,
            "State": state,
            "Tags": [],
        }
        return rid

    # the hooks

    def _before_send(self, request: Any, event_name: str, **_: Any) -> AWSResponse | None:
        target = event_name.rsplit(".", 1)[-1]  # before-send.ec2.DescribeInstances
        if target not in self.pages:
            return None
        status, body = self.pages[target]
        return AWSResponse(request.url, status, {"Content-Type": "text/html"}, _Raw(body))

    @staticmethod
    def _keep_params(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["stand_in_params"] = params

    def _before_call(
        self, model: Any, context: dict[str, Any], request_signer: Any, **_: Any
    ) -> tuple[AWSResponse, dict[str, Any]] | None:
        op = model.name
        region = request_signer.region_name
        params = copy.deepcopy(context.get("stand_in_params", {}))
        self.requests.append(Request(op, region, params))
        if op in self.pages:
            return None  # on to the wire, where before-send answers with the page
        if op in self.always_fail:
            code, status = self.always_fail[op]
            return _fail(code, "stand-in fault", status)
        if self.faults.get(op):
            code, status = self.faults[op].pop(0)
            return _fail(code, "stand-in fault", status)
        if op in self.answers:
            answer = self.answers[op](region, params)
            if answer is not None:
                return _ok(answer)
        own = getattr(self, f"_op_{op}", None)
        return own(region, params) if own is not None else None

    def _after_call(self, model: Any, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        op = model.name
        params = context.get("stand_in_params", {})
        if "Error" not in parsed:
            if op == "CreateLaunchTemplate":
                made = parsed.get("LaunchTemplate") or {}
                self.templates[made.get("LaunchTemplateId", "")] = copy.deepcopy(params["LaunchTemplateData"])
            elif op == "RunInstances":
                for inst in parsed.get("Instances") or []:
                    self._remember(inst, params, self._template_of(params.get("LaunchTemplate")))
            elif op == "TerminateInstances":
                for instance_id in params.get("InstanceIds") or []:
                    if instance_id in self.launched:
                        self.launched[instance_id]["gone"] = True
            elif op == "CreateFleet":
                config = (params.get("LaunchTemplateConfigs") or [{}])[0]
                data = self._template_of(config.get("LaunchTemplateSpecification"))
                for group in parsed.get("Instances") or []:
                    for instance_id in group.get("InstanceIds") or []:
                        self._remember({"InstanceId": instance_id}, {}, data)
            if op in ("RunInstances", "DescribeInstances"):
                instances = parsed.get("Instances") or [
                    i for r in parsed.get("Reservations") or [] for i in r.get("Instances") or []
                ]
                for inst in instances:
                    self._as_ec2_reports(inst)
        rewrite = self.rewrites.get(op)
        if rewrite is not None:
            rewrite(parsed)

    # what EC2 reports on launched instances, which moto drops

    def _template_of(self, spec: dict[str, Any] | None) -> dict[str, Any]:
        return self.templates.get((spec or {}).get("LaunchTemplateId", ""), {})

    def _remember(self, inst: dict[str, Any], params: dict[str, Any], template: dict[str, Any]) -> None:
        placement = {**(template.get("Placement") or {}), **(params.get("Placement") or {})}
        target = (
            (
                params.get("CapacityReservationSpecification")
                or template.get("CapacityReservationSpecification")
            )
            or {}
        ).get("CapacityReservationTarget") or {}
        specs = params.get("NetworkInterfaces") or template.get("NetworkInterfaces") or []
        self.launched[inst["InstanceId"]] = {
            "group": placement.get("GroupName"),
            "reservation": target.get("CapacityReservationId"),
            "interfaces": sorted(
                (copy.deepcopy(i) for i in specs),
                key=lambda i: (i.get("NetworkCardIndex", 0), i["DeviceIndex"]),
            ),
            "enis": None,  # made on first report, then the same in every answer
        }

    def _as_ec2_reports(self, inst: dict[str, Any]) -> None:
        known = self.launched.get(inst.get("InstanceId", ""))
        if known is None:
            return
        if known["group"]:
            inst.setdefault("Placement", {})["GroupName"] = known["group"]
        if known["reservation"]:
            inst["CapacityReservationId"] = known["reservation"]
            inst["CapacityReservationSpecification"] = {
                "CapacityReservationTarget": {"CapacityReservationId": known["reservation"]}
            }
        if known["interfaces"]:
            if known["enis"] is None:
                primary = (inst.get("NetworkInterfaces") or [{}])[0]
                known["enis"] = [self._eni(primary, spec, n) for n, spec in enumerate(known["interfaces"])]
            inst["NetworkInterfaces"] = copy.deepcopy(known["enis"])

    def _eni(self, primary: dict[str, Any], spec: dict[str, Any], n: int) -> dict[str, Any]:
        """The ENI EC2 reports for one interface of the template: the primary keeps moto's ENI (and its
        address), another ``efa`` gets an address of its own, an ``efa-only`` one none."""
        eni = (
            copy.deepcopy(primary)
            if n == 0
            else {
                "NetworkInterfaceId": f"eni-{next(self._ids):017x}",
                "SubnetId": spec.get("SubnetId", primary.get("SubnetId")),
                "VpcId": primary.get("VpcId"),
                "Status": "in-use",
                "PrivateIpAddress": f"10.255.{n // 250}.{n % 250 + 1}",
            }
        )
        eni["InterfaceType"] = spec.get("InterfaceType", "interface")
        eni["Attachment"] = {
            **(eni.get("Attachment") or {}),
            "DeviceIndex": spec["DeviceIndex"],
            "NetworkCardIndex": spec.get("NetworkCardIndex", 0),
            "Status": "attached",
        }
        if eni["InterfaceType"] == "efa-only":  # no IP address: it carries only EFA (SRD) traffic
            for key in ("PrivateIpAddress", "PrivateIpAddresses", "PrivateDnsName", "Association"):
                eni.pop(key, None)
        return eni

    def _op_RunInstances(self, region: str, p: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]] | None:
        """EC2's checks moto lacks; a launch that passes them goes on to moto."""
        template = self._template_of(p.get("LaunchTemplate"))
        group = (p.get("Placement") or {}).get("GroupName")
        if group and (region, group) not in self.groups:
            return _fail("InvalidPlacementGroup.Unknown", f"The Placement Group '{group}' is unknown.")
        target = (
            (p.get("CapacityReservationSpecification") or {}).get("CapacityReservationTarget") or {}
        ).get("CapacityReservationId")
        if target and target not in self.reservations:
            return _fail(
                "InvalidCapacityReservationId.NotFound",
                f"The capacity reservation ID '{target}' does not exist",
            )
        for spec in p.get("NetworkInterfaces") or template.get("NetworkInterfaces") or []:
            if (
                spec.get("InterfaceType") == "efa-only"
                and spec.get("NetworkCardIndex", 0) == 0
                and spec["DeviceIndex"] == 0
            ):
                return _fail(
                    "InvalidParameterCombination",
                    "An EFA-only interface cannot be the primary network interface.",
                )
        return None

    # Service Quotas (the real GetServiceQuota answer's shape)

    def _quota(self, region: str, code: str, value: float) -> dict[str, Any]:
        family = {"L-417A185B": "P/OnDemand", "L-DB2E81BA": "G/OnDemand", "L-1216C47A": "Standard/OnDemand",
                  "L-7212CCBC": "P/Spot", "L-3819A6DF": "G/Spot", "L-34B43A08": "Standard/Spot"}  # fmt: skip
        names = {
            "L-417A185B": "Running On-Demand P instances",
            "L-DB2E81BA": "Running On-Demand G and VT instances",
            "L-1216C47A": "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
            "L-7212CCBC": "All P Spot Instance Requests",
            "L-3819A6DF": "All G and VT Spot Instance Requests",
            "L-34B43A08": "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests",
        }
        return {
            "ServiceCode": "ec2",
            "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)",
            "QuotaArn": f"arn:aws:servicequotas:{region}:{ACCOUNT}:ec2/{code}",
            "QuotaCode": code,
            "QuotaName": names.get(code, code),
            "Value": value,
            "Unit": "None",
            "Adjustable": True,
            "GlobalQuota": False,
            "UsageMetric": {
                "MetricNamespace": "AWS/Usage",
                "MetricName": "ResourceCount",
                "MetricDimensions": {
                    "Class": family.get(code, "Standard/OnDemand"),
                    "Resource": "vCPU",
                    "Service": "EC2",
                    "Type": "Resource",
                },
                "MetricStatisticRecommendation": "Maximum",
            },
        }

    def _op_GetServiceQuota(self, region: str, p: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
        value = self.applied_quotas.get((region, p["QuotaCode"])) if p["ServiceCode"] == "ec2" else None
        if value is None:
            return _fail(
                "NoSuchResourceException", "The request failed because the specified resource does not exist."
            )
        return _ok({"Quota": self._quota(region, p["QuotaCode"], value)})

    def _op_GetAWSDefaultServiceQuota(
        self, region: str, p: dict[str, Any]
    ) -> tuple[AWSResponse, dict[str, Any]]:
        value = self.default_quotas.get(p["QuotaCode"]) if p["ServiceCode"] == "ec2" else None
        if value is None:
            return _fail(
                "NoSuchResourceException", "The request failed because the specified resource does not exist."
            )
        return _ok({"Quota": self._quota(region, p["QuotaCode"], value)})

    # placement groups

    def _store_group(self, region: str, name: str, tags: list[dict[str, str]]) -> dict[str, Any]:
        group = {
            "GroupName": name,
            "GroupId": f"pg-{next(self._ids):017x}",
            "GroupArn": f"arn:aws:ec2:{region}:{ACCOUNT}:placement-group/{name}",
            "Strategy": "cluster",
            "State": "available",
            "Tags": tags,
        }
        self.groups[(region, name)] = group
        return group

    def _op_CreatePlacementGroup(self, region: str, p: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
        if (region, p["GroupName"]) in self.groups:
            return _fail(
                "InvalidPlacementGroup.Duplicate", f"The placement group '{p['GroupName']}' already exists."
            )
        group = self._store_group(region, p["GroupName"], _tags_of(p, "placement-group"))
        return _ok({"PlacementGroup": copy.deepcopy(group)})

    def _op_DescribePlacementGroups(
        self, region: str, p: dict[str, Any]
    ) -> tuple[AWSResponse, dict[str, Any]]:
        mine = {name: g for (r, name), g in self.groups.items() if r == region}
        names = p.get("GroupNames")
        if names:
            missing = [n for n in names if n not in mine]
            if missing:
                return _fail(
                    "InvalidPlacementGroup.Unknown", f"The Placement Group '{missing[0]}' is unknown."
                )
            found = [mine[n] for n in names]
        else:
            fields = {"group-name": "GroupName", "strategy": "Strategy", "state": "State"}
            found = [g for g in mine.values() if _matches(g, p.get("Filters") or [], fields)]
        return _ok({"PlacementGroups": copy.deepcopy(found)})

    def _op_DeletePlacementGroup(self, region: str, p: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
        if self.groups.pop((region, p["GroupName"]), None) is None:
            return _fail(
                "InvalidPlacementGroup.Unknown", f"The Placement Group '{p['GroupName']}' is unknown."
            )
        return _ok({})

    # capacity reservations and capacity blocks

    def _op_CreateCapacityReservation(
        self, region: str, p: dict[str, Any]
    ) -> tuple[AWSResponse, dict[str, Any]]:
        for r in self.reservations.values():
            if r["_token"] == p.get("ClientToken"):
                return _ok({"CapacityReservation": self._public(r)})  # EC2 replays a token
        if self.reservation_capacity is not None and p["InstanceCount"] > self.reservation_capacity:
            return _fail("InsufficientInstanceCapacity", "There is no Spot capacity available that matches.")
        rid = f"cr-{next(self._ids):017x}"
        self.reservations[rid] = {
            "_token": p.get("ClientToken"),
            "CapacityReservationId": rid,
            "CapacityReservationArn": f"arn:aws:ec2:{region}:{ACCOUNT}:capacity-reservation/{rid}",
            "InstanceType": p["InstanceType"],
            "InstancePlatform": p["InstancePlatform"],
            "AvailabilityZone": p["AvailabilityZone"],
            "TotalInstanceCount": p["InstanceCount"],
            "AvailableInstanceCount": p["InstanceCount"],
            "InstanceMatchCriteria": p.get("InstanceMatchCriteria", "open"),
            "EndDateType": p.get("EndDateType", "unlimited"),
            "State": "active",
            "Tags": _tags_of(p, "capacity-reservation"),
            "_region": region,
            **({"PlacementGroupArn": p["PlacementGroupArn"]} if "PlacementGroupArn" in p else {}),
        }
        return _ok({"CapacityReservation": self._public(self.reservations[rid])})

    @staticmethod
    def _public(r: dict[str, Any]) -> dict[str, Any]:
        return copy.deepcopy({k: v for k, v in r.items() if not k.startswith("_")})

    def _op_DescribeCapacityReservations(
        self, region: str, p: dict[str, Any]
    ) -> tuple[AWSResponse, dict[str, Any]]:
        ids = p.get("CapacityReservationIds")
        fields = {"state": "State", "instance-type": "InstanceType", "availability-zone": "AvailabilityZone"}
        found = [
            self._in_use(self._public(r))
            for r in self.reservations.values()
            if r["_region"] == region
            and (not ids or r["CapacityReservationId"] in ids)
            and _matches(r, p.get("Filters") or [], fields)
        ]
        return _ok({"CapacityReservations": found})

    def _in_use(self, r: dict[str, Any]) -> dict[str, Any]:
        """``r`` with ``AvailableInstanceCount`` as EC2 keeps it: its total less the instances launched into
        it that still run (a terminated one gives its place back)."""
        used = sum(
            1
            for known in self.launched.values()
            if known["reservation"] == r["CapacityReservationId"] and not known.get("gone")
        )
        r["AvailableInstanceCount"] = max(0, int(r["TotalInstanceCount"]) - used)
        return r

    def _op_CancelCapacityReservation(
        self, region: str, p: dict[str, Any]
    ) -> tuple[AWSResponse, dict[str, Any]]:
        r = self.reservations.get(p["CapacityReservationId"])
        if r is None or r["_region"] != region:
            return _fail(
                "InvalidCapacityReservationId.NotFound",
                f"The capacity reservation ID '{p['CapacityReservationId']}' does not exist",
            )
        r["State"] = "cancelled"
        return _ok({"Return": True})

    def _op_DescribeCapacityBlockOfferings(
        self, region: str, p: dict[str, Any]
    ) -> tuple[AWSResponse, dict[str, Any]]:
        found = [
            copy.deepcopy(o)
            for o in self.block_offerings
            if o["InstanceType"] == p.get("InstanceType", o["InstanceType"])
            and o["InstanceCount"] == p.get("InstanceCount", o["InstanceCount"])
            and o["CapacityBlockDurationHours"] == p["CapacityDurationHours"]
        ]
        return _ok({"CapacityBlockOfferings": found})

    def _op_PurchaseCapacityBlock(self, region: str, p: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
        offer = next(
            (o for o in self.block_offerings if o["CapacityBlockOfferingId"] == p["CapacityBlockOfferingId"]),
            None,
        )
        if offer is None:
            return _fail("InvalidCapacityBlockOfferingId.NotFound", "no such offering")
        rid = f"cr-{next(self._ids):017x}"
        self.reservations[rid] = {
            "_token": None,
            "_region": region,
            "CapacityReservationId": rid,
            "InstanceType": offer["InstanceType"],
            "InstancePlatform": p["InstancePlatform"],
            "AvailabilityZone": offer["AvailabilityZone"],
            "TotalInstanceCount": offer["InstanceCount"],
            "AvailableInstanceCount": offer["InstanceCount"],
            "ReservationType": "capacity-block",
            "StartDate": offer["StartDate"],
            "EndDate": offer["EndDate"],
            "State": "scheduled",
            "Tags": _tags_of(p, "capacity-reservation"),
        }
        return _ok({"CapacityReservation": self._public(self.reservations[rid])})


# ----------------------------------------------------------------------------------------------------------
# fixtures


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials and region, and no shared config that could point a client anywhere else."""
    for key in (
        "AWS_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_EC2",
    ):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFAKEFAKEFAKEFAKE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", FAKE_SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@dataclass
class Vpc:
    subnets: list[str]  # one per AZ, us-east-1a then us-east-1b
    image_id: str


def make_vpc(session: Any, endpoint_url: str | None = None) -> Vpc:
    """A VPC with two subnets in two AZs, made with a client without hooks, and an AMI id."""
    ec2 = session.client("ec2", region_name="us-east-1", endpoint_url=endpoint_url)
    vpc = ec2.create_vpc(CidrBlock="10.20.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.20.{i}.0/24", AvailabilityZone=f"us-east-1{az}")[
            "Subnet"
        ]["SubnetId"]
        for i, az in enumerate("ab", start=1)
    ]
    # moto does not check the AMI id, and describe_images costs a second and a half per test
    return Vpc(subnets, "ami-0a1b2c3d4e5f60718")


@contextmanager
def moto_running() -> Iterator[str]:
    """moto's server on 127.0.0.1 and a free port while the block runs; its endpoint URL."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.CRITICAL)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def moto_server() -> Iterator[str]:
    """moto's server for one test; its endpoint URL."""
    with moto_running() as url:
        yield url


def ec2_event(
    detail_type: str, instance_id: str, when: datetime, region: str = "us-east-1", **detail: str
) -> str:
    """An EventBridge event of EC2 as an SQS message body, in the shape the EC2 User Guide shows
    (spot-instance-termination-notices.html, rebalance-recommendations.html,
    monitoring-instance-state-changes.html)."""
    import json

    return json.dumps(
        {
            "version": "0",
            "id": f"{abs(hash((detail_type, instance_id, when))):032x}"[:32],
            "detail-type": detail_type,
            "source": "aws.ec2",
            "account": ACCOUNT,
            "time": f"{when:%Y-%m-%dT%H:%M:%SZ}",
            "region": region,
            "resources": [f"arn:aws:ec2:{region}a:instance/{instance_id}"],
            "detail": {"instance-id": instance_id, **detail},
        }
    )


def block_offering(offer_id: str, fee: str, *, count: int = 2, hours: int = 24) -> dict[str, Any]:
    start = datetime(2027, 1, 4, 11, 30, tzinfo=UTC)
    return {
        "CapacityBlockOfferingId": offer_id,
        "InstanceType": "p5.48xlarge",
        "AvailabilityZone": "us-east-1a",
        "InstanceCount": count,
        "StartDate": start,
        "EndDate": start.replace(day=start.day + hours // 24),
        "CapacityBlockDurationHours": hours,
        "UpfrontFee": fee,
        "CurrencyCode": "USD",
        "Tenancy": "default",
    }
