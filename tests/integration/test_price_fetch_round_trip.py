"""Issue 37's round trip: `gpuplan catalog fetch` from the three clouds' price-API stand-ins, a plan on the
fetched catalog, `gpuplan verify`; and a failing region that leaves the others written, exit 6.

The real clients (botocore, google-cloud-billing and google-cloud-compute over REST, httpx) talk to the
loopback stand-ins of ``aws_price_fake``, ``gcp_price_fake`` and ``azure_price_fake`` through
``--endpoint``; moto's server answers EC2's DescribeInstanceTypes behind the AWS stand-in.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from aws_price_fake import AwsPriceFake
from aws_stand_in import moto_running
from azure_price_fake import AzurePriceFake, Fault
from gcp_price_fake import PriceFake, serve
from typer.testing import CliRunner

from models.catalog import Catalog
from models.priceterms import read_terms
from models.tiers import Tier
from planner.cli import app


@pytest.fixture(scope="module")
def ec2_upstream() -> Iterator[str]:
    with moto_running() as url:
        yield url


@pytest.fixture
def endpoints(
    aws_env: None, ec2_upstream: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, object]]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    aws = AwsPriceFake.from_fixtures(ec2_upstream=ec2_upstream)
    aws_serving = aws.serve()
    aws_url = next(aws_serving)
    azure = AzurePriceFake(page_size=4).load("eastus", "eastus2")
    azure_url = azure.start()
    with serve(PriceFake.from_fixtures()) as gcp_url:
        yield {
            "azure": azure,
            "args": [
                *("--endpoint", f"aws-pricing={aws_url}", "--endpoint", f"aws-savingsplans={aws_url}"),
                *("--endpoint", f"aws-ec2={aws_url}", "--endpoint", f"gcp-billing={gcp_url}"),
                *("--endpoint", f"gcp-compute={gcp_url}", "--endpoint", f"azure-prices={azure_url}"),
                *("--project", "gpuplan-test"),
            ],
        }
    azure.stop()
    aws_serving.close()


def _fetch(endpoints: dict[str, object], out: Path, *regions: str) -> object:
    args = ["catalog", "fetch", "-q", "-o", str(out), *endpoints["args"]]  # type: ignore[misc]
    for cloud in ("aws", "gcp", "azure"):
        args += ["--cloud", cloud]
    for region in regions:
        args += ["--region", region]
    return CliRunner().invoke(app, args)


def test_fetch_plan_and_verify_on_the_fetched_catalog(endpoints: dict[str, object], tmp_path: Path) -> None:
    catalog_path = tmp_path / "catalog.csv"
    fetched = _fetch(endpoints, catalog_path, "aws:us-east-1", "gcp:us-central1", "azure:eastus")
    assert fetched.exit_code == 0, fetched.output  # type: ignore[attr-defined]
    catalog = Catalog.load(catalog_path)
    assert {o.cloud for o in catalog} == {"aws", "gcp", "azure"}
    p5 = catalog.get("aws:us-east-1:p5.48xlarge")
    # the price list's on-demand and the EC2 Instance Savings Plan rates of the fixtures (aws.csv's figures)
    assert p5.on_demand_usd_h == pytest.approx(55.04)
    assert (p5.reserved_1y_usd_h, p5.reserved_3y_usd_h) == pytest.approx((34.6752, 23.77728))
    h100 = catalog.get("azure:eastus:Standard_ND96isr_H100_v5")
    assert h100.reserved_1y_usd_h == pytest.approx(551221.0 / 8760)  # the whole-term price over a year
    for offering in catalog:
        for tier in (Tier.ON_DEMAND, Tier.RESERVED_1Y):
            said = offering.price_provenance(tier)
            assert said.basis in ("quoted", "unknown"), (offering.id, tier)
    terms = read_terms(catalog_path.with_name("catalog.terms.csv"))
    assert {t.kind for t in terms} >= {
        "reserved-instance",
        "savings-plan-ec2-instance",
        "committed-use",
        "reservation",
    }

    # a week of two H100 nodes per hour, on any of the three clouds, planned on the fetched catalog
    (tmp_path / "demand.csv").write_text("hour,replicas\n0,2\n", encoding="utf-8")
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(
        yaml.safe_dump(
            {
                "name": "fetched",
                "horizon": {"start": "2027-01-04T00:00:00Z", "hours": 168, "period_hours": 1},
                "catalog": "catalog.csv",
                "purchase": {"terms": ["1y", "3y"], "max_spot_share": 1.0},
                "teams": [{"name": "t"}],
                "inference": [
                    {"name": "chat", "team": "t", "gpus_per_replica": 8, "gpu_models": ["H100"],
                     "latency_critical": True, "replicas": {"csv": "demand.csv"}}
                ],
            }
        ),
        encoding="utf-8",
    )  # fmt: skip
    runner = CliRunner()
    planned = runner.invoke(
        app, ["plan", str(scenario), "-o", str(tmp_path / "plan"), "-q", "--time-limit", "60"]
    )
    assert planned.exit_code == 0, planned.output
    document = json.loads((tmp_path / "plan" / "plan.json").read_text())
    assert document["prices"]["catalog"] == str(catalog_path)
    assert set(document["prices"]["counts"]) == {"quoted"}  # every price the plan uses was fetched
    assert "assumed price" not in planned.output
    checked = runner.invoke(app, ["verify", str(scenario), str(tmp_path / "plan")])
    assert checked.exit_code == 0, checked.output


def test_a_failing_region_is_named_and_the_others_written(
    endpoints: dict[str, object], tmp_path: Path
) -> None:
    azure = endpoints["azure"]
    assert isinstance(azure, AzurePriceFake)
    azure.faults.append(Fault("eastus2", status=200, times=None, body='{"Items": "none"}'))
    out = tmp_path / "catalog.csv"
    result = _fetch(endpoints, out, "aws:us-east-1", "gcp:us-central1", "azure:eastus", "azure:eastus2")
    said = " ".join(result.output.split())  # type: ignore[attr-defined]
    assert result.exit_code == 6, said  # type: ignore[attr-defined]
    assert "failed: azure eastus2:" in said
    regions = {(o.cloud, o.region) for o in Catalog.load(out)}
    assert ("azure", "eastus") in regions and ("aws", "us-east-1") in regions
    assert ("azure", "eastus2") not in regions


def test_bad_arguments_are_refused_before_anything_is_fetched(tmp_path: Path) -> None:
    runner = CliRunner()
    cases = [
        (["--cloud", "oracle"], "unknown cloud 'oracle'"),
        (["--cloud", "aws", "--cloud", "gcp", "--region", "us-east-1"], "write cloud:region"),
        (["--cloud", "aws", "--endpoint", "aws-pricing"], "NAME=URL"),
        (["--cloud", "aws", "--spot-days", "0"], "1 to 90 days"),
        ([], "name a cloud"),
    ]
    for args, problem in cases:
        result = runner.invoke(app, ["catalog", "fetch", "-o", str(tmp_path / "c.csv"), *args])
        assert result.exit_code == 2, (args, result.output)
        assert problem in " ".join(result.output.split()), (args, result.output)
        assert not (tmp_path / "c.csv").exists()
