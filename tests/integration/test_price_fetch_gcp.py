"""The GCP price fetcher against a loopback stand-in of the Cloud Billing Catalog and Compute Engine APIs,
through the real google-cloud-billing and google-cloud-compute REST clients (``gcp_price_fake``, fixtures in
``tests/fixtures/prices/gcp/``): the parse and the bill's assembly, pagination, a throttled page, a missing
SKU, failing regions, and the catalog and terms files written and read back."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from gcp_price_fake import FIXTURES, PriceFake, serve

from models.catalog import Catalog, write_catalog
from models.priceterms import read_terms, terms_path_for, write_terms
from providers.errors import InvalidRequest, ProviderError, Throttled
from providers.pricing import gcp
from providers.pricing.common import FetchRequest, FetchResult

NOW = datetime(2026, 12, 6, 8, 30, tzinfo=UTC)
REGIONS = ("us-central1", "us-east4")
ROOT = Path(__file__).resolve().parents[2]
SOURCE = "GCP Cloud Billing Catalog services/6F81-5844-456A skus"
PAGE_2 = "CiAKGjBpNDd2Nmp2Zml2cmlzbHR"  # nextPageToken of skus-page-1.json
# /work/shared/data/commitment-prices/gcp.csv, us-central1 a3-highgpu-8g (Cyclenerd pricing.yml @fd66b26,
# built from the Cloud Billing Catalog SKUs; VM without Local SSD): on-demand, cud_1y, cud_3y, spot
A3_HIGH_US_CENTRAL1 = {
    "on_demand": 87.83247,
    "reserved_1y": 60.96943,
    "reserved_3y": 38.56849,
    "spot": 50.25776,
}


@pytest.fixture(autouse=True)
def project(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "gpuplan-test")


@pytest.fixture
def fake() -> PriceFake:
    return PriceFake.from_fixtures()


@pytest.fixture
def url(fake: PriceFake) -> Iterator[str]:
    with serve(fake) as address:
        yield address


def request(
    url: str, regions: tuple[str, ...] = REGIONS, gpus: tuple[str, ...] = (), **kw: Any
) -> FetchRequest:
    return FetchRequest(
        regions=regions,
        gpus=gpus,
        now=NOW,
        endpoints={"gcp-billing": url, "gcp-compute": url},
        backoff_seconds=0.001,
        **kw,
    )


def run(url: str, **kw: Any) -> tuple[FetchResult, list[str]]:
    lines: list[str] = []
    return gcp.fetch(request(url, **kw), lines.append), lines


def by_id(result: FetchResult) -> dict[str, Any]:
    return {o.id: o for o in result.offerings}


def fixture_skus() -> list[dict[str, Any]]:
    return [
        sku
        for path in sorted((FIXTURES / "billing").glob("*.json"))
        for sku in json.loads(path.read_text())["skus"]
    ]


def sku(description: str) -> dict[str, Any]:
    (found,) = [s for s in fixture_skus() if s["description"] == description]
    return found


def usd(description: str) -> float:
    price = sku(description)["pricingInfo"][0]["pricingExpression"]["tieredRates"][-1]["unitPrice"]
    return int(price["units"]) + price["nanos"] / 1e9


def test_each_machine_is_priced_from_its_vcpu_ram_and_gpu_skus_with_its_shape(url: str) -> None:
    result, lines = run(url)
    found = by_id(result)
    assert sorted(found) == [
        f"gcp:{r}:{m}"
        for r, ms in (
            (
                "us-central1",
                (
                    "a2-highgpu-1g",
                    "a2-highgpu-8g",
                    "a3-highgpu-8g",
                    "a3-megagpu-8g",
                    "g2-standard-4",
                    "g2-standard-8",
                ),
            ),
            (
                "us-east4",
                ("a2-highgpu-1g", "a2-highgpu-8g", "a3-highgpu-8g", "a3-megagpu-8g", "g2-standard-4"),
            ),
        )
        for m in ms
    ]
    a3 = found["gcp:us-central1:a3-highgpu-8g"]
    assert (a3.gpu_model, a3.gpus_per_node, a3.gpu_memory_gb, a3.fabric, a3.fabric_gbps) == (
        "H100",
        8,
        80.0,
        "tcpx",
        800.0,
    )
    mega = found["gcp:us-east4:a3-megagpu-8g"]
    assert (mega.gpu_model, mega.fabric, mega.fabric_gbps) == ("H100", "tcpxo", 1600.0)
    a2 = found["gcp:us-central1:a2-highgpu-1g"]
    assert (a2.gpu_model, a2.gpus_per_node, a2.gpu_memory_gb, a2.fabric) == ("A100-40GB", 1, 40.0, "none")
    g2 = found["gcp:us-central1:g2-standard-8"]
    assert (g2.gpu_model, g2.gpus_per_node, g2.gpu_memory_gb, g2.fabric) == ("L4", 1, 24.0, "none")
    # g2-standard-8 has no row in gcp.csv: 8 vCPUs x G2 core + 32 GiB x G2 RAM + 1 L4, Spot SKUs for spot
    assert g2.spot_usd_h == pytest.approx(
        8 * usd("Spot Preemptible G2 Instance Core running in Americas")
        + 32 * usd("Spot Preemptible G2 Instance Ram running in Americas")
        + usd("Nvidia L4 GPU attached to Spot Preemptible VMs running in Americas"),
        abs=1e-9,
    )
    # the source names the API, the endpoint and the SKU ids with their quantities
    ids = [
        sku(d)["skuId"]
        for d in (
            "A3 Instance Core running in Americas",
            "A3 Instance Ram running in Americas",
            "Nvidia H100 80GB GPU running in Americas",
        )
    ]
    record = a3.price_provenance("on_demand")
    assert (record.basis, record.as_of) == ("quoted", NOW)
    assert record.source == (
        f"{SOURCE} ({url}/v1): {ids[0]} x 208 vCPU + {ids[1]} x 1872 GiB + {ids[2]} x 8 GPU"
    )
    three_year = a3.price_provenance("reserved_3y")
    assert three_year.basis == "quoted"
    assert sku("Commitment v1: A3 Cpu in Americas for 3 Years")["skuId"] in three_year.source
    assert "committed-use resource-based no-upfront" in three_year.source
    # no machine type without GPUs, no SKU outside the assembly (N1, G2 Custom, sole tenancy, storage)
    assert not any("n2-" in i or "n1-" in i for i in found)
    assert result.failed_regions == {}
    assert lines[:2] == ["gcp us-central1: 6 GPU machine types", "gcp us-east4: 5 GPU machine types"]
    assert any(line.startswith("gcp billing catalog: page 3,") for line in lines)


def test_a3_highgpu_8g_us_central1_equals_the_commitment_prices_file(url: str) -> None:
    """An independent calculation: 208 vCPUs, 1872 GiB and 8 H100s at the fixture SKUs' unit prices, per
    usage type, is the machine price of gcp.csv, and the fetcher says the same."""
    result, _ = run(url)
    a3 = by_id(result)["gcp:us-central1:a3-highgpu-8g"]
    skus = {
        "on_demand": (
            "A3 Instance Core running in Americas",
            "A3 Instance Ram running in Americas",
            "Nvidia H100 80GB GPU running in Americas",
        ),
        "spot": (
            "Spot Preemptible A3 Instance Core running in Americas",
            "Spot Preemptible A3 Instance Ram running in Americas",
            "Nvidia H100 80GB GPU attached to Spot Preemptible VMs running in Americas",
        ),
        "reserved_1y": (
            "Commitment v1: A3 Cpu in Americas for 1 Year",
            "Commitment v1: A3 Ram in Americas for 1 Year",
            "Commitment v1: Nvidia H100 80GB GPU running in Americas for 1 Year",
        ),
        "reserved_3y": (
            "Commitment v1: A3 Cpu in Americas for 3 Years",
            "Commitment v1: A3 Ram in Americas for 3 Years",
            "Commitment v1: Nvidia H100 80GB GPU running in Americas for 3 Years",
        ),
    }
    for tier, (core, ram, gpu) in skus.items():
        machine = 208 * usd(core) + 1872 * usd(ram) + 8 * usd(gpu)
        assert machine == pytest.approx(A3_HIGH_US_CENTRAL1[tier], abs=1e-4), tier
        assert a3.price(tier) == pytest.approx(machine, abs=1e-9), tier


def test_every_page_is_read_once_in_order(url: str, fake: PriceFake) -> None:
    result, lines = run(url)
    asked = [q for path, q in fake.requests if path.endswith("/skus")]
    assert [q.get("pageToken", [""])[0] for q in asked] == ["", PAGE_2, fake.pages[1]["nextPageToken"]]
    assert all(q["pageSize"] == ["5000"] and q["currencyCode"] == ["USD"] for q in asked)
    # the global catalog is read once for both regions, and each page adds SKUs used
    assert [line.split(",")[0] for line in lines if "billing catalog" in line] == [
        f"gcp billing catalog: page {n}" for n in (1, 2, 3)
    ]
    unknown = [
        (o.id, t)
        for o in result.offerings
        for t in ("on_demand", "spot", "reserved_1y", "reserved_3y")
        if o.price(t) is None
    ]
    assert unknown == [
        ("gcp:us-central1:a3-megagpu-8g", "reserved_1y"),
        ("gcp:us-central1:a3-megagpu-8g", "reserved_3y"),
    ]


def test_a_throttled_page_is_retried_then_read(url: str, fake: PriceFake) -> None:
    fake.fail(
        f"/skus\\?.*pageToken={PAGE_2}",
        429,
        times=2,
        message="Quota exceeded for quota metric 'Read requests'",
    )
    result, _ = run(url)
    assert fake.count(r"/skus$", token=PAGE_2) == 3
    a3 = by_id(result)["gcp:us-central1:a3-highgpu-8g"]
    assert [a3.price(t) for t in A3_HIGH_US_CENTRAL1] == pytest.approx(
        list(A3_HIGH_US_CENTRAL1.values()), abs=1e-4
    )
    assert result.failed_regions == {}


def test_throttling_that_never_ends_fails_the_fetch_as_throttled(url: str, fake: PriceFake) -> None:
    fake.fail(r"/skus", 429, times=100)
    with pytest.raises(Throttled) as caught:
        gcp.fetch(request(url, attempts=3))
    assert (caught.value.cloud, caught.value.operation, caught.value.code) == ("gcp", "list skus", "429")
    assert fake.count(r"/skus$") == 3


def test_a_missing_sku_makes_that_tier_unknown_never_a_partial_sum(url: str, fake: PriceFake) -> None:
    gone = "Spot Preemptible A3 Instance Ram running in Virginia"
    fake.edit_skus(lambda s: None if s["description"] == gone else s)
    result, _ = run(url)
    found = by_id(result)
    # the fixtures have no commitment SKU for the A3 Mega GPU in Americas
    mega = found["gcp:us-central1:a3-megagpu-8g"]
    assert (mega.reserved_1y_usd_h, mega.reserved_3y_usd_h) == (None, None)
    assert mega.on_demand_usd_h == pytest.approx(92.21427, abs=1e-4)
    assert mega.price_provenance("reserved_1y").basis == "unknown"
    assert mega.price_provenance("reserved_1y").source.startswith(f"not in {SOURCE}")
    assert not [t for t in result.terms if t.offering == mega.id]
    # a missing RAM SKU: both A3 machines of us-east4 lose their spot price, not just its RAM part
    for machine in ("a3-highgpu-8g", "a3-megagpu-8g"):
        row = found[f"gcp:us-east4:{machine}"]
        assert row.spot_usd_h is None
        assert row.price_provenance("spot").basis == "unknown"
        assert row.on_demand_usd_h is not None
    assert found["gcp:us-east4:a2-highgpu-8g"].spot_usd_h == pytest.approx(18.88460, abs=1e-4)
    warnings = "\n".join(result.warnings)
    assert "gcp us-central1 a3-megagpu-8g reserved_1y: price unknown" in warnings
    assert (
        "'Commitment v1: Nvidia H100 80GB Mega GPU running in <us-central1> for 1 Year' (usageType Commit1Yr)"
        in warnings
    )
    assert "gcp us-east4 a3-highgpu-8g spot: price unknown" in warnings
    assert "'Spot Preemptible A3 Instance Ram running in <us-east4>' (usageType Preemptible)" in warnings
    assert len(result.warnings) == 4


def test_a_region_whose_machine_types_fail_is_named_and_the_others_returned(
    url: str, fake: PriceFake
) -> None:
    fake.fail(r"/zones/us-east4-b/machineTypes", 503, times=100, message="backend unavailable")
    result, lines = run(url, attempts=2)
    assert set(result.failed_regions) == {"us-east4"}
    assert (
        "503" in result.failed_regions["us-east4"]
        and "backend unavailable" in result.failed_regions["us-east4"]
    )
    assert {o.region for o in result.offerings} == {"us-central1"}
    assert len(result.offerings) == 6
    assert fake.count(r"/zones/us-east4-b/machineTypes") == 2  # retried as a transient failure first
    assert any(line.startswith("gcp us-east4: failed") for line in lines)


def test_an_unknown_region_is_named_and_the_others_returned(url: str) -> None:
    result, _ = run(url, regions=("us-central1", "europe-west9"))
    assert list(result.failed_regions) == ["europe-west9"]
    assert "404" in result.failed_regions["europe-west9"]
    assert {o.region for o in result.offerings} == {"us-central1"}


def test_a_region_the_catalog_has_no_sku_for_fails_and_the_others_are_returned(
    url: str, fake: PriceFake
) -> None:
    def without_virginia(s: dict[str, Any]) -> dict[str, Any] | None:
        return None if s["serviceRegions"] == ["us-east4"] else s

    fake.edit_skus(without_virginia)
    result, _ = run(url)
    assert (
        "no Compute Engine SKU in the Cloud Billing Catalog serves us-east4"
        in result.failed_regions["us-east4"]
    )
    assert {o.region for o in result.offerings} == {"us-central1"}


def test_the_gpu_filter_keeps_the_models_asked_for(url: str, fake: PriceFake) -> None:
    result, _ = run(url, gpus=("H100",))
    assert sorted(by_id(result)) == [
        f"gcp:{r}:{m}" for r in REGIONS for m in ("a3-highgpu-8g", "a3-megagpu-8g")
    ]
    assert fake.count(r"/skus$") == 3


def test_catalog_and_terms_files_keep_prices_and_provenance(url: str, tmp_path: Path) -> None:
    result, _ = run(url)
    path = tmp_path / "catalog.csv"
    write_catalog(result.offerings, path)
    write_terms(result.terms, terms_path_for(path))
    catalog = Catalog.load(path)
    terms = read_terms(terms_path_for(path))
    a3 = catalog.get("gcp:us-central1:a3-highgpu-8g")
    for tier, price in A3_HIGH_US_CENTRAL1.items():
        assert a3.price(tier) == pytest.approx(price, abs=1e-4)
        record = a3.price_provenance(tier)
        assert record.basis == "quoted" and record.source.startswith(SOURCE) and record.as_of == NOW
    mega = catalog.get("gcp:us-central1:a3-megagpu-8g")
    assert mega.reserved_1y_usd_h is None and mega.price_provenance("reserved_1y").basis == "unknown"
    assert catalog.provenance_counts()["unknown"] == 2
    assert len(catalog) == len(result.offerings) == 11
    a3_terms = sorted(
        (t.term_years, t.kind, t.payment, t.offering_class) for t in terms if t.offering == a3.id
    )
    assert a3_terms == [
        (1, "committed-use", "no-upfront", "resource-based"),
        (3, "committed-use", "no-upfront", "resource-based"),
    ]
    one_year = next(t for t in terms if t.offering == a3.id and t.term_years == 1)
    assert one_year.usd_h == pytest.approx(A3_HIGH_US_CENTRAL1["reserved_1y"], abs=1e-4)
    assert one_year.source.startswith(SOURCE) and one_year.as_of == NOW
    assert len(terms) == 2 * 11 - 2


def test_no_project_to_read_machine_types_in_is_an_invalid_request(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT")
    monkeypatch.delenv("CLOUDSDK_CORE_PROJECT", raising=False)
    with pytest.raises(InvalidRequest, match="GOOGLE_CLOUD_PROJECT"):
        gcp.fetch(request(url))


def test_the_module_imports_without_the_sdk_and_fetch_names_the_extra() -> None:
    code = (
        "import sys\n"
        "sys.modules['google.cloud.billing_v1'] = None\n"
        "import providers.pricing.gcp as g\n"
        "assert 'google.cloud.compute_v1' not in sys.modules, 'SDK imported at import time'\n"
        "from datetime import datetime, UTC\n"
        "from providers.errors import MissingSDK\n"
        "from providers.pricing.common import FetchRequest\n"
        "try:\n"
        "    g.fetch(FetchRequest(regions=('us-central1',), gpus=(), now=datetime.now(UTC)))\n"
        "except MissingSDK as e:\n"
        "    print(e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "pip install 'gpuplan[gcp]'" in done.stdout


def test_a_tiered_sku_is_priced_at_its_last_tier(url: str, fake: PriceFake) -> None:
    """A free first tier (as E2's free allowance) is not what a fleet pays: the last tier's rate is."""
    described = "Nvidia H100 80GB GPU running in Americas"
    paid = usd(described)

    def free_first_hour(s: dict[str, Any]) -> dict[str, Any]:
        if s["description"] == described:
            rates = s["pricingInfo"][0]["pricingExpression"]["tieredRates"]
            free = {"startUsageAmount": 0, "unitPrice": {"currencyCode": "USD", "units": "0", "nanos": 0}}
            rates[:] = [free, {**rates[0], "startUsageAmount": 1}]
        return s

    fake.edit_skus(free_first_hour)
    result, _ = run(url, gpus=("H100",))
    a3 = by_id(result)["gcp:us-central1:a3-highgpu-8g"]
    assert a3.on_demand_usd_h == pytest.approx(A3_HIGH_US_CENTRAL1["on_demand"], abs=1e-4)
    assert paid > 9


def test_a_gpu_sku_spelled_another_way_prices_it_and_the_preferred_spelling_wins(
    url: str, fake: PriceFake
) -> None:
    """A3 Mega's GPU SKUs have been "Mega" and "Plus"; the commitment missing in Americas is found under the
    other name, and where both exist the first spelling of GPU_SKU_NAMES is used."""
    extra: list[dict[str, Any]] = []
    for years, word, price in ((1, "Year", "5"), (3, "Years", "3")):
        new = json.loads(
            json.dumps(sku(f"Commitment v1: Nvidia H100 80GB GPU running in Americas for {years} {word}"))
        )
        new["description"] = (
            f"Commitment v1: Nvidia H100 80GB Plus GPU running in Americas for {years} {word}"
        )
        new["skuId"] = f"PLUS-000{years}-AMER"
        new["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"]["units"] = price
        new["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"]["nanos"] = 0
        extra.append(new)
    shadow = json.loads(json.dumps(sku("Nvidia H100 80GB Mega GPU running in Virginia")))
    shadow["description"] = "Nvidia H100 80GB Plus GPU running in Virginia"
    shadow["skuId"] = "PLUS-0000-VIRG"
    shadow["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"]["units"] = "99"
    fake.pages[-1]["skus"].extend(extra)
    fake.pages[0]["skus"].insert(0, shadow)
    # a SKU whose description and usage type disagree is not what it seems: not used
    liar = json.loads(json.dumps(sku("Commitment v1: A3 Cpu in Americas for 3 Years")))
    liar["category"]["usageType"] = "Commit1Yr"
    liar["skuId"] = "LIAR-0000-0001"
    fake.pages[0]["skus"].insert(0, liar)
    result, _ = run(url, gpus=("H100",))
    found = by_id(result)
    mega = found["gcp:us-central1:a3-megagpu-8g"]
    host_1y = 208 * usd("Commitment v1: A3 Cpu in Americas for 1 Year") + 1872 * usd(
        "Commitment v1: A3 Ram in Americas for 1 Year"
    )
    assert mega.reserved_1y_usd_h == pytest.approx(host_1y + 8 * 5, abs=1e-9)
    assert "PLUS-0001-AMER" in mega.price_provenance("reserved_1y").source
    assert "LIAR-0000-0001" not in mega.price_provenance("reserved_1y").source
    assert found["gcp:us-east4:a3-megagpu-8g"].on_demand_usd_h == pytest.approx(92.21430, abs=1e-4)
    assert not result.warnings


def test_a_catalog_reply_that_does_not_parse_fails_the_fetch_as_a_provider_error(
    url: str, fake: PriceFake
) -> None:
    fake.pages[1]["skus"][0]["pricingInfo"][0]["pricingExpression"]["tieredRates"] = "not a list"
    with pytest.raises(ProviderError) as caught:
        gcp.fetch(request(url))
    assert (caught.value.cloud, caught.value.operation) == ("gcp", "list skus")
