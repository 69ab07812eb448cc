"""The AWS adapter: EC2 through boto3, for gpuplan's protocol (:mod:`providers.base`).

What each protocol call becomes on EC2:

- a gang's placement group is a *cluster* placement group, and its nodes get one EFA interface per
  network card (p5.48xlarge: 32) through a launch template built from ``describe_instance_types``;
- a gang launches with one ``run_instances`` (MinCount = MaxCount, so EC2 itself makes it all or nothing)
  in one subnet (the region's first: a cluster group and an ODCR live in one AZ), into its reservation
  when it has one;
- a pool that is not a gang launches as an *instant* EC2 Fleet across the region's subnets
  (price-capacity-optimized for spot, lowest-price for on-demand), which picks the AZs with capacity;
- a reservation is a targeted on-demand capacity reservation (ODCR) in the gang's AZ and group;
- Capacity Blocks for ML are listed, and bought only through :meth:`AwsProvider.purchase_capacity_block`
  with a cost cap, which nothing calls without the user's explicit flag.

boto3 is imported inside :func:`_sdk`, so ``import providers.aws`` works without it. Every SDK call goes
through :meth:`AwsProvider._call`, which maps errors (:func:`_error`, the one table of EC2 codes) and
retries throttling with the policy's bounded, jittered backoff. botocore's own retries are off, so that
bound is the only one.
"""

from __future__ import annotations

import json
import logging
import random
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, ClassVar

from pydantic import Field, ValidationInfo, field_validator, model_validator

from models.naming import TAG_PLAN, TAG_POOL, TAG_RUN, client_token, parse_offering, safe_name
from models.numbers import StrictModel
from providers.base import (
    Auth,
    Capability,
    CapacityBlockOffer,
    CapacityReservation,
    CapacityType,
    Conflict,
    InsufficientCapacity,
    Interruption,
    InvalidRequest,
    Inventory,
    LaunchSpec,
    MissingSDK,
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
    sdk_call,
    tags_match,
)
from providers.config import FILE, MAX_ITEMS, checked_retry

__all__ = ["AwsProvider", "AwsSettings", "open_provider"]

log = logging.getLogger("gpuplan.providers.aws")

CLOUD = "aws"
PLATFORM = "Linux/UNIX"
# the tag that records which purchase token bought a capacity block (EC2's PurchaseCapacityBlock takes no
# ClientToken, so a repeated purchase is recognised by this tag instead)
TAG_PURCHASE = "gpuplan-purchase"
#: the states of a Capacity Block that is bought and not over (API Reference, CapacityReservation State)
_BLOCK_HELD_STATES = ("payment-pending", "scheduled", "active")
_TERMINATE_BATCH = 500  # well under EC2's per-call limit on instance ids
_FILTER_BATCH = 200  # filter values per describe call
_LIVE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]
_RESERVATION_ID = re.compile(r"cr-[0-9a-f]{8,17}")
_SPOT_NOTICE_CODES = {"marked-for-termination", "marked-for-stop"}


_AMI = re.compile(r"ami-[0-9a-f]{8,17}")
_SUBNET = re.compile(r"subnet-[0-9a-f]{8,17}")
_SECURITY_GROUP = re.compile(r"sg-[0-9a-f]{8,17}")
_REGION = re.compile(r"[a-z]{2}(?:-[a-z]+)+-\d{1,2}")
_URL = re.compile(r"https?://[^\s/?#]+[^\s]*")
_Text = Annotated[str, Field(min_length=1, max_length=2048)]
_Regions = Annotated[dict[_Text, _Text], Field(min_length=1, max_length=MAX_ITEMS)]


class AwsSettings(StrictModel):
    """The ``aws:`` section of the provider settings file. Read from a file (the ``FILE`` context of
    providers.config), the ids must have EC2's shapes and what a launch needs (``FILE_REQUIRES``) must be
    there; a caller in Python may leave them out (a read-only provider, a test)."""

    #: the settings a file must give, and what each is: launching without them fails at the first launch
    FILE_REQUIRES: ClassVar[dict[str, str]] = {
        "image_id": "one AMI id, or region -> AMI id",
        "subnets": "region -> subnet ids",
    }

    endpoint_url: _Text | None = None  # moto / LocalStack; None = AWS's own endpoints
    profile: _Text | None = None  # a named profile of the shared credentials file
    image_id: _Text | _Regions | None = None  # one AMI, or region -> AMI; required to launch
    #: region -> subnet ids; gangs use the first, fleets span all
    subnets: Annotated[
        dict[_Text, Annotated[list[_Text], Field(min_length=1, max_length=MAX_ITEMS)]],
        Field(max_length=MAX_ITEMS),
    ] = Field(default_factory=dict)
    security_group_ids: Annotated[list[_Text], Field(max_length=16)] = Field(
        default_factory=list
    )  # EC2: 16 per interface at most
    key_name: _Text | None = None
    retry: RetryPolicy = RetryPolicy()
    timeout_seconds: float = Field(
        60.0, gt=0, le=3600, description="connect and read timeout of each API call"
    )
    #: the SQS queue an EventBridge rule sends EC2's spot interruption warnings, rebalance
    #: recommendations and state changes to (``gpuplan terraform`` writes one and outputs its URL); None:
    #: interruptions are read from the EC2 API (spot request status), with no rebalance recommendations
    #: one URL, or region -> URL (EventBridge events are regional: one queue per region with nodes)
    interruption_queue_url: _Text | _Regions | None = None
    interruption_wait_seconds: int = Field(
        1, ge=0, le=20, description="SQS long poll of the first receive of each read (0-20 s)"
    )
    interruption_max_messages: int = Field(
        100, ge=1, le=1000, description="messages read from the queue per call at most"
    )
    interruption_visibility_seconds: int = Field(
        300,
        ge=1,
        le=43200,
        description="how long a message read stays hidden from other reads: longer than a daemon cycle, "
        "so it is deleted at the next read before it comes back",
    )

    _retry = field_validator("retry", mode="before")(checked_retry)

    @field_validator("image_id")
    @classmethod
    def _ami(cls, value: str | dict[str, str] | None, info: ValidationInfo) -> str | dict[str, str] | None:
        if value is not None and FILE in (info.context or {}):
            amis = {"": value} if isinstance(value, str) else value
            for region, ami in amis.items():
                if region:
                    _shape(_REGION, region, "a region such as us-east-1")
                _shape(_AMI, ami, "an AMI id (ami- and 8 or 17 hex digits)")
        return value

    @field_validator("subnets")
    @classmethod
    def _subnet_ids(cls, value: dict[str, list[str]], info: ValidationInfo) -> dict[str, list[str]]:
        if FILE in (info.context or {}):
            for region, ids in value.items():
                _shape(_REGION, region, "a region such as us-east-1")
                for subnet in ids:
                    _shape(_SUBNET, subnet, f"a subnet id of {region} (subnet- and 8 or 17 hex digits)")
                if len(set(ids)) != len(ids):
                    raise ValueError(f"{region} lists a subnet twice")
        return value

    @field_validator("security_group_ids")
    @classmethod
    def _groups(cls, value: list[str], info: ValidationInfo) -> list[str]:
        if FILE in (info.context or {}):
            for group in value:
                _shape(_SECURITY_GROUP, group, "a security group id (sg- and 8 or 17 hex digits)")
        return value

    @field_validator("endpoint_url", "interruption_queue_url")
    @classmethod
    def _urls(cls, value: str | dict[str, str] | None, info: ValidationInfo) -> str | dict[str, str] | None:
        if value is not None and FILE in (info.context or {}):
            for url in [value] if isinstance(value, str) else value.values():
                _shape(_URL, url, "an http:// or https:// URL")
        return value

    @model_validator(mode="after")
    def _an_ami_per_region(self, info: ValidationInfo) -> AwsSettings:
        if FILE in (info.context or {}) and isinstance(self.image_id, dict):
            missing = sorted(set(self.subnets) - set(self.image_id))
            if missing:
                raise ValueError(f"image_id has no AMI for {', '.join(missing)}, which subnets lists")
        return self


def _shape(pattern: re.Pattern[str], value: str, what: str) -> None:
    """ValueError unless ``value`` is ``what`` (an id of the shape ``pattern`` matches)."""
    if not pattern.fullmatch(value):
        raise ValueError(f"{value[:80]!r} is not {what}")


def _sdk() -> Any:
    """boto3, imported only when an AWS provider is opened (``gpuplan plan`` needs no SDK)."""
    try:
        # botocore comes with boto3; its config and exceptions are imported where they are used
        import boto3
    except ImportError as exc:
        raise MissingSDK(CLOUD, "boto3", "aws") from exc
    return boto3


def open_provider(
    settings: AwsSettings, *, session: Any = None, sleep: Callable[[float], None] = time.sleep
) -> AwsProvider:
    """The AWS provider for ``settings``; ``session`` is a boto3 Session (tests pass one with hooks)."""
    boto3 = _sdk()
    if session is None:
        session = boto3.Session(profile_name=settings.profile)
    return AwsProvider(settings, session=session, sleep=sleep)


# ----------------------------------------------------------------------------------------------------------
# errors: the one table of EC2 codes


_THROTTLED = {
    "RequestLimitExceeded",
    "Throttling",
    "ThrottlingException",
    "SlowDown",
    "RequestThrottled",
    "TooManyRequestsException",  # Service Quotas
}
_CAPACITY = {
    "InsufficientInstanceCapacity",
    "InsufficientCapacityOnHost",
    "InsufficientReservedInstanceCapacity",
    "InsufficientHostCapacity",
    "InsufficientCapacity",
    "Unsupported",
}
_QUOTA = {"InstanceLimitExceeded", "VcpuLimitExceeded", "MaxSpotInstanceCountExceeded"}
_AUTH = {
    "AuthFailure",
    "UnauthorizedOperation",
    "ExpiredToken",
    "ExpiredTokenException",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "NoCredentialsError",
    "PartialCredentialsError",
    "AccessDenied",
    "AccessDeniedException",  # Service Quotas and SQS (JSON protocols) say it so
}
#: botocore's errors for a request that may have reached EC2 with no whole answer back: the outcome is
#: unknown (Timeout), as for a read timeout
_NO_ANSWER = {"ReadTimeoutError", "ConnectionClosedError", "IncompleteReadError", "ResponseStreamingError"}
#: botocore's errors for a request that never reached EC2
_UNREACHABLE = {
    "EndpointConnectionError",
    "ConnectionError",
    "ProxyConnectionError",
    "SSLError",
    "HTTPClientError",
}
_TITLE = re.compile(rb"<title>\s*(.*?)\s*</title>", re.I | re.S)
_INVALID = {
    "MissingParameter",
    "ParamValidationError",
    "UnknownParameter",
    "ValidationError",
    "InsufficientFreeAddressesInSubnet",  # the subnet is too small for the launch: a settings problem
}


def _error(code: str | None, message: str, operation: str, status: int | None = None) -> ProviderError:
    """The typed error for an EC2 error code (a ClientError's code, a fleet ``Errors[]`` entry's code, or
    a botocore exception's class name). The order matters: RequestLimitExceeded is throttling, not a
    quota; ``InvalidInstanceID.NotFound`` is a missing resource, not a bad parameter."""
    c = code or ""
    kind: type[ProviderError] = ProviderError
    if c in _NO_ANSWER or c == "ConnectTimeoutError":
        kind = Timeout
    elif c in _THROTTLED or (status == 503 and c in ("", "503", "SlowDown", "ServiceUnavailable")):
        kind = Throttled
    elif c in _UNREACHABLE:
        kind = OperationFailed
        message = f"EC2 could not be reached: {message}"
    elif c.isdigit() and (status or 0) >= 500:
        # an error page with no API error code (botocore names the error by its HTTP status): a proxy
        # or an outage answered, not EC2's API
        kind = OperationFailed
        message = f"EC2 answered HTTP {c} {message}".rstrip() + ", not the API's error: a proxy or an outage?"
    elif c in _CAPACITY:
        kind = InsufficientCapacity
    elif c in _QUOTA or c.endswith("LimitExceeded"):
        kind = QuotaExceeded
    elif c in _AUTH:
        kind = Auth
    elif c.endswith(("NotFound", "NotFoundException", ".Unknown")) or c.startswith("NoSuch"):
        kind = NotFound  # InvalidPlacementGroup.Unknown is how EC2 says a group does not exist
    elif (
        c.endswith(".Duplicate")
        or "AlreadyExists" in c
        or c in ("IdempotentParameterMismatch", "IncorrectState")
    ):
        kind = Conflict
    elif c.startswith("InvalidParameter") or c in _INVALID or c.endswith(".Malformed"):
        kind = InvalidRequest
    return kind(message or c or "request failed", cloud=CLOUD, operation=operation, code=c or None)


def _unreadable(exc: BaseException, operation: str) -> ProviderError:
    """An answer botocore could not parse (``ResponseParserError``): not the API's XML but a proxy's or
    an outage's page. The call's outcome is unknown to us, but no further parsing will help: it is an
    OperationFailed naming the page's title (never the whole body, which may be long)."""
    text = str(exc)
    title = _TITLE.search(text.encode("utf-8", "replace").replace(b"\\n", b" "))
    what = title.group(1).decode("utf-8", "replace")[:120] if title else text.split("\n", 1)[0][:160]
    return OperationFailed(
        f"EC2's answer could not be read (not the API's XML or JSON; a proxy's or an outage's page?): {what}",
        cloud=CLOUD,
        operation=operation,
        code="ResponseParserError",
    )


def _from_exception(exc: BaseException, operation: str) -> ProviderError | None:
    """The typed error for a botocore exception (None for anything else, which is a bug to surface).

    Besides ClientError and BotoCoreError, botocore raises ``ResponseParserError`` (a plain Exception)
    when an answer is not the API's own (an HTML page from a proxy or a load balancer): it is mapped
    here too, so it reaches the CLI as a cloud error (exit 6), not as a traceback."""
    from botocore.exceptions import BotoCoreError, ClientError
    from botocore.parsers import ResponseParserError

    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return _error(err.get("Code"), err.get("Message", ""), operation, status)
    if isinstance(exc, ResponseParserError):
        return _unreadable(exc, operation)
    if isinstance(exc, BotoCoreError):
        # NoCredentialsError, ParamValidationError, EndpointConnectionError, ...: the class name is the
        # code; their messages name the missing thing, never a secret
        return _error(type(exc).__name__, str(exc), operation)
    return None


# ----------------------------------------------------------------------------------------------------------
# quotas: EC2's vCPU quotas per instance family and market (Service Quotas, service code ec2)

#: (family, capacity) -> the Service Quotas code; names as the console shows them. The codes are those
#: of the Service Quotas console for EC2 (e.g. https://console.aws.amazon.com/servicequotas/home/services/
#: ec2/quotas/L-417A185B); families as the EC2 User Guide's "Amazon EC2 service quotas" groups them.
VCPU_QUOTAS: dict[tuple[str, CapacityType], str] = {
    ("P", CapacityType.ON_DEMAND): "L-417A185B",
    ("G", CapacityType.ON_DEMAND): "L-DB2E81BA",
    ("Standard", CapacityType.ON_DEMAND): "L-1216C47A",
    ("P", CapacityType.SPOT): "L-7212CCBC",
    ("G", CapacityType.SPOT): "L-3819A6DF",
    ("Standard", CapacityType.SPOT): "L-34B43A08",
}
_QUOTA_NAMES = {
    "L-417A185B": "Running On-Demand P instances",
    "L-DB2E81BA": "Running On-Demand G and VT instances",
    "L-1216C47A": "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
    "L-7212CCBC": "All P Spot Instance Requests",
    "L-3819A6DF": "All G and VT Spot Instance Requests",
    "L-34B43A08": "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests",
}
#: families with quotas of their own that gpuplan does not read (a launch of them is not checked)
_OTHER_FAMILIES = ("inf", "trn", "dl", "hpc", "mac", "x", "f", "u")


def _quota_code(instance_type: str, capacity: CapacityType) -> str | None:
    """The vCPU quota a node of ``instance_type`` on ``capacity`` counts against (None: none read here).
    The family is the type's leading letters: p5 is P, g6e and vt1 are G and VT, m5/c7i/r6a/... are
    Standard."""
    letters = re.match(r"[a-z]+", instance_type.lower())
    prefix = letters.group(0) if letters else ""
    if prefix.startswith("p"):
        family = "P"
    elif prefix.startswith(("g", "vt")):
        family = "G"
    elif prefix.startswith(_OTHER_FAMILIES) or not prefix or prefix[0] not in "acdhimrtz":
        return None
    else:
        family = "Standard"
    return VCPU_QUOTAS[(family, capacity)]


# ----------------------------------------------------------------------------------------------------------
# helpers


def _tag_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in sorted(tags.items())]


def _tag_specs(tags: Mapping[str, str], *resource_types: str) -> list[dict[str, Any]]:
    return [{"ResourceType": rt, "Tags": _tag_list(tags)} for rt in resource_types]


def _tags(item: Mapping[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in item.get("Tags") or []}


def _tag_filters(tags: Mapping[str, str]) -> list[dict[str, Any]]:
    return [{"Name": f"tag:{k}", "Values": [v]} for k, v in sorted(tags.items())]


def _chunks(items: Sequence[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield list(items[i : i + size])


def _group_name_from_arn(arn: str | None) -> str | None:
    # arn:aws:ec2:us-east-1:123456789012:placement-group/NAME
    if not arn or "placement-group/" not in arn:
        return None
    return arn.rsplit("placement-group/", 1)[1]


def _region_of(offering: str) -> tuple[str, str]:
    try:
        cloud, region, instance_type = parse_offering(offering)
    except ValueError as exc:
        raise InvalidRequest(str(exc), cloud=CLOUD) from None
    if cloud != CLOUD:
        raise InvalidRequest(f"not an AWS offering: {offering}", cloud=CLOUD)
    return region, instance_type


def _now() -> datetime:
    return datetime.now(UTC)


#: how long EC2 gives a spot instance after its interruption warning (EC2 User Guide, "Spot Instance
#: interruption notices", https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html)
SPOT_NOTICE = timedelta(minutes=2)
_GONE_STATES = {"shutting-down", "terminated", "stopping", "stopped"}


def _parse_event(body: object) -> dict[str, Any] | None:
    """One EventBridge event from an SQS message body, as EC2 sends it, reduced to what gpuplan reads
    (``kind``, ``instance``, ``region``, ``at``, ``deadline``); None for anything else. The shapes, with
    ``source`` ``aws.ec2`` and ``detail.instance-id``:

    - "EC2 Spot Instance Interruption Warning", ``detail.instance-action`` terminate/stop/hibernate
      (spot-instance-termination-notices.html): EC2 acts two minutes after ``time``;
    - "EC2 Instance Rebalance Recommendation" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/
      rebalance-recommendations.html): elevated risk, no deadline;
    - "EC2 Instance State-change Notification", ``detail.state`` (https://docs.aws.amazon.com/AWSEC2/
      latest/UserGuide/monitoring-instance-state-changes.html): only the states of a node going away.
    """
    try:
        event = json.loads(body) if isinstance(body, str) else None
        if not isinstance(event, dict) or event.get("source") != "aws.ec2":
            return None
        detail = event["detail"]
        instance = str(detail["instance-id"])
        at = datetime.fromisoformat(str(event["time"]).replace("Z", "+00:00"))
        region = str(event["region"])
    except (ValueError, KeyError, TypeError):
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    kind = event.get("detail-type")
    if kind == "EC2 Spot Instance Interruption Warning":
        return {
            "kind": "interruption",
            "instance": instance,
            "region": region,
            "at": at,
            "deadline": at + SPOT_NOTICE,
        }
    if kind == "EC2 Instance Rebalance Recommendation":
        return {"kind": "rebalance", "instance": instance, "region": region, "at": at, "deadline": None}
    if kind == "EC2 Instance State-change Notification" and detail.get("state") in _GONE_STATES:
        return {"kind": "state-change", "instance": instance, "region": region, "at": at, "deadline": at}
    return None


def _network_cards(net: Mapping[str, Any]) -> int:
    """The network cards of an instance type (``NetworkInfo``): ``MaximumNetworkCards``, else the
    ``NetworkCards`` list's length, else 1."""
    return int(net.get("MaximumNetworkCards") or len(net.get("NetworkCards") or []) or 1)


#: interface types that take a private IPv4 address from the subnet (``efa-only`` takes none)
_IP_INTERFACES = {"interface", "efa"}


def _ips_per_node(template_data: Mapping[str, Any]) -> int:
    """The subnet addresses one node launched from ``template_data`` takes: one per interface that is not
    ``efa-only`` (1 with no explicit interfaces: the default primary one)."""
    interfaces = template_data.get("NetworkInterfaces") or []
    return sum(1 for i in interfaces if i.get("InterfaceType", "interface") in _IP_INTERFACES) or 1


# ----------------------------------------------------------------------------------------------------------
# the provider


class AwsProvider:
    """gpuplan's protocol over EC2: one client per region, made on first use."""

    cloud = CLOUD
    # an ODCR takes the cluster placement group's ARN; Capacity Blocks for ML; rebalance recommendations,
    # which EC2 sends only as EventBridge events: they come only with aws.interruption_queue_url set (a
    # capability is static per class, so it is listed here and the setting's doc says what it needs)
    capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {
            Capability.GANG_RESERVATIONS,
            Capability.CAPACITY_BLOCKS,
            Capability.SPOT_PRICES,
            Capability.REBALANCE_SIGNALS,
        }
    )

    def __init__(
        self,
        settings: AwsSettings,
        *,
        session: Any,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        self._session = session
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._clients: dict[str, Any] = {}
        self._types: dict[tuple[str, str], dict[str, Any]] = {}  # (region, type) -> describe_instance_types
        self._templates: dict[tuple[str, str, str, str | None, str | None], str] = {}  # -> launch template id
        self._zones: dict[tuple[str, str], str] = {}  # (region, subnet) -> AZ
        self._blocks: dict[str, tuple[str, CapacityBlockOffer]] = {}  # offer id -> (region, offer)
        #: queue URL -> receipt handles of the last interruption read there, deleted at the next
        self._read_before: dict[str, list[str]] = {}

    # -- the SDK boundary ----------------------------------------------------------------------------------

    def _client(self, region: str, service: str = "ec2") -> Any:
        client = self._clients.get(f"{service}/{region}")
        if client is None:
            from botocore.config import Config

            client = self._session.client(
                service,
                region_name=region,
                endpoint_url=self.settings.endpoint_url,
                config=Config(
                    retries={"max_attempts": 1, "mode": "standard"},
                    connect_timeout=self.settings.timeout_seconds,
                    read_timeout=self.settings.timeout_seconds,
                ),
            )
            self._clients[f"{service}/{region}"] = client
        return client

    def _call(self, region: str, operation: str, *, service: str = "ec2", **params: Any) -> dict[str, Any]:
        """``client.<operation>(**params)`` of ``service`` (EC2 unless said) in ``region``: errors mapped,
        throttling retried (bounded)."""
        method = getattr(self._client(region, service), operation)
        result: dict[str, Any] = sdk_call(
            lambda: method(**params),
            f"{operation} in {region}",
            errors=Exception,  # botocore's errors have no one base; _from_exception tells them apart
            to_provider_error=lambda exc, _where: _from_exception(exc, operation),
            policy=self.settings.retry,
            sleep=self._sleep,
            logger=log,
            rng=self._rng,
        )
        return result

    def _pages(self, region: str, operation: str, key: str, **params: Any) -> Iterator[dict[str, Any]]:
        """Every item under ``key`` across the pages (each page one wrapped call, so each is retried on
        its own rather than restarting the listing)."""
        token: str | None = None
        while True:
            page = self._call(region, operation, **params, **({"NextToken": token} if token else {}))
            yield from page.get(key) or []
            token = page.get("NextToken")
            if not token:
                return

    # -- settings ------------------------------------------------------------------------------------------

    def handles(self, offering: str) -> bool:
        return offering.split(":", 1)[0] == CLOUD

    def _regions(self) -> list[str]:
        """The regions inventory looks in: those with subnets configured (a region gpuplan can launch in
        needs them), else the session's own region."""
        regions = sorted(self.settings.subnets)
        if not regions and getattr(self._session, "region_name", None):
            regions = [self._session.region_name]
        return regions

    def _image(self, region: str) -> str:
        image = self.settings.image_id
        if isinstance(image, dict):
            image = image.get(region)
        if not image:
            raise InvalidRequest(
                f"no AMI to launch in {region}: set aws.image_id (one AMI id, or a map of region to AMI id)",
                cloud=CLOUD,
                operation="launch",
            )
        return image

    def _subnets(self, region: str) -> list[str]:
        subnets = self.settings.subnets.get(region) or []
        if not subnets:
            raise InvalidRequest(
                f"no subnets for {region}: set aws.subnets.{region} (a list of subnet ids)",
                cloud=CLOUD,
                operation="launch",
            )
        return subnets

    def _zone(self, region: str, subnet: str) -> str:
        key = (region, subnet)
        if key not in self._zones:
            found = self._call(region, "describe_subnets", SubnetIds=[subnet])["Subnets"]
            self._zones[key] = found[0]["AvailabilityZone"]
        return self._zones[key]

    def _instance_type(self, region: str, instance_type: str) -> dict[str, Any]:
        key = (region, instance_type)
        if key not in self._types:
            found = self._call(region, "describe_instance_types", InstanceTypes=[instance_type])[
                "InstanceTypes"
            ]
            if not found:
                raise InvalidRequest(f"unknown instance type {instance_type} in {region}", cloud=CLOUD)
            self._types[key] = found[0]
        return self._types[key]

    # -- offerings and prices ------------------------------------------------------------------------------

    def offerings(self, regions: Sequence[str]) -> list[OfferingInfo]:
        """GPU instance types (those with GpuInfo and at least one whole GPU) that each region sells; EFA
        types report one network interface per network card, which is what a gang node needs."""
        out: list[OfferingInfo] = []
        for region in regions:
            sold = {
                o["InstanceType"]
                for o in self._pages(
                    region, "describe_instance_type_offerings", "InstanceTypeOfferings", LocationType="region"
                )
            }
            for t in self._pages(region, "describe_instance_types", "InstanceTypes"):
                gpu = t.get("GpuInfo")
                if not gpu or t["InstanceType"] not in sold:
                    continue
                self._types[(region, t["InstanceType"])] = t
                gpus = gpu.get("Gpus") or [{}]
                count = sum(int(g.get("Count", 0)) for g in gpus)
                if count == 0:
                    continue  # a fraction of a GPU (g6f: GpuPartitionSize < 1); the planner counts whole GPUs
                net = t.get("NetworkInfo") or {}
                efa = bool(net.get("EfaSupported"))
                mib = gpus[0].get("MemoryInfo", {}).get("SizeInMiB")
                out.append(
                    OfferingInfo(
                        offering=f"{CLOUD}:{region}:{t['InstanceType']}",
                        gpu_model=gpus[0].get("Name"),
                        gpus_per_node=count,
                        gpu_memory_gb=mib / 1024 if mib else None,
                        fabric="efa" if efa else None,
                        network_interfaces=_network_cards(net) if efa else 1,
                    )
                )
        return sorted(out, key=lambda o: o.offering)

    def spot_prices(self, offerings: Sequence[str]) -> list[SpotPrice]:
        """The newest Linux spot price per offering and AZ (StartTime now: EC2 then returns the price in
        force now for each AZ)."""
        by_region: dict[str, list[str]] = {}
        for offering in offerings:
            if self.handles(offering):
                region, instance_type = _region_of(offering)
                by_region.setdefault(region, []).append(instance_type)
        newest: dict[tuple[str, str], SpotPrice] = {}
        for region, types in sorted(by_region.items()):
            rows = self._pages(
                region,
                "describe_spot_price_history",
                "SpotPriceHistory",
                InstanceTypes=sorted(set(types)),
                ProductDescriptions=[PLATFORM],
                StartTime=_now(),
            )
            for row in rows:
                offering = f"{CLOUD}:{region}:{row['InstanceType']}"
                price = SpotPrice(
                    offering, float(row["SpotPrice"]), row["Timestamp"], row.get("AvailabilityZone")
                )
                key = (offering, price.zone or "")
                if key not in newest or newest[key].at < price.at:
                    newest[key] = price
        return [newest[k] for k in sorted(newest)]

    # -- inventory -----------------------------------------------------------------------------------------

    def _node(self, region: str, inst: Mapping[str, Any]) -> Node:
        tags = _tags(inst)
        placement = inst.get("Placement") or {}
        return Node(
            id=inst["InstanceId"],
            offering=f"{CLOUD}:{region}:{inst['InstanceType']}",
            capacity=CapacityType.SPOT if inst.get("InstanceLifecycle") == "spot" else CapacityType.ON_DEMAND,
            pool=tags.get(TAG_POOL, ""),
            run=tags.get(TAG_RUN),
            placement_group=placement.get("GroupName") or None,
            reservation=inst.get("CapacityReservationId") or None,
            state=str((inst.get("State") or {}).get("Name", "pending")).lower(),
            zone=placement.get("AvailabilityZone"),
            launched=inst.get("LaunchTime"),
            tags=tags,
        )

    def _reservation(self, region: str, r: Mapping[str, Any]) -> CapacityReservation:
        tags = _tags(r)
        return CapacityReservation(
            name=tags.get("Name", r["CapacityReservationId"]),
            offering=f"{CLOUD}:{region}:{r['InstanceType']}",
            nodes=int(r.get("TotalInstanceCount", 0)),
            placement_group=_group_name_from_arn(r.get("PlacementGroupArn")),
            run=tags.get(TAG_RUN),
            id=r["CapacityReservationId"],
            state=str(r.get("State", "active")),
            tags=tags,
            block=r.get("ReservationType") == "capacity-block",
            starts=r.get("StartDate"),
            ends=r.get("EndDate") if r.get("ReservationType") == "capacity-block" else None,
        )

    @staticmethod
    def _group(region: str, g: Mapping[str, Any]) -> PlacementGroup:
        tags = _tags(g)
        return PlacementGroup(
            name=g["GroupName"],
            region=region,
            run=tags.get(TAG_RUN),
            id=g.get("GroupId"),
            state=str(g.get("State", "available")),
            tags=tags,
        )

    def _instances(self, region: str, plan: str, states: list[str] | None) -> Iterator[dict[str, Any]]:
        filters = _tag_filters({TAG_PLAN: plan})
        if states:
            filters.append({"Name": "instance-state-name", "Values": states})
        for res in self._pages(region, "describe_instances", "Reservations", Filters=filters):
            yield from res.get("Instances") or []

    def inventory(self, plan_id: str) -> Inventory:
        """Instances (not terminated), cluster placement groups and live capacity reservations that carry
        ``gpuplan-plan``, in every configured region."""
        plan = safe_name(plan_id)
        nodes: list[Node] = []
        groups: list[PlacementGroup] = []
        reservations: list[CapacityReservation] = []
        for region in self._regions():
            nodes.extend(self._node(region, i) for i in self._instances(region, plan, _LIVE_STATES))
            found = self._call(region, "describe_placement_groups", Filters=_tag_filters({TAG_PLAN: plan}))
            groups.extend(self._group(region, g) for g in found.get("PlacementGroups") or [])
            filters = [
                *_tag_filters({TAG_PLAN: plan}),
                {"Name": "state", "Values": ["active", "pending", "scheduled"]},
            ]
            for r in self._pages(
                region, "describe_capacity_reservations", "CapacityReservations", Filters=filters
            ):
                reservations.append(self._reservation(region, r))
        return Inventory(tuple(nodes), tuple(groups), tuple(reservations))

    # -- placement groups and reservations -----------------------------------------------------------------

    def ensure_placement_group(self, spec: PlacementGroupSpec) -> PlacementGroup:
        """A cluster placement group named ``spec.name``. EC2 names are unique per region, so a Duplicate
        is either ours (adopted) or someone else's (Conflict). CreatePlacementGroup takes no ClientToken:
        the name is what makes it idempotent."""
        region = spec.region
        try:
            made = self._call(
                region,
                "create_placement_group",
                GroupName=spec.name,
                Strategy="cluster",
                TagSpecifications=_tag_specs(spec.tags, "placement-group"),
            )
        except Conflict:
            found = self._call(region, "describe_placement_groups", GroupNames=[spec.name])["PlacementGroups"]
            if found and tags_match(_tags(found[0]), spec.tags):
                log.info("placement group %s in %s exists with our tags: adopted", spec.name, region)
                return self._group(region, found[0])
            raise Conflict(
                f"placement group {spec.name} exists in {region} without our tags",
                cloud=CLOUD,
                operation="create_placement_group",
            ) from None
        log.info("created cluster placement group %s in %s (%d nodes)", spec.name, region, spec.nodes)
        group = made.get("PlacementGroup") or {"GroupName": spec.name, "Tags": _tag_list(spec.tags)}
        return self._group(region, group)

    def _find_reservation(self, region: str, name: str, tags: Mapping[str, str]) -> dict[str, Any] | None:
        filters = [*_tag_filters({"Name": name}), {"Name": "state", "Values": ["active", "pending"]}]
        for r in self._pages(
            region, "describe_capacity_reservations", "CapacityReservations", Filters=filters
        ):
            if tags_match(_tags(r), tags):
                return r
        return None

    def ensure_reservation(self, spec: ReservationSpec) -> CapacityReservation:
        """A targeted ODCR for the gang in its cluster group; ours (by name tag and our tags) is returned if
        it exists, and ClientToken covers a lost reply. The zones of the region's subnets are tried in the
        order the subnets are configured: a zone without the capacity (InsufficientInstanceCapacity, the
        answer EC2 gives a whole-gang ODCR most often) passes the request to the next, and only when none
        has it is it InsufficientCapacity, naming the zones tried. The gang's launch then takes the subnet
        in the reservation's zone. ``spec.other_zones`` False (the plan's fallback has no ``other-zone``):
        the first zone only."""
        region, instance_type = _region_of(spec.offering)
        tags = {**spec.tags, "Name": spec.name}
        found = self._find_reservation(region, spec.name, spec.tags)
        if found is not None:
            return self._reservation(region, found)
        params: dict[str, Any] = {
            "InstanceType": instance_type,
            "InstancePlatform": PLATFORM,
            "InstanceCount": spec.nodes,
            "InstanceMatchCriteria": "targeted",
            "EndDateType": "unlimited",
            "TagSpecifications": _tag_specs(tags, "capacity-reservation"),
        }
        if spec.ends is not None:  # EC2 cancels it then: no reservation bills on after its run
            params["EndDateType"] = "limited"
            params["EndDate"] = spec.ends
        if spec.placement_group:
            groups = self._call(region, "describe_placement_groups", GroupNames=[spec.placement_group])
            params["PlacementGroupArn"] = groups["PlacementGroups"][0]["GroupArn"]
        subnet_of: dict[str, str] = {}  # zone -> the first subnet in it (the one its gang launches from)
        for subnet in self._subnets(region):
            subnet_of.setdefault(self._zone(region, subnet), subnet)
        zones = list(subnet_of)
        if not spec.other_zones:  # the plan allows the first zone only (its fallback has no other-zone)
            zones = zones[:1]
        refused: list[str] = []
        too_small: list[InvalidRequest] = []
        for zone in zones:
            try:  # a zone whose subnet cannot hold the gang's addresses would hold a reservation for nothing
                run = spec.tags.get(TAG_RUN, spec.name)
                self._check_addresses(region, subnet_of[zone], spec.nodes, 1, run, "ensure_reservation")
            except InvalidRequest as small:
                too_small.append(small)
                log.warning("not reserving %s in %s: %s", spec.name, zone, small)
                continue
            # one token per zone: a retry in the same zone is deduped, a request in the next one is new
            token = spec.token if not refused else client_token(spec.token, zone)
            try:
                made = self._call(
                    region, "create_capacity_reservation", ClientToken=token, AvailabilityZone=zone, **params
                )["CapacityReservation"]
            except InsufficientCapacity as exc:
                refused.append(zone)
                log.warning("no capacity for reservation %s in %s (%s); next zone", spec.name, zone, exc.code)
                continue
            log.info(
                "created capacity reservation %s (%s) for %d x %s in %s%s",
                spec.name,
                made.get("CapacityReservationId"),
                spec.nodes,
                instance_type,
                zone,
                f" (no capacity in {', '.join(refused)})" if refused else "",
            )
            return self._reservation(region, made)
        if not refused and too_small:  # no zone was even asked: the subnets are the problem
            raise too_small[0]
        raise InsufficientCapacity(
            f"no zone can reserve {spec.nodes} x {instance_type} for {spec.name} "
            f"(tried {', '.join(refused)}"
            f"{'' if spec.other_zones else '; the plan allows no other zone'})",
            cloud=CLOUD,
            operation="create_capacity_reservation",
            code="InsufficientInstanceCapacity",
        )

    def _reservation_target(self, region: str, reservation: str) -> tuple[str, bool, str | None]:
        """The id of the live reservation named ``reservation`` (its Name tag), or of the one whose id it
        is (cr- and hex digits), whether it is a Capacity Block (whose nodes launch with the
        ``capacity-block`` market type), and its zone."""
        filters = _tag_filters({"Name": reservation})
        found = [
            r
            for r in self._pages(
                region, "describe_capacity_reservations", "CapacityReservations", Filters=filters
            )
            if r.get("State") in ("active", "pending", "scheduled")
        ]
        if not found and _RESERVATION_ID.fullmatch(reservation):
            found = self._call(
                region, "describe_capacity_reservations", CapacityReservationIds=[reservation]
            )["CapacityReservations"]
        if not found:
            raise NotFound(
                f"no capacity reservation named {reservation} in {region}", cloud=CLOUD, operation="launch"
            )
        first = found[0]
        block = first.get("ReservationType") == "capacity-block"
        return str(first["CapacityReservationId"]), block, first.get("AvailabilityZone")

    # -- launching -----------------------------------------------------------------------------------------

    def _template_data(
        self, region: str, instance_type: str, fabric: str | None, subnet: str | None = None
    ) -> dict[str, Any]:
        """The LaunchTemplateData of :meth:`_template` (no call but a cached describe_instance_types)."""
        data: dict[str, Any] = {"ImageId": self._image(region), "InstanceType": instance_type}
        if self.settings.key_name:
            data["KeyName"] = self.settings.key_name
        if fabric == "efa":
            info = self._instance_type(region, instance_type)
            net = info.get("NetworkInfo") or {}
            if not net.get("EfaSupported"):
                raise InvalidRequest(f"{instance_type} does not support EFA", cloud=CLOUD, operation="launch")
            subnet = subnet or self._subnets(region)[0]
            data["NetworkInterfaces"] = [
                {
                    "NetworkCardIndex": card,
                    "DeviceIndex": 0 if card == 0 else 1,
                    "InterfaceType": "efa" if card == 0 else "efa-only",
                    "SubnetId": subnet,
                    "DeleteOnTermination": True,
                    **(
                        {"Groups": list(self.settings.security_group_ids)}
                        if self.settings.security_group_ids
                        else {}
                    ),
                }
                for card in range(_network_cards(net))
            ]
        elif fabric is not None:
            raise InvalidRequest(f"AWS has no {fabric} fabric (only efa)", cloud=CLOUD, operation="launch")
        elif self.settings.security_group_ids:
            data["SecurityGroupIds"] = list(self.settings.security_group_ids)
        return data

    def _template(
        self, region: str, instance_type: str, fabric: str | None, plan: str, subnet: str | None = None
    ) -> str:
        """The launch template for (type, fabric): the AMI, and for EFA one interface per network card, as
        AWS advises for instances with several cards ("Maximize network bandwidth on Amazon EC2 instances
        with multiple network cards",
        https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html): the primary
        interface (card 0, device index 0) is ``efa`` (EFA with ENA, the node's one private IP), every
        other card an ``efa-only`` interface at device index 1, which takes no IP address (a p5.48xlarge:
        1 + 31, so a gang of 16 takes 16 of its subnet's addresses, not 512). The cards are counted from
        ``describe_instance_types`` (``NetworkInfo.MaximumNetworkCards``). Its name carries a digest of
        its data, so changed settings get a new template instead of silently reusing a stale one."""
        key = (region, instance_type, plan, fabric, subnet)
        if key in self._templates:
            return self._templates[key]
        data = self._template_data(region, instance_type, fabric, subnet)
        digest = client_token(json.dumps(data, sort_keys=True))
        name = safe_name(f"gpuplan-{plan}-{instance_type}-{fabric or 'ena'}-{digest[:8]}", limit=128)
        found = self._call(
            region, "describe_launch_templates", Filters=[{"Name": "launch-template-name", "Values": [name]}]
        )["LaunchTemplates"]
        if found:
            template_id = str(found[0]["LaunchTemplateId"])
        else:
            made = self._call(
                region,
                "create_launch_template",
                LaunchTemplateName=name,
                LaunchTemplateData=data,
                ClientToken=client_token(name),
                TagSpecifications=_tag_specs({TAG_PLAN: plan}, "launch-template"),
            )
            template_id = str(made["LaunchTemplate"]["LaunchTemplateId"])
            log.info(
                "created launch template %s in %s (%d network interfaces)",
                name,
                region,
                len(data.get("NetworkInterfaces", [])) or 1,
            )
        self._templates[key] = template_id
        return template_id

    def launch(self, spec: LaunchSpec) -> list[Node]:
        """Launch ``spec.count`` nodes tagged ``spec.tags``, with ``spec.token`` as EC2's ClientToken.

        A gang is one ``run_instances`` with MinCount = MaxCount: EC2 launches all of it or none. A pool is
        an instant EC2 Fleet; when the fleet makes fewer nodes than asked, the ones it made are kept (they
        carry our tags, so the next inventory counts them and the next apply tops the pool up) and the
        error its ``Errors[]`` names (InsufficientCapacity if none) is raised, saying how many are short,
        with the made nodes on the exception's ``launched`` (``ProviderError.launched``).
        """
        region, instance_type = _region_of(spec.offering)
        if spec.count < 1:
            raise InvalidRequest(f"launch of {spec.count} nodes", cloud=CLOUD, operation="launch")
        if spec.reservation and spec.capacity is CapacityType.SPOT:
            raise InvalidRequest(
                f"spot nodes cannot use capacity reservation {spec.reservation} (an ODCR is on-demand)",
                cloud=CLOUD,
                operation="launch",
            )
        plan = spec.tags.get(TAG_PLAN, "x")
        subnets = self._subnets(region)
        fabric = spec.fabric if spec.all_or_nothing else None
        if not spec.all_or_nothing:
            template = self._template(region, instance_type, fabric, plan)
            return self._launch_fleet(region, instance_type, spec, template, subnets)
        # a gang: one subnet, in its reservation's zone when it has one (ensure_reservation may have found
        # capacity in another zone than the first subnet's)
        target = self._reservation_target(region, spec.reservation) if spec.reservation else None
        subnet = subnets[0]
        if target is not None and target[2] is not None:
            subnet = next((n for n in subnets if self._zone(region, n) == target[2]), subnet)
        # before anything is made: the gang must fit its one subnet
        per_node = _ips_per_node(self._template_data(region, instance_type, fabric, subnet))
        self._check_addresses(region, subnet, spec.count, per_node, spec.run, "launch")
        template = self._template(
            region, instance_type, fabric, plan, None if subnet == subnets[0] else subnet
        )
        return self._launch_gang(region, spec, template, subnet, target)

    def _check_addresses(
        self, region: str, subnet: str, nodes: int, per_node: int, run: str | None, operation: str
    ) -> None:
        """InvalidRequest (code InsufficientFreeAddressesInSubnet, as EC2 would say it after the fact)
        unless ``subnet`` has the private addresses a gang of ``nodes`` takes: nodes x the IP-bearing
        interfaces of each (``AvailableIpAddressCount`` of describe_subnets, which already leaves out the 5
        addresses AWS keeps in every subnet). A gang launches all or nothing in one subnet: one that
        cannot fit is refused here, naming the subnet and the figures, before its reservation, launch
        template or instances are made, rather than as EC2's error after the fact."""
        (found,) = self._call(region, "describe_subnets", SubnetIds=[subnet])["Subnets"]
        self._zones[(region, subnet)] = found["AvailabilityZone"]
        available = int(found.get("AvailableIpAddressCount", 0))
        needed = nodes * per_node
        if available < needed:
            raise InvalidRequest(
                f"subnet {subnet} ({found['AvailabilityZone']}) has {available} free IP addresses; gang "
                f"{run} needs {needed} ({nodes} nodes x {per_node}): use a larger subnet first "
                f"in aws.subnets.{region}",
                cloud=CLOUD,
                operation=operation,
                code="InsufficientFreeAddressesInSubnet",
            )
        log.info("subnet %s has %d free addresses; gang %s takes %d", subnet, available, run, needed)

    def _launch_gang(
        self,
        region: str,
        spec: LaunchSpec,
        template: str,
        subnet: str,
        target: tuple[str, bool, str | None] | None,
    ) -> list[Node]:
        params: dict[str, Any] = {
            "MinCount": spec.count,
            "MaxCount": spec.count,
            "LaunchTemplate": {"LaunchTemplateId": template, "Version": "$Latest"},
            "TagSpecifications": _tag_specs(spec.tags, "instance", "volume"),
            "ClientToken": spec.token,
        }
        if spec.fabric != "efa":
            params["SubnetId"] = subnet  # EFA templates name the subnet on each interface
        if spec.placement_group:
            params["Placement"] = {"GroupName": spec.placement_group}
        if spec.capacity is CapacityType.SPOT:
            params["InstanceMarketOptions"] = {
                "MarketType": "spot",
                "SpotOptions": {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"},
            }
        if target is not None:
            reservation, block, _ = target
            params["CapacityReservationSpecification"] = {
                "CapacityReservationTarget": {"CapacityReservationId": reservation}
            }
            if block:  # a Capacity Block's nodes launch on its own market type
                params["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
        made = self._call(region, "run_instances", **params)
        nodes = [self._node(region, i) for i in made.get("Instances") or []]
        log.info(
            "launched gang %s: %d x %s (%s) in %s, placement group %s, reservation %s",
            spec.run,
            len(nodes),
            spec.offering,
            spec.capacity.value,
            region,
            spec.placement_group,
            spec.reservation,
        )
        return nodes

    def _launch_fleet(
        self, region: str, instance_type: str, spec: LaunchSpec, template: str, subnets: list[str]
    ) -> list[Node]:
        spot = spec.capacity is CapacityType.SPOT
        # the target is in units of instances: EC2 Fleet's default unit (TargetCapacityUnitType is only
        # accepted with attribute-based instance selection)
        made = self._call(
            region,
            "create_fleet",
            Type="instant",
            ClientToken=spec.token,
            LaunchTemplateConfigs=[
                {
                    "LaunchTemplateSpecification": {"LaunchTemplateId": template, "Version": "$Latest"},
                    "Overrides": [{"InstanceType": instance_type, "SubnetId": s} for s in subnets],
                }
            ],
            TargetCapacitySpecification={
                "TotalTargetCapacity": spec.count,
                "OnDemandTargetCapacity": 0 if spot else spec.count,
                "SpotTargetCapacity": spec.count if spot else 0,
                "DefaultTargetCapacityType": "spot" if spot else "on-demand",
            },
            SpotOptions={
                "AllocationStrategy": "price-capacity-optimized",
                "InstanceInterruptionBehavior": "terminate",
            },
            OnDemandOptions={"AllocationStrategy": "lowest-price"},
            TagSpecifications=_tag_specs(spec.tags, "instance", "fleet"),
        )
        ids = [i for group in made.get("Instances") or [] for i in group.get("InstanceIds") or []]
        nodes: list[Node] = []
        for chunk in _chunks(ids, _FILTER_BATCH):
            for res in self._pages(region, "describe_instances", "Reservations", InstanceIds=chunk):
                nodes.extend(self._node(region, i) for i in res.get("Instances") or [])
        log.info(
            "launched fleet %s for pool %s: %d of %d x %s (%s) in %s",
            made.get("FleetId"),
            spec.pool,
            len(nodes),
            spec.count,
            spec.offering,
            spec.capacity.value,
            region,
        )
        if len(ids) < spec.count:
            errors = made.get("Errors") or []
            first = errors[0] if errors else {}
            short = spec.count - len(ids)
            exc = _error(
                first.get("ErrorCode") or "InsufficientInstanceCapacity",
                f"fleet made {len(ids)} of {spec.count} nodes for pool {spec.pool} ({short} short): "
                + (first.get("ErrorMessage") or "no error given"),
                "create_fleet",
            )
            exc.launched = tuple(nodes)
            raise exc
        return nodes

    # -- removing ------------------------------------------------------------------------------------------

    def terminate(self, nodes: Sequence[Node]) -> None:
        """Terminate in batches per region. EC2 refuses a whole batch when one id is gone, so a batch that
        hits NotFound is retried one id at a time, each gone one counting as done."""
        by_region: dict[str, list[str]] = {}
        for node in nodes:
            by_region.setdefault(_region_of(node.offering)[0], []).append(node.id)
        for region, ids in sorted(by_region.items()):
            for batch in _chunks(ids, _TERMINATE_BATCH):
                try:
                    self._call(region, "terminate_instances", InstanceIds=batch)
                    log.info("terminated %d instances in %s: %s", len(batch), region, ", ".join(batch))
                except NotFound:
                    for one in batch:
                        try:
                            self._call(region, "terminate_instances", InstanceIds=[one])
                            log.info("terminated instance %s in %s", one, region)
                        except NotFound:
                            log.info("instance %s in %s is gone already", one, region)

    def release_reservation(self, reservation: CapacityReservation) -> None:
        region, _ = _region_of(reservation.offering)
        try:
            rid = reservation.id or self._reservation_target(region, reservation.name)[0]
            self._call(region, "cancel_capacity_reservation", CapacityReservationId=rid)
        except NotFound:
            log.info("capacity reservation %s in %s is gone already", reservation.name, region)
            return
        log.info("cancelled capacity reservation %s (%s) in %s", reservation.name, rid, region)

    def delete_placement_group(self, group: PlacementGroup) -> None:
        try:
            self._call(group.region, "delete_placement_group", GroupName=group.name)
        except NotFound:
            log.info("placement group %s in %s is gone already", group.name, group.region)
            return
        log.info("deleted placement group %s in %s", group.name, group.region)

    # -- interruptions -------------------------------------------------------------------------------------

    def interruptions(self, plan_id: str) -> list[Interruption]:
        """Spot interruption warnings and rebalance recommendations for our nodes: from the interruption
        queue when ``interruption_queue_url`` is set (:meth:`_queued_interruptions`, as Karpenter's
        interruption controller reads its queue), else from the EC2 API (:meth:`_polled_interruptions`,
        which sees no rebalance recommendations)."""
        queues = self.settings.interruption_queue_url
        if not queues:
            return self._polled_interruptions(plan_id)
        urls = sorted(queues.items()) if isinstance(queues, dict) else [(self._queue_region(queues), queues)]
        found: list[Interruption] = []
        for region, url in urls:
            found.extend(self._queued_interruptions(plan_id, region, url))
        return sorted(found, key=lambda i: (i.node_id, i.kind))

    def _queue_region(self, url: str) -> str:
        """The queue's region, from its URL (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME), else the
        first region gpuplan manages (a local endpoint's URL names none)."""
        found = re.search(r"sqs[.-]([a-z]{2}(?:-[a-z]+)+-\d+)\.", url)
        regions = self._regions()
        return found.group(1) if found else (regions[0] if regions else "us-east-1")

    def _queued_interruptions(self, plan_id: str, region: str, url: str) -> list[Interruption]:
        """Notices from the SQS queue an EventBridge rule fills with EC2's events.

        Delivery, at least once: the messages of the *previous* call are deleted first, at the start of
        this one, because the caller has recorded what that call returned by now; the messages read now
        stay in the queue, hidden for ``interruption_visibility_seconds``, until the next call deletes
        them. A crash between the two leaves them there, and they come again once visible: callers drop
        repeats (:meth:`Provider.interruptions`). Then up to ``interruption_max_messages`` messages are
        received, 10 at a time (SQS's most), the first receive long-polling ``interruption_wait_seconds``
        and the rest not waiting, until the queue is empty.

        Each message's body is one EventBridge event, parsed by :func:`_parse_event`: a spot
        interruption warning (deadline: the event's time + 2 minutes), a rebalance recommendation (no
        deadline), or a state change to shutting-down/terminated/stopping/stopped of a spot node that EC2
        reclaimed (its ``StateReason`` is ``Server.SpotInstanceTermination``; a node gpuplan terminated
        itself is no interruption). Only our plan's nodes are reported (looked up by id and
        ``gpuplan-plan`` tag in the event's region); a message that is not such an event is logged and
        deleted at once, and never fails the call."""
        plan = safe_name(plan_id)
        self._delete_messages(region, url, self._read_before.pop(url, []))
        events: list[tuple[dict[str, Any], str]] = []  # (event, receipt handle)
        garbled: list[str] = []
        seen: set[object] = set()
        cap = self.settings.interruption_max_messages
        while len(events) + len(garbled) < cap:
            got = self._call(
                region,
                "receive_message",
                service="sqs",
                QueueUrl=url,
                MaxNumberOfMessages=min(10, cap - len(events) - len(garbled)),
                WaitTimeSeconds=0 if events or garbled else self.settings.interruption_wait_seconds,
                VisibilityTimeout=self.settings.interruption_visibility_seconds,
            )
            batch = [m for m in got.get("Messages") or [] if m.get("MessageId") not in seen]
            if not batch:
                break  # empty, or only messages read already in this call (their hiding ran out)
            for message in batch:
                seen.add(message.get("MessageId"))
                event = _parse_event(message.get("Body"))
                if event is None:
                    log.warning(
                        "interruption queue message %s is not an EC2 event gpuplan reads: deleted (%.200s)",
                        message.get("MessageId"),
                        message.get("Body"),
                    )
                    garbled.append(message["ReceiptHandle"])
                else:
                    events.append((event, message["ReceiptHandle"]))
        self._delete_messages(region, url, garbled)
        self._read_before[url] = [handle for _, handle in events]
        return self._ours(plan, [event for event, _ in events])

    def _ours(self, plan: str, events: list[dict[str, Any]]) -> list[Interruption]:
        """The events about this plan's nodes as Interruptions (one per node and kind, the earliest)."""
        managed = set(self._regions())
        by_region: dict[str, list[dict[str, Any]]] = {}
        for event in events:
            if event["region"] in managed:
                by_region.setdefault(event["region"], []).append(event)
            else:
                log.info(
                    "interruption event for %s in %s: not a region of ours",
                    event["instance"],
                    event["region"],
                )
        found: dict[tuple[str, str], Interruption] = {}
        for region, mine in sorted(by_region.items()):
            ids = sorted({e["instance"] for e in mine})
            instances: dict[str, dict[str, Any]] = {}
            for chunk in _chunks(ids, _FILTER_BATCH):
                filters = [{"Name": "instance-id", "Values": chunk}, *_tag_filters({TAG_PLAN: plan})]
                for res in self._pages(region, "describe_instances", "Reservations", Filters=filters):
                    instances.update({i["InstanceId"]: i for i in res.get("Instances") or []})
            for event in mine:
                inst = instances.get(event["instance"])
                if inst is None:
                    continue  # another plan's node, or someone else's
                kind = event["kind"]
                if kind == "state-change":
                    reason = (inst.get("StateReason") or {}).get("Code")
                    if inst.get("InstanceLifecycle") != "spot" or reason != "Server.SpotInstanceTermination":
                        continue  # terminated by its owner, not reclaimed
                    kind = "interruption"
                node = self._node(region, inst)
                key = (node.id, kind)
                notice = Interruption(
                    node.id, kind, event["at"], node.offering, node.pool, node.run, event["deadline"]
                )
                if key not in found or notice.at < found[key].at:
                    found[key] = notice
        return [found[k] for k in sorted(found)]

    def _delete_messages(self, region: str, url: str, handles: Sequence[str]) -> None:
        """Delete messages by receipt handle, 10 a call; a handle SQS no longer takes (the message came
        back and was read again) is logged: the message then comes once more, which callers allow."""
        for chunk in _chunks(list(handles), 10):
            done = self._call(
                region,
                "delete_message_batch",
                service="sqs",
                QueueUrl=url,
                Entries=[{"Id": str(n), "ReceiptHandle": h} for n, h in enumerate(chunk)],
            )
            for failed in done.get("Failed") or []:
                log.warning(
                    "interruption queue: message not deleted (%s): %s",
                    failed.get("Code"),
                    failed.get("Message"),
                )

    def _polled_interruptions(self, plan_id: str) -> list[Interruption]:
        """Spot notices EC2's API shows for our nodes: spot requests whose status is marked-for-termination,
        marked-for-stop or instance-terminated-*, and instances whose state reason is
        Server.SpotInstanceTermination.

        Rebalance recommendations are not reported: EC2 publishes them only in the instance metadata
        service (``/latest/meta-data/events/recommendations/rebalance``, reachable from the instance
        itself) and as EventBridge events ("EC2 Instance Rebalance Recommendation"), which only the
        interruption queue reads; no describe call returns them, and the two-minute interruption notice
        likewise appears in the API only as the spot request status used here (its deadline: the status's
        time + 2 minutes; a node already reclaimed: now).
        """
        plan = safe_name(plan_id)
        found: dict[str, Interruption] = {}
        for region in self._regions():
            spot: dict[str, Node] = {}
            for inst in self._instances(region, plan, None):
                node = self._node(region, inst)
                if node.capacity is not CapacityType.SPOT:
                    continue
                spot[node.id] = node
                if (inst.get("StateReason") or {}).get("Code") == "Server.SpotInstanceTermination":
                    now = _now()
                    found[node.id] = Interruption(
                        node.id, "interruption", now, node.offering, node.pool, node.run, now
                    )
            for chunk in _chunks(sorted(spot), _FILTER_BATCH):
                requests = self._pages(
                    region,
                    "describe_spot_instance_requests",
                    "SpotInstanceRequests",
                    Filters=[{"Name": "instance-id", "Values": chunk}],
                )
                for req in requests:
                    status = req.get("Status") or {}
                    code = str(status.get("Code", ""))
                    node_id = req.get("InstanceId")
                    if node_id in spot and (
                        code in _SPOT_NOTICE_CODES or code.startswith("instance-terminated-")
                    ):
                        n = spot[node_id]
                        at = status.get("UpdateTime") or _now()
                        notice = Interruption(
                            node_id, "interruption", at, n.offering, n.pool, n.run, at + SPOT_NOTICE
                        )
                        found.setdefault(node_id, notice)
        return [found[k] for k in sorted(found)]

    # -- quotas --------------------------------------------------------------------------------------------

    def quotas(self, wanted: Sequence[tuple[str, CapacityType]]) -> list[Quota]:
        """The EC2 vCPU quotas of Service Quotas (service code ``ec2``) that launches of ``wanted`` count
        against: per region, one per instance family and market (:data:`VCPU_QUOTAS`), its value from
        ``get_service_quota`` (the account's applied value; the AWS default where none is applied).

        ``per_node`` is the instance type's ``VCpuInfo.DefaultVCpus`` (describe_instance_types), the unit
        these quotas count in. ``used`` is read from ``describe_instances`` of the whole account in the
        region, not only our nodes (a quota is the account's): the default vCPUs of its pending and running
        instances of the quota's family, spot ones for the spot quota and the others for the on-demand one.
        (AWS's own usage figure is the CloudWatch ``AWS/Usage`` metric ``ResourceCount``, which lags by
        minutes; the instances are what is running now.) The unused part of the account's active
        On-Demand Capacity Reservations is in use too: EC2 holds their capacity against the On-Demand
        limit (reservations are allowed up to that limit less the instances already running: EC2 User
        Guide, https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-reservations-limits.html), so
        ``AvailableInstanceCount`` x vCPUs of each counts in ``used`` and in ``reserved`` under its name
        (a launch into it takes no more). Capacity Blocks (``ReservationType`` ``capacity-block``) are
        left out (bought up front for dates of their own; not read here). Offerings of families
        without such a quota (Inf, Trn, DL, X, ...) count against none here. Sources: EC2 User Guide,
        "Amazon EC2 service quotas" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/
        ec2-resource-limits.html) and the Service Quotas console's codes for EC2."""
        per_region: dict[str, list[tuple[str, str, CapacityType]]] = {}
        for offering, capacity in wanted:
            if self.handles(offering):
                region, instance_type = _region_of(offering)
                per_region.setdefault(region, []).append((offering, instance_type, CapacityType(capacity)))
        found: list[Quota] = []
        for region, items in sorted(per_region.items()):
            counted: dict[str, dict[tuple[str, CapacityType], float]] = {}
            for offering, instance_type, capacity in items:
                code = _quota_code(instance_type, capacity)
                if code is not None:
                    vcpus = self._vcpus(region, [instance_type])[instance_type]
                    counted.setdefault(code, {})[(offering, capacity)] = float(vcpus)
            if not counted:
                continue
            usage, held = self._vcpus_in_use(region)
            for code, per_node in sorted(counted.items()):
                quota = self._service_quota(region, code)
                if quota is None:
                    continue
                found.append(
                    Quota(
                        name=f"{quota.get('QuotaName') or _QUOTA_NAMES[code]} ({code})",
                        region=region,
                        limit=float(quota["Value"]),
                        used=usage.get(code, 0.0),
                        unit="vCPUs",
                        per_node=per_node,
                        reserved=held.get(code, {}),
                    )
                )
        return found

    def _service_quota(self, region: str, code: str) -> dict[str, Any] | None:
        """The quota ``code`` of EC2 in ``region``: the applied value, else AWS's default; None when
        Service Quotas reports neither (left out, never guessed)."""
        for operation in ("get_service_quota", "get_aws_default_service_quota"):
            try:
                quota: dict[str, Any] = self._call(
                    region, operation, service="service-quotas", ServiceCode="ec2", QuotaCode=code
                )["Quota"]
                return quota
            except NotFound:
                continue
        log.info("Service Quotas reports no quota %s in %s: not checked", code, region)
        return None

    def _vcpus(self, region: str, types: Sequence[str]) -> dict[str, int]:
        """Default vCPUs of each instance type (describe_instance_types, cached; 100 types a call)."""
        missing = sorted({t for t in types if (region, t) not in self._types})
        for chunk in _chunks(missing, 100):
            for info in self._pages(region, "describe_instance_types", "InstanceTypes", InstanceTypes=chunk):
                self._types[(region, info["InstanceType"])] = info
        out: dict[str, int] = {}
        for name in types:
            known = self._types.get((region, name))
            if known is None:
                raise InvalidRequest(
                    f"unknown instance type {name} in {region}", cloud=CLOUD, operation="quotas"
                )
            out[name] = int((known.get("VCpuInfo") or {}).get("DefaultVCpus", 0))
        return out

    def _vcpus_in_use(self, region: str) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
        """Quota code -> default vCPUs of the account's pending and running instances in ``region`` and of
        the unused capacity of its active On-Demand Capacity Reservations; and quota code -> reservation
        name (its Name tag, else its id) -> the vCPUs of that unused capacity."""
        instances = [
            i
            for res in self._pages(
                region,
                "describe_instances",
                "Reservations",
                Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}],
            )
            for i in res.get("Instances") or []
        ]
        vcpus = self._vcpus(region, sorted({i["InstanceType"] for i in instances}))
        used: dict[str, float] = {}
        for inst in instances:
            capacity = (
                CapacityType.SPOT if inst.get("InstanceLifecycle") == "spot" else CapacityType.ON_DEMAND
            )
            code = _quota_code(inst["InstanceType"], capacity)
            if code is not None:
                used[code] = used.get(code, 0.0) + vcpus[inst["InstanceType"]]
        reservations = [
            r
            for r in self._pages(
                region,
                "describe_capacity_reservations",
                "CapacityReservations",
                Filters=[{"Name": "state", "Values": ["active"]}],
            )
            if r.get("ReservationType", "default") == "default"
            and int(r.get("AvailableInstanceCount", 0)) > 0
        ]
        vcpus = self._vcpus(region, sorted({r["InstanceType"] for r in reservations}))
        held: dict[str, dict[str, float]] = {}
        for r in reservations:
            code = _quota_code(r["InstanceType"], CapacityType.ON_DEMAND)
            if code is None:
                continue
            units = float(int(r["AvailableInstanceCount"]) * vcpus[r["InstanceType"]])
            used[code] = used.get(code, 0.0) + units
            name = _tags(r).get("Name", r["CapacityReservationId"])
            held.setdefault(code, {})[name] = held.get(code, {}).get(name, 0.0) + units
        return used, held

    # -- Capacity Blocks for ML ------------------------------------------------------------------------

    def capacity_block_offerings(
        self,
        offering: str,
        nodes: int,
        hours: int,
        start: datetime | None = None,
        end: datetime | None = None,
    ) -> list[CapacityBlockOffer]:
        """Capacity Blocks EC2 offers for ``nodes`` x ``offering`` for ``hours``, starting between
        ``start`` and ``end``; listing buys nothing."""
        region, instance_type = _region_of(offering)
        params: dict[str, Any] = {
            "InstanceType": instance_type,
            "InstanceCount": nodes,
            "CapacityDurationHours": hours,
        }
        if start is not None:
            params["StartDateRange"] = start
        if end is not None:
            params["EndDateRange"] = end
        offers: list[CapacityBlockOffer] = []
        for o in self._pages(region, "describe_capacity_block_offerings", "CapacityBlockOfferings", **params):
            offer = CapacityBlockOffer(
                id=o["CapacityBlockOfferingId"],
                offering=f"{CLOUD}:{region}:{o.get('InstanceType', instance_type)}",
                zone=o.get("AvailabilityZone"),
                nodes=int(o.get("InstanceCount", nodes)),
                start=o.get("StartDate"),
                end=o.get("EndDate"),
                hours=int(o.get("CapacityBlockDurationHours", hours)),
                upfront_usd=float(o.get("UpfrontFee", "nan")),
                currency=str(o.get("CurrencyCode", "USD")),
            )
            self._blocks[offer.id] = (region, offer)
            offers.append(offer)
        return offers

    def purchase_capacity_block(
        self, offering_id: str, *, max_usd: float, token: str, tags: Mapping[str, str] | None = None
    ) -> CapacityReservation:
        """Buy a Capacity Block listed by :meth:`capacity_block_offerings` in this provider, only if its
        upfront fee is at most ``max_usd``. EC2's purchase takes no client token, so the block is tagged
        with ``token`` and a repeated purchase with the same token returns the block already bought."""
        if offering_id not in self._blocks:
            raise InvalidRequest(
                f"capacity block offering {offering_id} was not listed: list the offerings first",
                cloud=CLOUD,
                operation="purchase_capacity_block",
            )
        region, offer = self._blocks[offering_id]
        if offer.currency != "USD" or not offer.upfront_usd <= max_usd:
            raise InvalidRequest(
                f"capacity block {offering_id} costs {offer.upfront_usd:.2f} {offer.currency} upfront, "
                f"over the cap of {max_usd:.2f} USD: not bought",
                cloud=CLOUD,
                operation="purchase_capacity_block",
            )
        filters = _tag_filters({TAG_PURCHASE: token})
        for r in self._pages(
            region, "describe_capacity_reservations", "CapacityReservations", Filters=filters
        ):
            log.info("capacity block for token %s was bought already: %s", token, r["CapacityReservationId"])
            return self._reservation(region, r)
        all_tags = {**(tags or {}), TAG_PURCHASE: token}
        bought = self._call(
            region,
            "purchase_capacity_block",
            CapacityBlockOfferingId=offering_id,
            InstancePlatform=PLATFORM,
            TagSpecifications=_tag_specs(all_tags, "capacity-reservation"),
        )["CapacityReservation"]
        log.info(
            "bought capacity block %s: %d x %s for %d h, %.2f USD upfront (cap %.2f)",
            offering_id,
            offer.nodes,
            offer.offering,
            offer.hours,
            offer.upfront_usd,
            max_usd,
        )
        return self._reservation(region, bought)

    def capacity_blocks_held(self) -> list[CapacityReservation]:
        """The account's Capacity Blocks awaiting payment, scheduled or active, in every configured region
        and every region a block was listed in. DescribeCapacityReservations has no filter on the
        reservation type (its documented filters: EC2 API Reference), so the states are filtered by EC2
        and ``ReservationType: capacity-block`` here."""
        regions = sorted({*self._regions(), *(region for region, _ in self._blocks.values())})
        filters = [{"Name": "state", "Values": list(_BLOCK_HELD_STATES)}]
        return [
            self._reservation(region, r)
            for region in regions
            for r in self._pages(
                region, "describe_capacity_reservations", "CapacityReservations", Filters=filters
            )
            if r.get("ReservationType") == "capacity-block"
        ]


def _conforms(provider: AwsProvider) -> Provider:
    """Never called: mypy checks here that AwsProvider has every call of the Provider protocol."""
    return provider
