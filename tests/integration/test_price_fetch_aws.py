"""The AWS price fetcher against a loopback stand-in of the Price List, Savings Plans and EC2 APIs.

The real boto3 clients talk to :mod:`aws_price_fake` (GetProducts, DescribeSavingsPlansOfferingRates,
DescribeSpotPriceHistory from the fixtures in ``tests/fixtures/prices/aws``), which hands
DescribeInstanceTypes on to moto's server (EC2's real instance-type data). Each test reads what a user of
``gpuplan catalog fetch --cloud aws`` would get: the offerings, their prices and provenance, the terms,
the warnings and the failed regions.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aws_price_fake import AwsPriceFake
from aws_stand_in import moto_running

from models.catalog import Catalog, write_catalog
from models.priceterms import read_terms, write_terms
from providers.errors import OperationFailed, ProviderError
from providers.pricing.aws import fetch, time_weighted_median
from providers.pricing.common import FetchRequest, FetchResult

NOW = datetime(2026, 12, 1, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ec2_upstream() -> Iterator[str]:
    """moto's server for DescribeInstanceTypes, one for the module: it only reads EC2's instance-type data,
    and its first EC2 call in a process costs seconds."""
    with moto_running() as url:
        yield url


@pytest.fixture
def stand_in(aws_env: None, ec2_upstream: str) -> Iterator[tuple[AwsPriceFake, str]]:
    fake = AwsPriceFake.from_fixtures(ec2_upstream=ec2_upstream)
    serving = fake.serve()
    url = next(serving)
    yield fake, url
    serving.close()


def _request(url: str, regions: tuple[str, ...] = ("us-east-1", "us-west-2"), **kw: object) -> FetchRequest:
    endpoints = {"aws-pricing": url, "aws-savingsplans": url, "aws-ec2": url}
    return FetchRequest(
        regions=regions,
        gpus=kw.pop("gpus", ()),  # type: ignore[arg-type]
        now=NOW,
        endpoints=endpoints,
        backoff_seconds=0.001,
        **kw,  # type: ignore[arg-type]
    )


def _by_id(result: FetchResult) -> dict[str, object]:
    return {o.id: o for o in result.offerings}


def test_prices_terms_and_shapes_are_read_from_each_api(stand_in: tuple[AwsPriceFake, str]) -> None:
    fake, url = stand_in
    result = fetch(_request(url))
    assert result.failed_regions == {}
    offerings = {o.id: o for o in result.offerings}
    assert set(offerings) == {
        *(f"aws:us-east-1:{t}" for t in ("p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5en.48xlarge")),
        "aws:us-east-1:p6-b200.48xlarge",
        "aws:us-east-1:g6e.xlarge",
        *(f"aws:us-west-2:{t}" for t in ("p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "g6e.xlarge")),
    }  # the Windows, dedicated and general-purpose decoys are filtered out; g4dn's T4 is not planned
    p5 = offerings["aws:us-east-1:p5.48xlarge"]
    assert (p5.gpu_model, p5.gpus_per_node, p5.gpu_memory_gb, p5.fabric, p5.fabric_gbps) == (
        "H100", 8, 80.0, "efa", 3200.0,
    )  # fmt: skip
    assert p5.on_demand_usd_h == 55.04
    assert p5.reserved_1y_usd_h == pytest.approx(34.6752)  # standard RI no upfront (= EC2 Instance SP)
    assert p5.reserved_3y_usd_h == pytest.approx(23.77728)
    # time-weighted per zone: us-east-1a held 16.9508 six of the seven days (the plain median of its two
    # rows would be 20.48); b 18.2, c 21.4; the catalog's spot is the median of the three
    assert p5.spot_usd_h == pytest.approx(18.2)
    p4d = offerings["aws:us-east-1:p4d.24xlarge"]
    assert (p4d.gpu_model, p4d.fabric, p4d.fabric_gbps) == ("A100-40GB", "efa", 400.0)  # "4x 100 Gigabit"
    assert offerings["aws:us-east-1:p4de.24xlarge"].gpu_model == "A100-80GB"
    g6e = offerings["aws:us-east-1:g6e.xlarge"]
    assert (g6e.gpu_model, g6e.gpu_memory_gb, g6e.fabric, g6e.fabric_gbps) == ("L40S", 48.0, "none", None)

    # every provenance names its API, the endpoint and the offer version
    source = {p.tier: p for p in p5.provenance}
    assert source["on_demand"].basis == "quoted"
    assert "AWS Price List GetProducts" in source["on_demand"].source
    assert url in source["on_demand"].source and "offer version 20261125182345" in source["on_demand"].source
    assert "reserved-instance standard no-upfront" in source["reserved_1y"].source
    assert "median over 3 zone(s)" in source["spot"].source and "time-weighted" in source["spot"].source
    assert source["on_demand"].as_of == NOW

    # every RI combination of the price list is a term; partial upfront keeps its fee apart
    terms = [t for t in result.terms if t.offering == "aws:us-east-1:p4d.24xlarge"]
    ri = {(t.term_years, t.offering_class, t.payment): t for t in terms if t.kind == "reserved-instance"}
    assert len(ri) == 12
    partial = ri[(1, "standard", "partial-upfront")]
    assert partial.usd_h == pytest.approx(6.6125) and partial.upfront_usd == pytest.approx(57926)
    assert (
        ri[(3, "convertible", "all-upfront")].usd_h == 0
        and ri[(3, "convertible", "all-upfront")].upfront_usd > 0
    )
    plans = {(t.kind, t.term_years, t.payment): t.usd_h for t in result.terms if t.offering == p5.id}
    assert plans[("savings-plan-ec2-instance", 1, "no-upfront")] == pytest.approx(34.6752)
    assert plans[("savings-plan-ec2-instance", 1, "all-upfront")] == pytest.approx(33.0216)
    assert plans[("savings-plan-compute", 3, "no-upfront")] == pytest.approx(27.52)
    assert (
        "savings-plan-ec2-instance",
        1,
        "no-upfront",
    ) in plans and 38.1402 not in plans.values()  # dedicated
    zones = {t.zone: t.usd_h for t in result.terms if t.offering == p5.id and t.kind == "spot-zone"}
    assert zones == pytest.approx({"us-east-1a": 16.9508, "us-east-1b": 18.2, "us-east-1c": 21.4})
    assert any("g4dn.xlarge (T4)" in w for w in result.warnings)

    # the calls asked for what the module says: plain Linux GPU instances, one query per region
    asked = [body for op, region, body in fake.requests if op == "GetProducts" and region == "us-east-1"]
    fields = {f["Field"]: f["Value"] for f in asked[0]["Filters"]}
    assert fields == {
        "regionCode": "us-east-1", "instanceFamily": "GPU instance", "operatingSystem": "Linux",
        "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used",
        "licenseModel": "No License required",
    }  # fmt: skip


def test_only_the_wanted_gpu_models_are_kept(stand_in: tuple[AwsPriceFake, str]) -> None:
    _, url = stand_in
    result = fetch(_request(url, regions=("us-east-1",), gpus=("H1", "A100-80")))
    assert sorted(o.instance_type for o in result.offerings) == ["p4de.24xlarge", "p5.48xlarge"]
    assert {t.offering for t in result.terms} == {"aws:us-east-1:p4de.24xlarge", "aws:us-east-1:p5.48xlarge"}


def test_every_page_of_every_api_is_read(stand_in: tuple[AwsPriceFake, str]) -> None:
    fake, url = stand_in
    result = fetch(_request(url, regions=("us-east-1",)))
    # the stand-in pages by 3 price list items, 4 rates, 5 spot rows: three pages each in us-east-1
    assert fake.pages("GetProducts", "us-east-1") == {1, 2, 3}
    assert fake.pages("DescribeSavingsPlansOfferingRates", "us-east-1") == {1, 2, 3}
    assert fake.pages("DescribeSpotPriceHistory", "us-east-1") == {1, 2, 3}
    # what only the last pages hold came through: g6e (last price list page), the oldest spot rows
    offerings = {o.instance_type: o for o in result.offerings}
    assert "g6e.xlarge" in offerings
    assert offerings["p6-b200.48xlarge"].spot_usd_h == pytest.approx(24.402)
    assert offerings["p6-b200.48xlarge"].reserved_3y_usd_h == pytest.approx(49.21897)


def test_a_throttled_page_is_retried_and_the_fetch_completes(stand_in: tuple[AwsPriceFake, str]) -> None:
    fake, url = stand_in
    fake.throttle("GetProducts", "us-east-1", page=2, times=2)
    fake.throttle("DescribeSavingsPlansOfferingRates", "us-east-1", page=2)
    fake.throttle("DescribeSpotPriceHistory", "us-east-1", page=3)  # EC2's RequestLimitExceeded, HTTP 503
    result = fetch(_request(url, regions=("us-east-1",)))
    assert result.failed_regions == {}
    assert len(result.offerings) == 6
    assert fake.count("GetProducts", "us-east-1", status=400) == 2
    assert (
        fake.count("GetProducts", "us-east-1", status=200) == 3
    )  # page 2 once it was let through, no restart
    assert fake.count("DescribeSavingsPlansOfferingRates", "us-east-1", status=400) == 1
    assert fake.count("DescribeSpotPriceHistory", "us-east-1", status=503) == 1
    assert {o.instance_type: o.spot_usd_h for o in result.offerings}["p6-b200.48xlarge"] == pytest.approx(
        24.402
    )


def test_a_throttle_longer_than_the_attempts_fails_that_region(stand_in: tuple[AwsPriceFake, str]) -> None:
    fake, url = stand_in
    fake.throttle("GetProducts", "us-west-2", page=1, times=10)
    result = fetch(_request(url, attempts=3))
    assert "ThrottlingException" in result.failed_regions["us-west-2"]
    assert fake.count("GetProducts", "us-west-2", status=400) == 3  # botocore's own retries are off
    assert {o.region for o in result.offerings} == {"us-east-1"}


def test_a_price_the_api_does_not_have_is_unknown_with_a_warning(stand_in: tuple[AwsPriceFake, str]) -> None:
    fake, url = stand_in
    for item in fake.items["us-east-1"]:
        name = item["product"]["attributes"]["instanceType"]
        if name == "p5en.48xlarge":
            del item["terms"]["OnDemand"]  # only Reserved terms published
        if name == "p4de.24xlarge":  # AWS's zero: not sold on demand, not free
            for offer in item["terms"]["OnDemand"].values():
                for dimension in offer["priceDimensions"].values():
                    dimension["pricePerUnit"]["USD"] = "0.0000000000"
    result = fetch(_request(url))
    offerings = {o.id: o for o in result.offerings}
    b200 = offerings["aws:us-east-1:p6-b200.48xlarge"]  # AWS sells no 1-year RI or EC2 Instance SP for it:
    # its 1-year tier is the Compute Savings Plan's rate (headline_commitment's fallback), not unknown
    assert b200.reserved_1y_usd_h == pytest.approx(89.72208) and b200.reserved_3y_usd_h == pytest.approx(
        49.21897
    )
    said = b200.price_provenance("reserved_1y")
    assert said.basis == "quoted" and "savings-plan-compute" in said.source
    g6e_west = offerings["aws:us-west-2:g6e.xlarge"]  # no spot history in us-west-2
    assert g6e_west.spot_usd_h is None and g6e_west.price_provenance("spot").basis == "unknown"
    for offering_id in ("aws:us-east-1:p5en.48xlarge", "aws:us-east-1:p4de.24xlarge"):
        kept = offerings[offering_id]
        assert kept.on_demand_usd_h is None and kept.price_provenance("on_demand").basis == "unknown"
        assert kept.reserved_1y_usd_h is not None  # the rest of the row is still priced
    warned = "\n".join(result.warnings)
    assert "p6-b200.48xlarge: no reserved_1y price" not in warned
    assert "us-west-2 g6e.xlarge: no spot price" in warned
    assert "us-east-1 p5en.48xlarge: no on_demand price" in warned
    assert "us-east-1 p4de.24xlarge: no on_demand price" in warned


@pytest.mark.parametrize(
    ("status", "code", "calls"),
    [(500, "InternalFailure", 5), (403, "UnauthorizedOperation", 1)],
    ids=["server-error-retried", "unauthorized-not-retried"],
)
def test_a_failing_region_is_named_and_the_others_are_returned(
    stand_in: tuple[AwsPriceFake, str], status: int, code: str, calls: int
) -> None:
    fake, url = stand_in
    fake.fail_region("us-west-2", status=status, code=code)
    lines: list[str] = []
    result = fetch(_request(url), lines.append)
    assert list(result.failed_regions) == ["us-west-2"]
    assert code in result.failed_regions["us-west-2"] and str(status) in result.failed_regions["us-west-2"]
    assert {o.region for o in result.offerings} == {"us-east-1"} and len(result.offerings) == 6
    assert fake.count("GetProducts", "us-west-2") == calls
    assert any(w.startswith("aws us-west-2: not fetched") for w in result.warnings)
    assert any("us-west-2: failed" in line for line in lines)


def test_a_failing_ec2_in_one_region_fails_only_that_region(stand_in: tuple[AwsPriceFake, str]) -> None:
    fake, url = stand_in
    original = fake._fault

    def ec2_refuses(operation: str, region: str, page: int) -> tuple[int, str, str] | None:
        if region == "us-east-1" and operation == "DescribeInstanceTypes":
            return (403, "UnauthorizedOperation", "You are not authorized to perform this operation.")
        return original(operation, region, page)

    fake._fault = ec2_refuses  # type: ignore[method-assign]
    result = fetch(_request(url))
    assert "UnauthorizedOperation" in result.failed_regions["us-east-1"]
    assert {o.region for o in result.offerings} == {"us-west-2"}


def test_every_region_failing_is_a_provider_error(stand_in: tuple[AwsPriceFake, str]) -> None:
    fake, url = stand_in
    fake.fail_region("us-east-1", status=403, code="AccessDeniedException")
    fake.fail_region("us-west-2", status=403, code="AccessDeniedException")
    with pytest.raises(OperationFailed, match=r"us-east-1.*AccessDeniedException") as raised:
        fetch(_request(url))
    assert isinstance(raised.value, ProviderError) and raised.value.cloud == "aws"


def test_progress_names_each_region_and_its_pages(stand_in: tuple[AwsPriceFake, str]) -> None:
    _, url = stand_in
    lines: list[str] = []
    fetch(_request(url), lines.append)
    assert "aws us-east-1: 3 price list page(s), 7 GPU instance types" in lines
    assert "aws us-west-2: 4 offerings, 37 terms" in lines


def test_the_catalog_and_terms_files_keep_prices_and_provenance(
    stand_in: tuple[AwsPriceFake, str], tmp_path: Path
) -> None:
    _, url = stand_in
    result = fetch(_request(url))
    write_catalog(result.offerings, tmp_path / "catalog.csv")
    write_terms(result.terms, tmp_path / "catalog.terms.csv")
    catalog = Catalog.load(tmp_path / "catalog.csv")
    terms = read_terms(tmp_path / "catalog.terms.csv")
    assert len(catalog) == len(result.offerings) == 10
    assert len(terms) == len(result.terms)
    p5 = catalog.get("aws:us-east-1:p5.48xlarge")
    assert (p5.on_demand_usd_h, p5.spot_usd_h) == (55.04, pytest.approx(18.2))
    assert p5.reserved_1y_usd_h == pytest.approx(34.6752) and p5.reserved_3y_usd_h == pytest.approx(23.77728)
    on_demand = p5.price_provenance("on_demand")
    assert on_demand.basis == "quoted" and "AWS Price List GetProducts" in on_demand.source
    assert on_demand.as_of == NOW
    assert "DescribeSpotPriceHistory" in p5.price_provenance("spot").source
    b200 = catalog.get("aws:us-east-1:p6-b200.48xlarge")
    assert b200.reserved_1y_usd_h == pytest.approx(89.72208)  # the Compute Savings Plan: nothing node-shaped
    assert "savings-plan-compute" in b200.price_provenance("reserved_1y").source
    partial = next(
        t
        for t in terms
        if t.offering == "aws:us-east-1:p4d.24xlarge"
        and (t.kind, t.term_years, t.offering_class, t.payment)
        == ("reserved-instance", 1, "standard", "partial-upfront")
    )
    assert partial.upfront_usd == pytest.approx(57926) and "AWS Price List GetProducts" in partial.source
    plan = next(t for t in terms if t.kind == "savings-plan-compute" and t.offering == b200.id)
    assert plan.usd_h == pytest.approx(89.72208) and "DescribeSavingsPlansOfferingRates" in plan.source
    zones = sorted(t.zone for t in terms if t.kind == "spot-zone" and t.offering == p5.id)
    assert zones == ["us-east-1a", "us-east-1b", "us-east-1c"]


def test_time_weighted_median_weights_each_price_by_how_long_it_held() -> None:
    start, end = datetime(2026, 11, 24, tzinfo=UTC), NOW
    changes = [
        (datetime(2026, 11, 20, tzinfo=UTC), 10.0),  # in force at the start: holds until 11-30
        (datetime(2026, 11, 30, tzinfo=UTC), 30.0),
        (datetime(2026, 11, 30, 12, tzinfo=UTC), 50.0),
    ]
    assert time_weighted_median(changes, start, end) == 10.0  # the plain median would be 30
    halves = [(start, 1.0), (datetime(2026, 11, 27, 12, tzinfo=UTC), 3.0)]
    assert time_weighted_median(halves, start, end) == 2.0  # exactly half each: the mean, as median()
    assert time_weighted_median([(end, 5.0)], start, end) is None


def test_importing_the_fetcher_does_not_import_the_sdk() -> None:
    code = (
        "import sys, providers.pricing.aws; print(json.dumps(sorted(m for m in sys.modules if 'boto' in m)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", f"import json; {code}"],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout) == []


def test_every_gpu_type_ec2_describes_is_read_in_four_regions_at_once(
    stand_in: tuple[AwsPriceFake, str],
) -> None:
    """Four regions read in parallel, each with every GPU instance type EC2 has (moto's data: ~65, among
    them fractional g6f and GPUs gpuplan does not plan) at 12 RI terms each and 18 spot rows per type, one
    page each as AWS's page sizes would: no region fails, each has the same offerings with every RI term,
    and what is not planned is warned, not failed. How fast a fetch is at real volumes is measured by
    bench/price_fetch_bench.py, not here."""
    fake, url = stand_in
    regions = ("us-east-1", "us-west-2", "us-east-2", "eu-west-1")
    template = next(
        i for i in fake.items["us-east-1"] if i["product"]["attributes"]["instanceType"] == "p4d.24xlarge"
    )
    gpu_types = _moto_gpu_types()
    for region in regions:
        items = []
        for name in gpu_types:
            item = json.loads(json.dumps(template).replace("p4d.24xlarge", name).replace("us-east-1", region))
            items.append(item)
        fake.items[region] = items
        fake.spot[region] = [
            {"AvailabilityZone": f"{region}{z}", "InstanceType": n, "ProductDescription": "Linux/UNIX",
             "SpotPrice": "1.234500", "Timestamp": f"2026-11-2{d}T00:00:00Z"}
            for n in gpu_types for z in "abc" for d in range(3, 9)
        ]  # fmt: skip
    fake.page_size = {
        "GetProducts": 100,
        "DescribeSavingsPlansOfferingRates": 1000,
        "DescribeSpotPriceHistory": 1000,
    }
    result = fetch(_request(url, regions=regions))
    assert result.failed_regions == {}
    planned = {r: sorted(o.instance_type for o in result.offerings if o.region == r) for r in regions}
    assert len(planned["us-east-1"]) >= 20 and "p5.48xlarge" in planned["us-east-1"]
    assert all(found == planned["us-east-1"] for found in planned.values())
    reserved = [t for t in result.terms if t.kind == "reserved-instance"]
    assert len(reserved) == 12 * len(result.offerings)
    for region in regions:
        (skipped,) = [w for w in result.warnings if w.startswith(f"aws {region}: GPU models")]
        assert "g6f.large" in skipped and "g4dn.xlarge (T4)" in skipped


def _moto_gpu_types() -> list[str]:
    import gzip
    import os

    import moto

    path = os.path.join(os.path.dirname(moto.__file__), "ec2", "resources", "instance_types.json.gz")
    with gzip.open(path) as stream:
        described = json.load(stream)
    return sorted(name for name, d in described.items() if d.get("GpuInfo", {}).get("Gpus"))
