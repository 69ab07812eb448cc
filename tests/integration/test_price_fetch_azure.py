"""The Azure price fetcher (``providers.pricing.azure``) with the real httpx client against a local stand-in
of the Retail Prices API (``azure_price_fake``) serving the fixtures of ``tests/fixtures/prices/azure/``:
the parse, pagination, throttling, missing and unusable prices, a failing region, and the round trip through
the catalog and terms files."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from azure_price_fake import AzurePriceFake, Fault

from models.catalog import Catalog, Offering, write_catalog
from models.priceterms import read_terms, terms_path_for, write_terms
from providers.errors import InvalidRequest, OperationFailed, ProviderError
from providers.pricing import azure
from providers.pricing.common import FetchRequest, FetchResult

NOW = datetime(2026, 12, 5, 8, 0, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]
H100_EASTUS = "azure:eastus:Standard_ND96isr_H100_v5"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[AzurePriceFake]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)  # loopback must not go through a proxy
    server = AzurePriceFake(page_size=4).load("eastus", "eastus2")
    server.start()
    yield server
    server.stop()


def ask(fake: AzurePriceFake, *regions: str, gpus: tuple[str, ...] = (), attempts: int = 5) -> FetchRequest:
    return FetchRequest(
        regions=regions or ("eastus", "eastus2"),
        gpus=gpus,
        now=NOW,
        endpoints={"azure-prices": fake.base},
        attempts=attempts,
        backoff_seconds=0.001,
    )


def by_id(result: FetchResult) -> dict[str, Offering]:
    return {o.id: o for o in result.offerings}


def offering(result: FetchResult, offering_id: str) -> Offering:
    return by_id(result)[offering_id]


# -- the parse -----------------------------------------------------------------------------------------------


def test_parse_prices_shapes_and_sources(fake: AzurePriceFake) -> None:
    result = azure.fetch(ask(fake))
    assert result.failed_regions == {}
    assert sorted(by_id(result)) == [
        "azure:eastus2:Standard_NC24ads_A100_v4",
        "azure:eastus2:Standard_ND96amsr_A100_v4",
        "azure:eastus2:Standard_ND96isr_H100_v5",
        "azure:eastus2:Standard_ND96isr_H200_v5",
        "azure:eastus:Standard_NC24ads_A100_v4",
        "azure:eastus:Standard_NC40ads_H100_v5",
        "azure:eastus:Standard_ND96amsr_A100_v4",
        "azure:eastus:Standard_ND96isr_H100_v5",
    ]
    h100 = offering(result, H100_EASTUS)
    assert (h100.gpu_model, h100.gpus_per_node, h100.gpu_memory_gb) == ("H100", 8, 80)
    assert (h100.fabric, h100.fabric_gbps) == ("infiniband", 3200)
    assert h100.on_demand_usd_h == 98.32
    a100 = offering(result, "azure:eastus:Standard_ND96amsr_A100_v4")
    # the Linux pay-as-you-go meter, not Windows (37.186); the Spot meter, not Low Priority (6.554)
    assert (a100.on_demand_usd_h, a100.spot_usd_h) == (32.77, 3.6047)
    nc = offering(result, "azure:eastus:Standard_NC40ads_H100_v5")
    assert (nc.gpu_model, nc.gpus_per_node, nc.gpu_memory_gb, nc.fabric) == ("H100-NVL", 1, 94, "none")
    on_demand = next(p for p in h100.provenance if p.tier == "on_demand")
    assert on_demand.basis == "quoted"
    assert on_demand.as_of == NOW
    assert on_demand.source == (
        f"Azure Retail Prices API {fake.base} api-version=2023-01-01-preview "
        "effectiveStartDate=2024-04-01T00:00:00Z"
    )


def test_reservation_whole_term_price_becomes_the_hourly_reserved_tiers(fake: AzurePriceFake) -> None:
    h100 = offering(azure.fetch(ask(fake)), H100_EASTUS)
    # independent: the API's whole-term unitPrice over the term's hours (azure.csv: 1 Year 551221.0)
    assert round(h100.reserved_1y_usd_h or 0, 4) == round(551221.0 / 8760, 4) == 62.9248
    assert round(h100.reserved_3y_usd_h or 0, 4) == round(1134310.0 / 26280, 4) == 43.1625
    reserved = {p.tier: p for p in h100.provenance}["reserved_1y"]
    assert reserved.basis == "quoted"
    assert "reservationTerm=1 Year" in reserved.source and "(reservation no-upfront)" in reserved.source


def test_terms_reservations_and_savings_plans_no_5_year(fake: AzurePriceFake) -> None:
    result = azure.fetch(ask(fake))
    terms = {(t.kind, t.term_years): t for t in result.terms if t.offering == H100_EASTUS}
    assert sorted(terms) == [("reservation", 1), ("reservation", 3), ("savings-plan", 1), ("savings-plan", 3)]
    assert terms[("savings-plan", 1)].usd_h == 74.7232
    assert terms[("savings-plan", 3)].usd_h == 48.1768
    assert all(t.payment == "no-upfront" and t.upfront_usd == 0 for t in terms.values())
    assert terms[("reservation", 3)].usd_h == pytest.approx(1134310.0 / 26280)
    assert "savingsPlan term=1 Year" in terms[("savings-plan", 1)].source
    assert not any(t.term_years == 5 for t in result.terms)


def test_dev_test_and_future_prices_are_not_used(fake: AzurePriceFake) -> None:
    result = azure.fetch(ask(fake))
    # eastus2 lists 101.0 from 2027-03-01: not yet the price on 2026-12-05
    assert offering(result, "azure:eastus2:Standard_ND96isr_H100_v5").on_demand_usd_h == 98.32
    later = FetchRequest(
        regions=("eastus2",), gpus=("H100",), now=datetime(2027, 4, 1, tzinfo=UTC),
        endpoints={"azure-prices": fake.base}, backoff_seconds=0.001,
    )  # fmt: skip
    assert offering(azure.fetch(later), "azure:eastus2:Standard_ND96isr_H100_v5").on_demand_usd_h == 101.0


def test_query_is_the_documented_one(fake: AzurePriceFake) -> None:
    azure.fetch(ask(fake, "eastus"))
    first = fake.pages_of("eastus")[0].query
    assert first["api-version"] == ["2023-01-01-preview"]
    assert first["$filter"] == [
        "serviceName eq 'Virtual Machines' and armRegionName eq 'eastus' and "
        "(contains(armSkuName, 'Standard_NC') or contains(armSkuName, 'Standard_ND'))"
    ]


def test_gpu_filter_keeps_the_wanted_models_and_families(fake: AzurePriceFake) -> None:
    result = azure.fetch(ask(fake, gpus=("H200",)))
    assert sorted(by_id(result)) == ["azure:eastus2:Standard_ND96isr_H200_v5"]
    assert "Standard_NC" not in fake.pages_of("eastus")[0].query["$filter"][0]
    nothing = azure.fetch(ask(fake, gpus=("L4",)))
    assert nothing.offerings == [] and "no size" in nothing.warnings[0]


# -- pagination and throttling -------------------------------------------------------------------------------


def test_follows_next_page_link_to_the_last_page(fake: AzurePriceFake) -> None:
    result = azure.fetch(ask(fake))
    for region, pages in (("eastus", 5), ("eastus2", 4)):  # 19 and 13 items, 4 a page
        recorded = fake.pages_of(region)
        assert [r.page for r in recorded] == list(range(1, pages + 1))
        assert recorded[-1].query["$skip"] == [str(4 * (pages - 1))]
    # eastus2's last page holds only NC24ads_A100_v4's spot meter
    assert offering(result, "azure:eastus2:Standard_NC24ads_A100_v4").spot_usd_h == 0.47749


def test_throttled_and_5xx_pages_are_retried(fake: AzurePriceFake) -> None:
    fake.faults += [
        Fault("eastus", status=429, page=2, times=2, headers={"Retry-After": "0"}),
        Fault("eastus2", status=503, page=3, times=1),
    ]
    result = azure.fetch(ask(fake))
    assert result.failed_regions == {}
    assert [r.status for r in fake.pages_of("eastus") if r.page == 2] == [429, 429, 200]
    assert [r.status for r in fake.pages_of("eastus2") if r.page == 3] == [503, 200]
    assert offering(result, H100_EASTUS).reserved_1y_usd_h == pytest.approx(551221.0 / 8760)
    assert len(result.offerings) == 8


def test_retry_after_is_waited_for(fake: AzurePriceFake) -> None:
    fake.faults.append(Fault("eastus", status=429, page=1, times=1, headers={"Retry-After": "1"}))
    started = time.monotonic()
    result = azure.fetch(ask(fake, "eastus"))
    assert time.monotonic() - started >= 0.95  # the backoff alone is a millisecond
    assert result.failed_regions == {} and len(result.offerings) == 4


# -- missing and unusable prices -----------------------------------------------------------------------------


def test_missing_price_is_unknown_with_a_warning(fake: AzurePriceFake) -> None:
    result = azure.fetch(ask(fake))
    h100 = offering(result, H100_EASTUS)  # ND H100 v5 has no Spot meter
    assert h100.spot_usd_h is None
    spot = {p.tier: p for p in h100.provenance}["spot"]
    assert spot.basis == "unknown" and spot.source.startswith("not in Azure Retail Prices API")
    assert f"{H100_EASTUS}: no usable spot price in the Retail Prices API: unknown" in result.warnings
    nc = offering(result, "azure:eastus:Standard_NC40ads_H100_v5")  # no reservation meter: its savings plan
    plans = {t.term_years: t.usd_h for t in result.terms if t.offering == nc.id and t.kind == "savings-plan"}
    assert (nc.on_demand_usd_h, nc.reserved_1y_usd_h, nc.reserved_3y_usd_h) == (6.98, plans[1], plans[3])
    assert "(savings-plan no-upfront)" in {p.tier: p for p in nc.provenance}["reserved_1y"].source
    assert not any("NC40ads_H100_v5: no usable 1-year reservation" in w for w in result.warnings)


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("currencyCode", "EUR", "currencyCode 'EUR', not USD"),
        ("unitOfMeasure", "1/Month", "unitOfMeasure '1/Month', not '1 Hour'"),
        ("unitPrice", 0.0, "unitPrice 0.0 is not a price above 0"),
    ],
)
def test_unusable_price_is_unknown_never_converted(
    fake: AzurePriceFake, field: str, value: object, said: str
) -> None:
    spot = next(
        i for i in fake.items if i["armSkuName"] == "Standard_ND96amsr_A100_v4" and "Spot" in i["skuName"]
    )
    spot[field] = value
    result = azure.fetch(ask(fake, "eastus"))
    a100 = offering(result, "azure:eastus:Standard_ND96amsr_A100_v4")
    assert a100.spot_usd_h is None and a100.on_demand_usd_h == 32.77
    assert f"azure:eastus:Standard_ND96amsr_A100_v4: spot: {said}; that price is unknown" in result.warnings


@pytest.mark.parametrize(
    "change",
    [
        {"type": "DevTestConsumption"},  # Dev/Test subscriptions only
        {"isPrimaryMeterRegion": False},  # a non-primary meter region's copy
        {"tierMinimumUnits": 100.0},  # a volume tier
        {"productName": "Virtual Machines NDamsr A100 v4 Series Windows"},  # licence included
        {"skuName": "ND96amsr A100 v4 Low Priority"},  # low priority, not spot
    ],
)
def test_meters_gpuplan_does_not_plan_are_ignored(fake: AzurePriceFake, change: dict[str, object]) -> None:
    """Each such meter, newer and cheaper than the real one, would win if it were read."""
    base = next(
        i for i in fake.items if i["armSkuName"] == "Standard_ND96amsr_A100_v4" and i["type"] == "Consumption"
    )
    fake.items.append({**base, **change, "unitPrice": 1.5, "effectiveStartDate": "2026-01-01T00:00:00Z"})
    a100 = offering(azure.fetch(ask(fake, "eastus")), "azure:eastus:Standard_ND96amsr_A100_v4")
    assert (a100.on_demand_usd_h, a100.spot_usd_h) == (32.77, 3.6047)


def test_size_missing_from_the_table_is_warned_and_skipped(fake: AzurePriceFake) -> None:
    result = azure.fetch(ask(fake))
    assert not any("NC6s_v3" in o.id for o in result.offerings)
    assert any("lacks" in w and "Standard_NC6s_v3 (eastus)" in w for w in result.warnings)


# -- failing regions -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        (Fault("eastus2", status=500, times=None), "HTTP 500 on page 1 after 3 attempts"),
        (Fault("eastus2", status=429, times=None, headers={"Retry-After": "0"}), "HTTP 429 on page 1"),
        (Fault("eastus2", status=200, page=2, times=None, body='{"Items": [{"armSk'), "malformed page 2"),
        (Fault("eastus2", status=200, page=2, times=None, body='{"Items": "none"}'), "malformed page 2"),
    ],
)
def test_failing_region_is_named_and_the_others_returned(
    fake: AzurePriceFake, fault: Fault, said: str
) -> None:
    fake.faults.append(fault)
    result = azure.fetch(ask(fake, attempts=3))
    assert list(result.failed_regions) == ["eastus2"]
    assert said in result.failed_regions["eastus2"]
    assert {o.region for o in result.offerings} == {"eastus"}
    assert len(result.offerings) == 4


@pytest.mark.parametrize(
    ("link", "said"),
    [
        ("https://prices.example.net/api/retail/prices?$skip=4", "leaves"),
        ("{base}/api/retail/prices?$filter=armRegionName eq 'eastus2'", "repeats an earlier page"),
    ],
)
def test_next_page_link_off_the_endpoint_or_looping_fails_the_region(
    fake: AzurePriceFake, link: str, said: str
) -> None:
    body = json.dumps({"Items": [], "NextPageLink": link.format(base=fake.base), "Count": 0})
    fake.faults.append(Fault("eastus2", status=200, times=None, body=body))
    result = azure.fetch(ask(fake))
    assert said in result.failed_regions["eastus2"] and len(result.offerings) == 4


def test_every_region_failing_is_a_provider_error(fake: AzurePriceFake) -> None:
    fake.faults += [Fault("eastus", times=None), Fault("eastus2", times=None)]
    with pytest.raises(OperationFailed, match="every region failed: eastus: HTTP 500"):
        azure.fetch(ask(fake, attempts=2))


def test_bad_request_is_a_provider_error(fake: AzurePriceFake) -> None:
    with pytest.raises(InvalidRequest, match="not an http"):
        azure.fetch(
            FetchRequest(regions=("eastus",), gpus=(), now=NOW, endpoints={"azure-prices": "ftp://x"})
        )
    with pytest.raises(ProviderError, match="no region"):
        azure.fetch(FetchRequest(regions=(), gpus=(), now=NOW, endpoints={"azure-prices": fake.base}))


# -- progress, import cost ----------------------------------------------------------------------------


def test_progress_names_each_region_and_the_total(fake: AzurePriceFake) -> None:
    lines: list[str] = []
    azure.fetch(ask(fake), lines.append)
    assert "azure eastus: 5 pages, 19 items" in lines
    assert "azure eastus2: 4 pages, 13 items" in lines
    assert lines[-1] == "azure: 8 offerings, 28 terms, 0 failed regions"


def test_import_needs_no_httpx() -> None:
    code = "import sys, providers.pricing.azure; sys.exit('httpx' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, check=False)
    assert done.returncode == 0


# -- the catalog and terms files -----------------------------------------------------------------------------


def test_round_trip_through_the_catalog_and_terms_files(fake: AzurePriceFake, tmp_path: Path) -> None:
    result = azure.fetch(ask(fake))
    path = tmp_path / "catalog.csv"
    write_catalog(result.offerings, path)
    write_terms(result.terms, terms_path_for(path))
    catalog = Catalog.load(path)
    terms = read_terms(terms_path_for(path))
    assert len(catalog) == 8 and len(terms) == len(result.terms) == 28
    h100 = catalog.get(H100_EASTUS)
    assert h100.on_demand_usd_h == 98.32
    assert round(h100.reserved_1y_usd_h or 0, 4) == 62.9248
    assert round(h100.reserved_3y_usd_h or 0, 4) == 43.1625
    assert h100.spot_usd_h is None
    said = {p.tier: p for p in h100.provenance}
    assert said["on_demand"].basis == "quoted" and "Azure Retail Prices API" in said["on_demand"].source
    assert said["reserved_1y"].basis == "quoted" and said["reserved_1y"].as_of == NOW
    assert said["spot"].basis == "unknown"
    for before in result.offerings:
        after = catalog.get(before.id)
        assert (after.gpu_model, after.gpus_per_node, after.fabric) == (
            before.gpu_model,
            before.gpus_per_node,
            before.fabric,
        )
        for tier in ("on_demand_usd_h", "spot_usd_h", "reserved_1y_usd_h", "reserved_3y_usd_h"):
            was = getattr(before, tier)
            assert getattr(after, tier) == (None if was is None else pytest.approx(was, rel=1e-9))
        assert {p.tier: (p.basis, p.source) for p in after.provenance} == {
            p.tier: (p.basis, p.source) for p in before.provenance
        }
    plans = sorted(
        (t.term_years, t.usd_h) for t in terms if t.offering == H100_EASTUS and t.kind == "savings-plan"
    )
    assert plans == [(1, 74.7232), (3, 48.1768)]


def test_unknown_on_demand_row_stays_in_the_file_and_is_not_planned(
    fake: AzurePriceFake, tmp_path: Path
) -> None:
    for item in fake.items:
        if item["armSkuName"] == "Standard_NC40ads_H100_v5":
            item["currencyCode"] = "EUR"  # not a USD price: unknown, never converted
    result = azure.fetch(ask(fake, "eastus"))
    nc = offering(result, "azure:eastus:Standard_NC40ads_H100_v5")
    assert nc.on_demand_usd_h is None
    path = tmp_path / "catalog.csv"
    write_catalog(result.offerings, path)
    assert "Standard_NC40ads_H100_v5" in path.read_text(encoding="utf-8")  # the row is kept
    catalog = Catalog.load(path)
    assert len(catalog) == 3
    assert any(
        "on-demand price of azure:eastus:Standard_NC40ads_H100_v5 is unknown" in w for w in catalog.warnings
    )
