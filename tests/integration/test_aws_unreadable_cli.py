"""`gpuplan provision --cloud aws` when the endpoint answers with a page that is not the API's: the CLI
exits 6 (the cloud could not be read) with one clear line, never a traceback (issue 35 point 5).

The endpoint is moto's server on 127.0.0.1 with none of the stand-in's hooks: it answers the placement
group calls, which it lacks, with werkzeug's HTML 500 page, and botocore's parser fails on it as it would
on a proxy's page."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import boto3
import yaml
from typer.testing import CliRunner

from models.plan import Plan
from planner.cli import app


def test_an_html_answer_exits_6_naming_what_could_not_be_read(
    aws_env: None, moto_server: str, week_plan: Callable[[str], Path], tmp_path: Path
) -> None:
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto_server)
    vpc = ec2.create_vpc(CidrBlock="10.60.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.60.1.0/24", AvailabilityZone="us-east-1a")
    settings = {
        "aws": {
            "endpoint_url": moto_server,
            "image_id": "ami-0a1b2c3d4e5f60718",
            "subnets": {"us-east-1": [subnet["Subnet"]["SubnetId"]]},
            "retry": {"attempts": 1},
        }
    }
    config = tmp_path / "providers.yaml"
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    plan_dir = week_plan("aws")
    gang = next(t for t in Plan.read(plan_dir).document.training if t.nodes > 1)
    at = f"{gang.start + timedelta(hours=1):%Y-%m-%dT%H:%M:%SZ}"
    result = CliRunner().invoke(
        app,
        ["provision", str(plan_dir), "--cloud", "aws", "--at", at, "--provider-config", str(config),
         "--actions", str(tmp_path / "actions.json"), "-q"],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 6, result.output
    assert "cloud error:" in result.output and "could not be read" in result.output
    assert "500 Internal Server Error" in result.output and "[ResponseParserError]" in result.output
    assert "Traceback" not in result.output and "<html" not in result.output.lower()
