"""`gpuplan provision` buys the Capacity Blocks the plan holds its gangs in, and launches them into it.

The plan is ``scenarios/capacity-blocks.yaml`` as ``gpuplan plan`` writes it: the 8-node fine-tune runs
from 2027-01-11 for 120 h in a block whose fee the plan puts at $39,866.88. The AWS adapter talks through
real boto3 to moto and the EC2 stand-in (``aws_stand_in.py``), which lists the offers a test gives it,
sells them (``PurchaseCapacityBlock``: a block in state ``scheduled``) and records every request; moto has
no Capacity Blocks, so a test makes the block ``active`` in the stand-in, as EC2 does at its start.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from planner.cli import app

ROOT = Path(__file__).resolve().parents[2]
PLAN_ID = "capacity-blocks-2027q1"
RUN = "finetune-0"
START = datetime(2027, 1, 11, tzinfo=UTC)  # the fine-tune's planned start
BEFORE = "2027-01-05T00:00:00Z"  # six days ahead: EC2 sells its block (8 weeks ahead at most)


@pytest.fixture(scope="module")
def block_plan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The scenario planned once for the module (about 2 s)."""
    out = tmp_path_factory.mktemp("cb") / "plan"
    result = CliRunner().invoke(
        app,
        ["plan", str(ROOT / "scenarios" / "capacity-blocks.yaml"), "-o", str(out)],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    return out


@dataclass
class Ec2:
    fake: Any  # the stand-in
    flags: list[str]
    subnet: str

    def provider(self) -> Any:
        """The AWS adapter in this process, on a session carrying the stand-in's hooks."""
        import boto3

        from providers.aws import AwsSettings, open_provider

        settings = AwsSettings(image_id="ami-0a1b2c3d4e5f60718", subnets={"us-east-1": [self.subnet]})
        return open_provider(settings, session=boto3.Session(region_name="us-east-1"), sleep=lambda _s: None)

    def purchases(self) -> list[dict[str, Any]]:
        return list(self.fake.calls("PurchaseCapacityBlock"))


def _offer(offer_id: str, fee: str, start: datetime, *, count: int = 8, hours: int = 120) -> dict[str, Any]:
    return {
        "CapacityBlockOfferingId": offer_id,
        "InstanceType": "p5.48xlarge",
        "AvailabilityZone": "us-east-1a",
        "InstanceCount": count,
        "StartDate": start,
        "EndDate": start + timedelta(hours=hours),
        "CapacityBlockDurationHours": hours,
        "UpfrontFee": fee,
        "CurrencyCode": "USD",
        "Tenancy": "default",
    }


@pytest.fixture
def ec2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, aws_env: None) -> Iterator[Ec2]:
    """moto and the stand-in on every boto3 session the CLI opens, selling four blocks for the fine-tune:
    one that starts after the run's planned start (cheapest, never bought), one that starts early and ends
    before the run does (never bought), and two that hold it."""
    from aws_stand_in import Ec2StandIn
    from stand_in_settings import aws_site

    stand_in = Ec2StandIn()
    with aws_site(monkeypatch, ("us-east-1",), stand_in) as body:
        settings = tmp_path / "providers.yaml"
        settings.write_text(yaml.safe_dump({"aws": body}), encoding="utf-8")
        stand_in.block_offerings = [
            _offer("cb-late", "20000.00", START + timedelta(hours=11, minutes=30)),
            # starts 12.5 h early and lasts the run's 120 h: it ends before the run does, never bought
            _offer("cb-short", "30000.00", START - timedelta(hours=12, minutes=30)),
            _offer("cb-cheap", "36000.00", START - timedelta(hours=12, minutes=30), hours=144),
            _offer("cb-dear", "45000.00", START),
        ]
        flags = ["--cloud", "aws", "--provider-config", str(settings), "-q"]
        yield Ec2(stand_in, flags, body["subnets"]["us-east-1"][0])


def _provision(plan: Path, ec2: Ec2, at: str, *extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        app, ["provision", str(plan), "--at", at, *ec2.flags, *extra], catch_exceptions=False
    )
    return result.exit_code, result.output


def _line(output: str, run: str = RUN) -> str:
    (line,) = [x for x in output.splitlines() if x.startswith(f"  {run}: ")]
    return line


def _copy(block_plan: Path, tmp_path: Path) -> Path:
    plan = tmp_path / "plan"
    shutil.copytree(block_plan, plan)
    return plan


def test_a_planned_block_is_bought_only_with_apply_and_a_cap_it_fits_and_only_once(
    block_plan: Path, ec2: Ec2, tmp_path: Path
) -> None:
    plan = _copy(block_plan, tmp_path)
    code, dry = _provision(plan, ec2, BEFORE)
    assert code == 0, dry
    line = _line(dry)
    # the cheapest offer that holds the run: not cb-late (it starts after the run), not cb-dear
    assert "would-buy: would buy cb-cheap" in line and "$36,000.00 upfront" in line
    assert "the plan's fee for the block: $39,866.88" in line and "a cost cap is needed" in line
    assert "pretrain-0: no-offer" in dry  # its 16 nodes: nothing offered

    code, apply_no_cap = _provision(plan, ec2, BEFORE, "--apply")
    assert code == 0 and "a cost cap is needed" in _line(apply_no_cap)
    code, dry_cap = _provision(plan, ec2, BEFORE, "--block-max-usd", "40000")
    assert code == 0 and "would buy cb-cheap" in _line(dry_cap) and "--apply buys it" in _line(dry_cap)
    code, over = _provision(plan, ec2, BEFORE, "--apply", "--block-max-usd", "30000")
    assert code == 0
    assert "over-cap: the best offer cb-cheap" in _line(over) and "over the cap of $30,000.00" in _line(over)
    assert "the plan's fee for the block: $39,866.88" in _line(over)
    assert ec2.purchases() == []
    assert not ec2.fake.calls("CreateCapacityReservation")  # no ODCR ahead for a block gang

    code, bought = _provision(plan, ec2, BEFORE, "--apply", "--block-max-usd", "40000")
    assert code == 0, bought
    assert "bought: bought cb-cheap" in _line(bought)
    (purchase,) = ec2.purchases()
    assert purchase["CapacityBlockOfferingId"] == "cb-cheap"
    tags = {t["Key"]: t["Value"] for t in purchase["TagSpecifications"][0]["Tags"]}
    assert (tags["gpuplan-plan"], tags["gpuplan-run"]) == (PLAN_ID, RUN)

    code, again = _provision(plan, ec2, BEFORE, "--apply", "--block-max-usd", "40000")
    assert code == 0 and "held: Capacity Block cr-" in _line(again)
    assert len(ec2.purchases()) == 1  # idempotent: the run's block is never bought twice


def test_another_plans_block_for_a_run_of_the_same_name_is_not_the_runs(
    block_plan: Path, ec2: Ec2, tmp_path: Path
) -> None:
    """A block tagged with the run's name by another plan is neither counted as held nor used."""
    plan = _copy(block_plan, tmp_path)
    foreign = ec2.fake.hold("us-east-1", 8, "active")
    ec2.fake.reservations[foreign]["Tags"] = [
        {"Key": "gpuplan-plan", "Value": "another-plan"},
        {"Key": "gpuplan-run", "Value": RUN},
    ]
    code, output = _provision(plan, ec2, BEFORE, "--apply", "--block-max-usd", "40000")
    assert code == 0 and "bought: bought cb-cheap" in _line(output)


def test_the_gang_waits_for_its_block_then_launches_into_it(
    block_plan: Path, ec2: Ec2, tmp_path: Path
) -> None:
    plan = _copy(block_plan, tmp_path)
    code, output = _provision(plan, ec2, BEFORE, "--apply", "--block-max-usd", "40000")
    assert code == 0, output
    (block_id,) = [r for r, v in ec2.fake.reservations.items() if v["ReservationType"] == "capacity-block"]
    # a block that is not the run's (no tags of the plan) sits active beside it: never used
    ec2.fake.hold("us-east-1", 8, "active")
    started = f"{START + timedelta(minutes=30):%Y-%m-%dT%H:%M:%SZ}"

    code, waiting = _provision(plan, ec2, started, "--apply", "--block-max-usd", "40000")
    assert code == 0, waiting
    assert f"note: {RUN} waits for its Capacity Block {block_id} (scheduled" in waiting
    assert not ec2.fake.calls("RunInstances") and not ec2.fake.calls("CreateCapacityReservation")

    ec2.fake.reservations[block_id]["State"] = "active"  # EC2 activates a block at its start
    code, launched = _provision(plan, ec2, started, "--apply", "--block-max-usd", "40000")
    assert code == 0, launched
    (run,) = ec2.fake.calls("RunInstances")
    assert (run["MinCount"], run["MaxCount"]) == (8, 8)
    assert run["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert run["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": block_id}
    }
    assert "Placement" not in run  # the block places its instances together itself
    assert not ec2.fake.calls("CreateCapacityReservation") and len(ec2.purchases()) == 1

    code, again = _provision(plan, ec2, started, "--apply", "--block-max-usd", "40000")
    assert code == 0 and "0 actions" in again and len(ec2.fake.calls("RunInstances")) == 1
    assert not ec2.fake.calls("CancelCapacityReservation")  # a block is never released


KARPENTER_CRDS = ROOT.parent / "shared" / "data" / "karpenter-crds"


@pytest.mark.skipif(not KARPENTER_CRDS.is_dir(), reason=f"the Karpenter CRDs are not at {KARPENTER_CRDS}")
def test_karpenter_selects_each_planned_block_by_the_tags_provision_buys_it_with(
    block_plan: Path, tmp_path: Path
) -> None:
    """A block gang gets a reserved NodePool and an EC2NodeClass whose capacityReservationSelectorTerms
    select its block by the plan's and the run's tags (those the purchase above carries), with no placement
    group; the on-demand sweep keeps its ODCR pool. Both validate strictly against the CRDs."""
    from kueue_validate import CrdValidator

    out = tmp_path / "karpenter"
    result = CliRunner().invoke(app, ["karpenter", str(block_plan), "-o", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    documents = [
        d for path in sorted(out.glob("*/*.yaml")) for d in yaml.safe_load_all(path.read_text("utf-8")) if d
    ]
    validator = CrdValidator(KARPENTER_CRDS, "v1")
    for document in documents:
        assert validator.errors(document) == [], document["metadata"]["name"]
    classes = {d["metadata"]["name"]: d for d in documents if d["kind"] == "EC2NodeClass"}
    pools = {d["metadata"]["name"]: d for d in documents if d["kind"] == "NodePool"}
    for run, nodes in ((RUN, 8), ("pretrain-0", 16)):
        pool = pools[f"block-{run}"]
        spec = pool["spec"]["template"]["spec"]
        assert spec["requirements"][0] == {
            "key": "karpenter.sh/capacity-type",
            "operator": "In",
            "values": ["reserved"],
        }
        assert pool["spec"]["limits"] == {"nodes": nodes, "nvidia.com/gpu": 8 * nodes}
        assert pool["metadata"]["annotations"]["gpuplan.io/reservation-kind"] == "capacity-block"
        node_class = classes[spec["nodeClassRef"]["name"]]["spec"]
        assert node_class["capacityReservationSelectorTerms"] == [
            {"tags": {"gpuplan-plan": PLAN_ID, "gpuplan-run": run}}
        ]
        assert "placementGroupSelector" not in node_class
    assert "res-sweep-0" in pools and f"res-{RUN}" not in pools


def test_the_daemon_buys_with_its_cap_and_apply_and_says_when_an_offer_is_over_it(
    block_plan: Path, ec2: Ec2, tmp_path: Path
) -> None:
    """The daemon's reconcile buys the plan's block only with ``apply: true`` and ``block_max_usd``; an
    offer over the cap is a ``capacity-block-over-cap`` event (once, not every cycle), a purchase a
    ``capacity-block-bought`` event, and the next cycles buy nothing more."""
    from daemon_days import daemon_config

    from planner.operations.daemon.config import load_config
    from planner.operations.daemon.daemon import Daemon

    def planner(config: Any, _previous: Any, _now: datetime, _live: dict[str, float]) -> Path:
        target = config.plans_dir / "plan-cb"
        shutil.copytree(block_plan, target, dirs_exist_ok=True)
        return Path(target)

    scenario = ROOT / "scenarios" / "capacity-blocks.yaml"
    now = datetime(2027, 1, 5, tzinfo=UTC)
    for name, cap, apply, bought in (
        ("dry", 40000, False, 0),
        ("low", 30000, True, 0),
        ("cap", 40000, True, 1),
    ):
        (tmp_path / name).mkdir()
        path = daemon_config(tmp_path / name, scenario, block_max_usd=cap, capacity_only=True, apply=apply)
        daemon = Daemon(load_config(path), provider=ec2.provider(), planner=planner)
        for cycle in range(2):
            daemon.reconcile(now + timedelta(hours=cycle))
        assert len(ec2.purchases()) == bought, name
    (dry,) = daemon_events(tmp_path / "dry", "capacity-block-not-bought")
    assert "would buy cb-cheap" in dry.message
    (over,) = daemon_events(tmp_path / "low", "capacity-block-over-cap")  # once, not every cycle
    assert (over.data["offer"], over.data["max_usd"]) == ("cb-cheap", 30000)
    assert over.data["plan_fee_usd"] == pytest.approx(39866.88) and "over the cap" in over.message
    (event,) = daemon_events(tmp_path / "cap", "capacity-block-bought")
    assert event.data["run"] == RUN and event.data["reservation"].startswith("cr-")


def daemon_events(directory: Path, kind: str) -> list[Any]:
    from planner.operations.daemon.config import load_config
    from planner.operations.daemon.store import Store

    return Store(load_config(directory / "daemon.yaml").database_url).events(kind)
