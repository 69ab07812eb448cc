"""Speed and memory of ``gpuplan catalog fetch`` against the loopback price-API stand-ins, at real volumes.

    PYTHONPATH=. python bench/price_fetch_bench.py [--rows aws aws-x30 gcp azure azure-stress] [--profile ROW]

Issue 37's target: a fetch of one cloud's GPU offerings in the regions a scenario names finishes in under a
minute against the stand-ins on 2 cores, and parsing is streamed (never a whole price list in memory). Each
row serves one cloud's stand-in (``tests/integration/{aws,gcp,azure}_price_fake.py``, as the tests start them)
loaded with the volumes the real APIs answer, and runs ``providers.pricing.<cloud>.fetch`` against it:

- ``aws``: the 4 US regions (us-east-1, us-east-2, us-west-1, us-west-2; the scenarios name the first two),
  every GPU instance type of moto's EC2 data (65) in each, each Price List item with its 12 Reserved terms
  (1y/3y x standard/convertible x 3 payment options) at GetProducts' page size of 100; Savings Plans rates for
  Compute and EC2Instance x 1y/3y x 3 payment options (12 per type, pages of 1,000); 7 days (and the price in
  force before them) of spot history in 3-6 zones per type, a change every 1-3 h per zone (pages of 1,000).
  DescribeInstanceTypes goes on to moto's ThreadedMotoServer (warmed first: its first EC2 call loads its
  data).
- ``aws-x30``: the same with each region's price list served 30 times over (every item repeated: ~86 MB of
  price-list JSON instead of ~2.9 MB), to see whether the fetch's memory follows the volume it reads.
- ``gcp``: the regions of ``scenarios/training-heavy-lab.yaml`` (us-central1, us-east4; the fixtures' machine
  types), and a Cloud Billing Catalog of 40,000 Compute Engine SKUs (the real catalog's size) in pages of
  5,000: the fixtures' SKUs spread among SKUs of the other series, GPUs, regions, storage, network and
  licences, in the catalog's spellings and shapes.
- ``azure``: 4 regions, each with its Virtual Machines NC/ND meters as the Retail Prices API lists them (29
  sizes x Linux, Spot, Windows, Dev/Test and 1/3/5-year reservation items, Low Priority for the old series:
  258 items), pages of 1,000; ``azure-stress``: 10 regions x 3,000 items (each meter with 12 price-history
  items, older ones first, the list cut at 3,000).

Figures per row: the fetch's wall seconds (measured inside the fetching process, around ``fetch`` only), its
ratio to the 60 s target, the fetching process's CPU seconds and the stand-in's (the stand-ins and moto run in
the parent process, the fetch in a spawned child, so on 2 cores they share the machine as a remote API would
not), requests and MB the stand-in served, the fetch's peak RSS growth (``VmHWM`` reset through
``/proc/self/clear_refs`` just before ``fetch``, minus the RSS then: the SDKs are imported before), offerings,
terms, warnings and failed regions. ``--profile ROW`` runs that row under cProfile (each fetch thread profiled
on its own, merged) and prints the 25 costliest functions by their own time and cumulative time.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import itertools
import json
import multiprocessing
import os
import platform
import random
import re
import resource
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
INTEGRATION = ROOT / "tests" / "integration"
for entry in (str(ROOT), str(INTEGRATION)):  # the packages and the stand-ins, in the child too
    if entry not in sys.path:
        sys.path.insert(0, entry)

TARGET_S = 60.0
NOW = datetime(2026, 12, 1, tzinfo=UTC)
SEED = 37
MiB = 2**20
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
#: Fake credentials and no shared config, so nothing here can reach a real AWS account (as ``aws_env``).
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "AKIAFAKEFAKEFAKEFAKE",
    "AWS_SECRET_ACCESS_KEY": "gpuplan-FAKE-SECRET-bench",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_EC2_METADATA_DISABLED": "true",
}
AWS_UNSET = (
    "AWS_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_EC2",
)
AWS_REGIONS = ("us-east-1", "us-east-2", "us-west-1", "us-west-2")
AWS_ZONES = {"us-east-1": "abcdef", "us-east-2": "abc", "us-west-1": "abc", "us-west-2": "abcd"}
GCP_REGIONS = ("us-central1", "us-east4")  # scenarios/training-heavy-lab.yaml
AZURE_REGIONS = ("eastus", "eastus2", "southcentralus", "westus3")
AZURE_STRESS_REGIONS = (
    *AZURE_REGIONS,
    "northeurope",
    "westeurope",
    "swedencentral",
    "uksouth",
    "japaneast",
    "australiaeast",
)


# ---- the child: one fetch, measured --------------------------------------------------------------------


def _rss_kib() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def _reset_peak() -> bool:
    """Reset the kernel's peak RSS (VmHWM) to the current RSS; False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


def _peak_kib(reset: bool) -> int:
    if reset:
        with open("/proc/self/status") as status:
            found = re.search(r"VmHWM:\s+(\d+)", status.read())
            if found:
                return int(found.group(1))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


@contextmanager
def _profiled(enabled: bool) -> Iterator[list[Any]]:
    """cProfile on this thread and on every thread started inside (the fetchers read regions in threads)."""
    if not enabled:
        yield []
        return
    import cProfile

    profiles: list[Any] = []
    lock = threading.Lock()

    def start(*_: Any) -> None:
        sys.setprofile(None)
        profile = cProfile.Profile()
        with lock:
            profiles.append(profile)
        profile.enable()

    main = cProfile.Profile()
    profiles.append(main)
    threading.setprofile(start)
    main.enable()
    try:
        yield profiles
    finally:
        main.disable()
        threading.setprofile(None)  # type: ignore[arg-type]


def fetch_child(
    cloud: str, endpoints: dict[str, str], regions: tuple[str, ...], profile: bool
) -> dict[str, Any]:
    """In the spawned process: import the cloud's SDK, then run its fetcher once and measure it."""
    for name in PROXY_VARIABLES:
        os.environ.pop(name, None)  # loopback must not go through a proxy
    os.environ["NO_PROXY"] = "127.0.0.1,localhost"
    if cloud == "aws":
        for name in AWS_UNSET:
            os.environ.pop(name, None)
        os.environ.update(AWS_ENV)
        import botocore.session  # noqa: F401  (imported before the measurement, as the CLI would have)
    elif cloud == "gcp":
        from google.cloud import billing_v1, compute_v1  # noqa: F401
    else:
        import httpx  # noqa: F401
    import gc
    import importlib

    from providers.pricing.common import FetchRequest

    fetcher = importlib.import_module(f"providers.pricing.{cloud}")
    request = FetchRequest(
        regions=regions, gpus=(), now=NOW, endpoints=endpoints, project="gpuplan-bench", backoff_seconds=0.05
    )
    lines: list[str] = []
    gc.collect()
    reset = _reset_peak()
    before = _rss_kib()
    cpu = time.process_time()
    began = time.perf_counter()
    with _profiled(profile) as profiles:
        result = fetcher.fetch(request, lines.append)
    wall = time.perf_counter() - began
    cpu = time.process_time() - cpu
    peak = _peak_kib(reset)
    report = ""
    if profiles:
        import io
        import pstats

        stream = io.StringIO()
        stats = pstats.Stats(profiles[0], stream=stream)
        for extra in profiles[1:]:
            try:
                stats.add(extra)
            except TypeError:  # a thread that never ran a profiled call
                continue
        stats.sort_stats("tottime").print_stats(25)
        stats.sort_stats("cumulative").print_stats(25)
        report = stream.getvalue()
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "rss_before_mib": before / 1024,
        "growth_mib": (peak - before) / 1024,
        "peak_reset": reset,
        "offerings": len(result.offerings),
        "terms": len(result.terms),
        "warnings": len(result.warnings),
        "failed": dict(result.failed_regions),
        "progress": lines,
        "profile": report,
    }


def _child_main(conn: Any, *args: Any) -> None:
    try:
        conn.send(fetch_child(*args))
    except BaseException as error:  # the parent prints why the row failed
        conn.send({"error": f"{type(error).__name__}: {error}"})
    finally:
        conn.close()


def run_fetch(
    cloud: str, endpoints: dict[str, str], regions: tuple[str, ...], profile: bool
) -> dict[str, Any]:
    """``fetch_child`` in a fresh spawned process (its own heap and peak), and the parent's CPU meanwhile
    (the stand-in's: the parent does nothing else while it waits)."""
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe(duplex=False)
    process = context.Process(target=_child_main, args=(child, cloud, endpoints, regions, profile))
    cpu = time.process_time()
    process.start()
    child.close()
    figures: dict[str, Any] = parent.recv()
    process.join()
    figures["stand_in_cpu_s"] = time.process_time() - cpu
    if "error" in figures:
        raise SystemExit(f"{cloud} fetch failed: {figures['error']}")
    return figures


# ---- counting what the stand-ins serve ------------------------------------------------------------------


@dataclass
class Served:
    requests: dict[str, int] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, what: str, size: int) -> None:
        with self.lock:
            self.requests[what] = self.requests.get(what, 0) + 1
            self.bytes[what] = self.bytes.get(what, 0) + size

    def clear(self) -> None:
        with self.lock:
            self.requests.clear()
            self.bytes.clear()


# ---- AWS -------------------------------------------------------------------------------------------------


def _moto_gpu_types() -> list[str]:
    import moto

    path = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    with gzip.open(path) as stream:
        described = json.load(stream)
    return sorted(name for name, d in described.items() if d.get("GpuInfo", {}).get("Gpus"))


def _aws_fake(price_list_copies: int) -> Any:
    from aws_price_fake import AwsPriceFake

    class CountingAws(AwsPriceFake):
        served: Served

        def get_products(self, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
            answer = super().get_products(body)
            self.served.add("GetProducts", len(answer[2]))
            return answer

        def offering_rates(self, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
            answer = super().offering_rates(body)
            self.served.add("DescribeSavingsPlansOfferingRates", len(answer[2]))
            return answer

        def spot_history(self, region: str, form: dict[str, list[str]]) -> tuple[int, dict[str, str], bytes]:
            answer = super().spot_history(region, form)
            self.served.add("DescribeSpotPriceHistory", len(answer[2]))
            return answer

        def forward_ec2(
            self, action: str, region: str, raw: bytes, headers: dict[str, str]
        ) -> tuple[int, dict[str, str], bytes]:
            answer = super().forward_ec2(action, region, raw, headers)
            self.served.add(action, len(answer[2]))
            return answer

    base = AwsPriceFake.from_fixtures()
    template = next(
        i for i in base.items["us-east-1"] if i["product"]["attributes"]["instanceType"] == "p4d.24xlarge"
    )
    rate_template = base.rates[0]
    fake = CountingAws()
    fake.served = Served()
    fake.page_size = {  # the APIs' own maxima
        "GetProducts": 100,
        "DescribeSavingsPlansOfferingRates": 1000,
        "DescribeSpotPriceHistory": 1000,
    }
    rng = random.Random(SEED)
    types = _moto_gpu_types()
    text = json.dumps(template)
    for region in AWS_REGIONS:
        items = []
        for name in types:
            item = json.loads(text.replace("p4d.24xlarge", name).replace("us-east-1", region))
            items.append(item)
        fake.items[region] = items * price_list_copies
        for index, name in enumerate(types):
            hourly = 1.0 + 3.0 * (index % 13)
            for plan in ("Compute", "EC2Instance"):
                for seconds, years in ((31_536_000, 1), (94_608_000, 3)):
                    for payment in ("No Upfront", "Partial Upfront", "All Upfront"):
                        row = copy.deepcopy(rate_template)
                        row["savingsPlanOffering"].update(
                            offeringId=str(uuid.UUID(int=rng.getrandbits(128))),
                            paymentOption=payment,
                            planType=plan,
                            durationSeconds=seconds,
                            planDescription=f"{years} year {payment} {plan} Savings Plan",
                        )
                        row["rate"] = f"{hourly * (0.72 if years == 1 else 0.5):.4f}"
                        row["usageType"] = f"BoxUsage:{name}"
                        row["properties"] = [
                            {"name": "instanceType", "value": name},
                            {"name": "region", "value": region},
                            {"name": "instanceFamily", "value": name.split(".")[0]},
                            {"name": "productDescription", "value": "Linux/UNIX"},
                            {"name": "tenancy", "value": "shared"},
                        ]
                        fake.rates.append(row)
        fake.spot[region] = list(_spot_rows(rng, region, types))
    return fake


def _spot_rows(rng: random.Random, region: str, types: list[str]) -> Iterator[dict[str, Any]]:
    """7 days of changes (a new price every 1-3 h) per zone, in 3-6 of the region's zones per type, plus
    the change in force when the window opens."""
    start = NOW - timedelta(days=7)
    zones = AWS_ZONES[region]
    for index, name in enumerate(types):
        count = rng.randint(min(3, len(zones)), len(zones))
        for zone in rng.sample(zones, count):
            price = 0.4 * (1.0 + 3.0 * (index % 13))
            moment = start - timedelta(hours=rng.uniform(0.5, 3))
            while moment <= NOW:
                yield {
                    "AvailabilityZone": f"{region}{zone}",
                    "InstanceType": name,
                    "ProductDescription": "Linux/UNIX",
                    "SpotPrice": f"{price:.6f}",
                    "Timestamp": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
                }
                price *= rng.uniform(0.95, 1.05)
                moment += timedelta(hours=rng.uniform(1, 3))


@contextmanager
def _moto() -> Iterator[str]:
    import botocore.session
    from aws_stand_in import moto_running

    with moto_running() as url:
        ec2 = botocore.session.get_session().create_client("ec2", region_name="us-east-1", endpoint_url=url)
        ec2.describe_instance_types(InstanceTypes=["p5.48xlarge"])  # moto loads EC2's data on first use
        yield url


def row_aws(copies: int, profile: bool) -> dict[str, Any]:
    for name in AWS_UNSET:
        os.environ.pop(name, None)
    os.environ.update(AWS_ENV)
    fake = _aws_fake(copies)
    with _moto() as upstream:
        fake.ec2_upstream = upstream
        serving = fake.serve()
        url = next(serving)
        try:
            figures = run_fetch(
                "aws", {"aws-pricing": url, "aws-savingsplans": url, "aws-ec2": url}, AWS_REGIONS, profile
            )
        finally:
            serving.close()
    served = fake.served
    price_list = served.bytes.get("GetProducts", 0)
    figures.update(
        requests=sum(served.requests.values()),
        request_detail=", ".join(f"{op} {n}" for op, n in sorted(served.requests.items())),
        served_mb=sum(served.bytes.values()) / 1e6,
        price_list_mb=price_list / 1e6,
        spot_rows=sum(len(v) for v in fake.spot.values()),
        volume=(
            f"{len(AWS_REGIONS)} regions x {len(fake.items[AWS_REGIONS[0]]) // copies} GPU types"
            + (f", price list x{copies}" if copies > 1 else "")
            + f"; {len(fake.rates)} SP rates; {sum(len(v) for v in fake.spot.values()):,} spot rows"
        ),
    )
    return figures


# ---- GCP -------------------------------------------------------------------------------------------------

#: (regions, the name SKU descriptions give them): the real catalog's regional spellings.
GCP_LOCATIONS = (
    (("us-central1", "us-east1", "us-west1", "us-south1"), "Americas"),
    (("us-east4",), "Virginia"),
    (("us-east5",), "Columbus"),
    (("us-west2",), "Los Angeles"),
    (("us-west3",), "Salt Lake City"),
    (("us-west4",), "Las Vegas"),
    (("northamerica-northeast1",), "Montreal"),
    (("northamerica-northeast2",), "Toronto"),
    (("southamerica-east1",), "Sao Paulo"),
    (("southamerica-west1",), "Santiago"),
    (("europe-west1",), "Belgium"),
    (("europe-west2",), "London"),
    (("europe-west3",), "Frankfurt"),
    (("europe-west4",), "Netherlands"),
    (("europe-west6",), "Zurich"),
    (("europe-west8",), "Milan"),
    (("europe-west9",), "Paris"),
    (("europe-west10",), "Berlin"),
    (("europe-west12",), "Turin"),
    (("europe-north1",), "Finland"),
    (("europe-central2",), "Warsaw"),
    (("europe-southwest1",), "Madrid"),
    (("asia-east1",), "Taiwan"),
    (("asia-east2",), "Hong Kong"),
    (("asia-northeast1",), "Tokyo"),
    (("asia-northeast2",), "Osaka"),
    (("asia-northeast3",), "Seoul"),
    (("asia-south1",), "Mumbai"),
    (("asia-south2",), "Delhi"),
    (("asia-southeast1",), "Singapore"),
    (("asia-southeast2",), "Jakarta"),
    (("australia-southeast1",), "Sydney"),
    (("australia-southeast2",), "Melbourne"),
    (("me-west1",), "Tel Aviv"),
    (("me-central1",), "Doha"),
    (("me-central2",), "Dammam"),
    (("africa-south1",), "Johannesburg"),
)
GCP_SERIES = (
    "N1 Predefined",
    "N2",
    "N2D",
    "N4",
    "E2",
    "C2",
    "C2D",
    "C3",
    "C3D",
    "C4",
    "C4A",
    "C4D",
    "M1",
    "M2",
    "M3",
    "H3",
    "T2D",
    "T2A",
    "Z3",
    "A2",
    "A3",
    "A3Ultra",
    "A4",
    "G2",
    "Memory-optimized",
    "N1 Custom",
    "N2 Custom",
    "N2D Custom",
    "E2 Custom",
)
GCP_GPUS = (
    "Nvidia Tesla A100 GPU",
    "Nvidia Tesla A100 80GB GPU",
    "Nvidia H100 80GB GPU",
    "Nvidia H100 80GB Mega GPU",
    "H200 141GB GPU",
    "A4 Nvidia B200 (1 gpu slice)",
    "Nvidia L4 GPU",
    "Nvidia Tesla T4 GPU",
    "Nvidia Tesla V100 GPU",
    "Nvidia Tesla P100 GPU",
    "Nvidia Tesla P4 GPU",
)
GCP_OTHER = (
    "Storage PD Capacity",
    "SSD backed PD Capacity",
    "Balanced PD Capacity",
    "Hyperdisk Balanced Capacity",
    "Hyperdisk Extreme IOPS",
    "Hyperdisk Throughput Capacity",
    "Storage Image",
    "Storage PD Snapshot",
    "Regional Storage PD Capacity",
    "SSD backed Local Storage",
    "Static Ip Charge",
    "Network Inter Zone Egress",
    "Network Inter Region Egress",
    "Cloud NAT Gateway uptime",
    "Licensing Fee for RHEL 9 (CPU cost)",
    "Licensing Fee for SLES 15 (CPU cost)",
    "Licensing Fee for Windows Server 2022 Datacenter Edition (CPU cost)",
    "Licensing Fee for SQL Server 2022 Enterprise on VM with 8 to 12 VCPU",
)


def _gcp_sku(
    rng: random.Random,
    template: dict[str, Any],
    description: str,
    group: str,
    family: str,
    usage: str,
    regions: tuple[str, ...],
    unit: str,
) -> dict[str, Any]:
    sku_id = "-".join(f"{rng.getrandbits(16):04X}" for _ in range(3))
    sku = copy.deepcopy(template)
    sku.update(
        name=f"services/6F81-5844-456A/skus/{sku_id}",
        skuId=sku_id,
        description=description,
        serviceRegions=list(regions),
        geoTaxonomy={"type": "MULTI_REGIONAL" if len(regions) > 1 else "REGIONAL", "regions": list(regions)},
    )
    sku["category"] = {
        "serviceDisplayName": "Compute Engine",
        "resourceFamily": family,
        "resourceGroup": group,
        "usageType": usage,
    }
    expression = sku["pricingInfo"][0]["pricingExpression"]
    expression["usageUnit"] = unit
    expression["tieredRates"][0]["unitPrice"]["nanos"] = rng.randrange(1_000_000, 900_000_000)
    return sku


def _gcp_filler(rng: random.Random, template: dict[str, Any], count: int) -> list[dict[str, Any]]:
    """``count`` SKUs of the rest of Compute Engine's catalog: every series' core and RAM, every GPU, storage,
    network and licences, in every usage type and location. None prices an A2, A3, G2 or GPU component in the
    regions fetched (the fixtures do), so the fetch's figures stay the fixtures'."""
    fetched = {"Americas", "Virginia"}
    usages = (
        ("OnDemand", "", " running in {where}", ""),
        ("Preemptible", "Spot Preemptible ", " running in {where}", ""),
        ("Commit1Yr", "Commitment v1: ", " in {where}", " for 1 Year"),
        ("Commit3Yr", "Commitment v1: ", " in {where}", " for 3 Years"),
    )
    out: list[dict[str, Any]] = []
    planned_series = {"A2", "A3", "A3Ultra", "A4", "G2"}
    # each pass another kind of the same resources, as the catalog has them (none is a planned machine's)
    variants = ("", " Sole Tenancy", " Custom Extended", " DWS Defined Duration", " Reserved", " Flex")
    for variant in variants:
        if len(out) >= count:
            break
        for regions, where in GCP_LOCATIONS:
            for usage, prefix, located, years in usages:
                for series in GCP_SERIES:
                    if series in planned_series and where in fetched and not variant:
                        continue
                    for group, part, committed, unit in (
                        ("CPU", "Instance Core", "Cpu", "h"),
                        ("RAM", "Instance Ram", "Ram", "GiBy.h"),
                    ):
                        name = f"{series}{variant} {committed if years else part}"
                        text = f"{prefix}{name}{located.format(where=where)}{years}"
                        out.append(_gcp_sku(rng, template, text, group, "Compute", usage, regions, unit))
                for gpu in GCP_GPUS:
                    if where in fetched:
                        continue
                    located_gpu = f" running in {where}"
                    spot = " attached to Spot Preemptible VMs" if usage == "Preemptible" else ""
                    committing = "Commitment v1: " if years else ""
                    text = " ".join(f"{committing}{variant} {gpu}{spot}{located_gpu}{years}".split())
                    out.append(_gcp_sku(rng, template, text, "GPU", "Compute", usage, regions, "h"))
                    if usage == "OnDemand":
                        text = f"{gpu} attached to Sole Tenancy VMs running in {where}"
                        out.append(_gcp_sku(rng, template, text, "GPU", "Compute", usage, regions, "h"))
            for other in GCP_OTHER:
                family = (
                    "Storage" if "PD" in other or "Storage" in other or "Hyperdisk" in other else "Network"
                )
                family = "License" if other.startswith("Licensing") else family
                text = f"{other}{variant} in {where}"
                out.append(
                    _gcp_sku(rng, template, text, other.split()[0], family, "OnDemand", regions, "GiBy.mo")
                )
        for (regions, where), (_, there) in itertools.pairwise(GCP_LOCATIONS):
            for kind in ("Premium", "Standard"):
                text = f"Network Internet Egress via {kind} Tier{variant} from {where} to {there}"
                out.append(
                    _gcp_sku(
                        rng, template, text, "PremiumInternetEgress", "Network", "OnDemand", regions, "GiBy"
                    )
                )
    return out[:count]


def _gcp_fake(total_skus: int) -> Any:
    from gcp_price_fake import PriceFake

    class CountingGcp(PriceFake):
        served: Served
        page_bytes: dict[int, int]

        def _page(self, token: str) -> tuple[int, dict[str, Any]]:
            status, body = super()._page(token)
            self.served.add("skus.list", self.page_bytes.get(id(body), 0))
            return status, body

        def answer(self, path: str, raw_query: str) -> tuple[int, dict[str, Any]]:
            status, body = super().answer(path, raw_query)
            if "/skus" not in path:
                self.served.add("compute", len(json.dumps(body)))
            return status, body

    base = PriceFake.from_fixtures()
    fake = CountingGcp(regions=base.regions, machine_types=base.machine_types)
    fake.served = Served()
    fixture_skus = [sku for page in base.pages for sku in page["skus"]]
    rng = random.Random(SEED)
    filler = _gcp_filler(rng, fixture_skus[0], total_skus - len(fixture_skus))
    skus = filler + fixture_skus
    rng.shuffle(skus)
    page_size = 5000
    pages = [{"skus": skus[start : start + page_size]} for start in range(0, len(skus), page_size)]
    for page in pages:
        page["nextPageToken"] = f"{rng.getrandbits(160):040x}" if page is not pages[-1] else ""
    fake.pages = pages
    fake.page_bytes = {id(p): len(json.dumps(p)) for p in pages}
    return fake


def row_gcp(total_skus: int, profile: bool) -> dict[str, Any]:
    from gcp_price_fake import serve

    fake = _gcp_fake(total_skus)
    with serve(fake) as url:
        figures = run_fetch("gcp", {"gcp-billing": url, "gcp-compute": url}, GCP_REGIONS, profile)
    served = fake.served
    figures.update(
        requests=sum(served.requests.values()),
        request_detail=", ".join(f"{op} {n}" for op, n in sorted(served.requests.items())),
        served_mb=sum(served.bytes.values()) / 1e6,
        volume=f"{len(GCP_REGIONS)} regions; {sum(len(p['skus']) for p in fake.pages):,} SKUs in "
        f"{len(fake.pages)} pages of 5,000",
    )
    return figures


# ---- Azure -----------------------------------------------------------------------------------------------

#: The NC and ND sizes a region's Virtual Machines meters list (armSkuName, product series, GPUs, $/h per
#: node on demand), the old with Low Priority meters, the new without. Prices are of the real order.
AZURE_SIZES = (
    ("Standard_NC6s_v3", "NCSv3", 1, 3.06),
    ("Standard_NC12s_v3", "NCSv3", 2, 6.12),
    ("Standard_NC24s_v3", "NCSv3", 4, 12.24),
    ("Standard_NC24rs_v3", "NCSv3", 4, 13.46),
    ("Standard_NC4as_T4_v3", "NCasT4 v3", 1, 0.526),
    ("Standard_NC8as_T4_v3", "NCasT4 v3", 1, 0.752),
    ("Standard_NC16as_T4_v3", "NCasT4 v3", 1, 1.204),
    ("Standard_NC64as_T4_v3", "NCasT4 v3", 4, 4.352),
    ("Standard_NC8ads_A10_v4", "NCads A10 v4", 1, 0.80),
    ("Standard_NC16ads_A10_v4", "NCads A10 v4", 1, 1.60),
    ("Standard_NC32ads_A10_v4", "NCads A10 v4", 2, 3.20),
    ("Standard_NC24ads_A100_v4", "NCads A100 v4", 1, 3.673),
    ("Standard_NC48ads_A100_v4", "NCads A100 v4", 2, 7.346),
    ("Standard_NC96ads_A100_v4", "NCads A100 v4", 4, 14.692),
    ("Standard_NC40ads_H100_v5", "NCads H100 v5", 1, 6.98),
    ("Standard_NC80adis_H100_v5", "NCads H100 v5", 2, 13.96),
    ("Standard_NCC40ads_H100_v5", "NCCads H100 v5", 1, 6.98),
    ("Standard_ND6s", "NDs", 1, 2.07),
    ("Standard_ND12s", "NDs", 2, 4.14),
    ("Standard_ND24s", "NDs", 4, 8.28),
    ("Standard_ND24rs", "NDs", 4, 9.108),
    ("Standard_ND40rs_v2", "NDv2", 8, 22.032),
    ("Standard_ND96asr_v4", "NDasr A100 v4", 8, 27.197),
    ("Standard_ND96amsr_A100_v4", "NDamsr A100 v4", 8, 32.77),
    ("Standard_ND96isr_H100_v5", "NDsr H100 v5", 8, 98.32),
    ("Standard_ND96isr_H200_v5", "NDsr H200 v5", 8, 84.8),
    ("Standard_ND96isr_MI300X_v5", "NDsr MI300X v5", 8, 48.0),
    ("Standard_ND40s_v3", "NDs v3", 8, 26.0),
    ("Standard_ND96is_MI300X_v5", "NDs MI300X v5", 8, 46.0),
)
_OLD_SERIES = {"NCSv3", "NDs", "NDv2", "NCasT4 v3"}


def _azure_items(
    rng: random.Random, template: dict[str, Any], region: str, history: int
) -> list[dict[str, Any]]:
    """One region's NC/ND meters: per size its Linux and Windows on-demand, Spot (and Low Priority for the
    old series), Dev/Test, and 1-, 3- and 5-year reservations, each ``history`` times (older prices first)."""
    items: list[dict[str, Any]] = []
    for name, series, _, hourly in AZURE_SIZES:
        short = name.removeprefix("Standard_").replace("_", " ")
        product = f"Virtual Machines {series} Series"
        kinds = [
            ("Consumption", short, product, None, hourly),
            ("Consumption", f"{short} Spot", product, None, hourly * 0.35),
            ("Consumption", short, f"{product} Windows", None, hourly * 1.08),
            ("Consumption", f"{short} Spot", f"{product} Windows", None, hourly * 0.4),
            ("DevTestConsumption", short, product, None, hourly),
            ("Reservation", short, product, "1 Year", hourly * 8760 * 0.62),
            ("Reservation", short, product, "3 Years", hourly * 26280 * 0.40),
            ("Reservation", short, product, "5 Years", hourly * 43800 * 0.33),
        ]
        if series in _OLD_SERIES:
            kinds.append(("Consumption", f"{short} Low Priority", product, None, hourly * 0.2))
            kinds.append(("Consumption", f"{short} Low Priority", f"{product} Windows", None, hourly * 0.25))
        for price_type, sku_name, product_name, term, price in kinds:
            for age in range(history):
                item = copy.deepcopy(template)
                start = datetime(2024, 4, 1, tzinfo=UTC) - timedelta(days=61 * age)
                item.update(
                    armRegionName=region,
                    location=region,
                    effectiveStartDate=start.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    meterId=str(uuid.UUID(int=rng.getrandbits(128))),
                    meterName=sku_name,
                    productName=product_name,
                    skuName=sku_name,
                    armSkuName=name,
                    type=price_type,
                    unitPrice=round(price * (1 + 0.03 * age), 4),
                    retailPrice=round(price * (1 + 0.03 * age), 4),
                )
                if term is None:
                    item.pop("reservationTerm", None)
                else:
                    item["reservationTerm"] = term
                    item["unitOfMeasure"] = "1 Hour"
                if price_type == "Consumption" and sku_name == short and "Windows" not in product_name:
                    item["savingsPlan"] = [
                        {
                            "unitPrice": round(price * 0.5, 4),
                            "retailPrice": round(price * 0.5, 4),
                            "term": "3 Years",
                        },
                        {
                            "unitPrice": round(price * 0.76, 4),
                            "retailPrice": round(price * 0.76, 4),
                            "term": "1 Year",
                        },
                    ]
                else:
                    item.pop("savingsPlan", None)
                items.append(item)
    return items


def row_azure(regions: tuple[str, ...], items_per_region: int | None, profile: bool) -> dict[str, Any]:
    from azure_price_fake import FIXTURES, AzurePriceFake

    class CountingAzure(AzurePriceFake):
        served: Served

        def _answer(self, target: str) -> tuple[int, dict[str, str], str]:
            status, headers, body = super()._answer(target)
            self.served.add("prices", len(body.encode()))
            return status, headers, body

    fake = CountingAzure(page_size=1000)
    fake.served = Served()
    template = json.loads((FIXTURES / "eastus.json").read_text())["Items"][0]
    rng = random.Random(SEED)
    per_size = len(_azure_items(rng, template, "eastus", 1))
    history = 1 if items_per_region is None else max(1, round(items_per_region / per_size))
    for region in regions:
        fake.items.extend(_azure_items(rng, template, region, history)[:items_per_region])
    fake.start()
    try:
        figures = run_fetch("azure", {"azure-prices": fake.base}, regions, profile)
    finally:
        fake.stop()
    served = fake.served
    figures.update(
        requests=sum(served.requests.values()),
        request_detail=f"prices {served.requests.get('prices', 0)}",
        served_mb=sum(served.bytes.values()) / 1e6,
        volume=f"{len(regions)} regions x {len(fake.items) // len(regions):,} NC/ND items, pages of 1,000",
    )
    return figures


# ---- the table -------------------------------------------------------------------------------------------

ROWS: dict[str, Callable[[bool], dict[str, Any]]] = {
    "aws": lambda profile: row_aws(1, profile),
    "aws-x30": lambda profile: row_aws(30, profile),
    "gcp": lambda profile: row_gcp(40_000, profile),
    "azure": lambda profile: row_azure(AZURE_REGIONS, None, profile),
    "azure-stress": lambda profile: row_azure(AZURE_STRESS_REGIONS, 3000, profile),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", nargs="*", choices=list(ROWS), default=list(ROWS))
    parser.add_argument("--profile", choices=list(ROWS), help="run this row only, under cProfile")
    parser.add_argument("--progress", action="store_true", help="print each fetch's progress lines")
    args = parser.parse_args()
    rows = [args.profile] if args.profile else args.rows
    print(f"Python {platform.python_version()}, {os.cpu_count()} cores; target {TARGET_S:.0f} s per cloud\n")
    print(
        "| row | volume served | requests | MB served | wall s | / 60 s | fetch CPU s | stand-in CPU s "
        "| RSS growth MiB | offerings | terms | warnings | failed |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    began = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    for key in rows:
        r = ROWS[key](bool(args.profile))
        results[key] = r
        failed = ", ".join(r["failed"]) or "none"
        print(
            f"| {key} | {r['volume']} | {r['requests']:,} | {r['served_mb']:.1f} | {r['wall_s']:.1f} | "
            f"{r['wall_s'] / TARGET_S:.2f} | {r['cpu_s']:.1f} | {r['stand_in_cpu_s']:.1f} | "
            f"{r['growth_mib']:.0f} | {r['offerings']:,} | {r['terms']:,} | {r['warnings']:,} | {failed} |",
            flush=True,
        )
    print()
    for key, r in results.items():
        print(f"- {key}: requests {r['request_detail']}; RSS before the fetch {r['rss_before_mib']:.0f} MiB")
        if "price_list_mb" in r:
            ratio = r["growth_mib"] * MiB / max(1.0, r["price_list_mb"] * 1e6)
            print(
                f"  {key}: {r['price_list_mb']:.1f} MB of price-list JSON read, peak RSS growth "
                f"{r['growth_mib']:.0f} MiB ({ratio:.2f}x the price list's bytes; the whole fetch, every API)"
            )
        if not r["peak_reset"]:
            print(f"  {key}: peak is ru_maxrss (VmHWM could not be reset)")
        if args.progress:
            for line in r["progress"]:
                print(f"    {line}")
        if r["profile"]:
            print(r["profile"])
    print(f"\n{time.perf_counter() - began:.0f} s in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
