"""Chargeback (models/chargeback.py, models/usage.py): a small case computed by hand, the amortization
rule against its definition, usage CSV errors by row and column, and the OpenCost converter."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from models.chargeback import IDLE_PROJECT, Book, IdleRule, OfferingRates, amortize, mig_gpu_fraction
from models.errors import InputError
from models.plan import Commitment
from models.tiers import Term
from models.usage import charge_usage, from_opencost, read_usage

P5 = "aws:us-east-1:p5.48xlarge"
MARCH = datetime(2027, 3, 1, tzinfo=UTC)
APRIL = datetime(2027, 4, 1, tzinfo=UTC)
HEADER = "team,project,namespace,start,end,gpus,mig_profile,offering,tier\n"
DAY = "2027-03-01T00:00:00Z,2027-03-02T00:00:00Z"


def line(cells: str, times: str = DAY, team: str = "prod") -> str:
    """A usage row of ``team``'s chat project over ``times``; ``cells``: gpus,mig_profile,offering,tier."""
    return f"{team},chat,ns,{times},{cells}\n"


def book() -> Book:
    """One 8-GPU H100 offering ($80/node-h on demand, $24 spot), one node on a 1-year commitment at
    $48/node-h for all of March; prod holds a guarantee on H100s, research one on A100s only."""
    commitment = Commitment(
        offering=P5,
        term=Term.ONE_YEAR,
        nodes=1,
        usd_per_node_hour=48.0,
        cost_in_horizon_usd=48.0 * 744,
        obligation_beyond_horizon_usd=0.0,
        name="c1",
        start=MARCH,
        end=APRIL,
        start_period=0,
        end_period=744,
    )
    return Book(
        scenario="hand",
        start=MARCH,
        period_hours=1,
        periods=744,
        offerings={P5: OfferingRates("H100", 8, 80.0, 24.0)},
        commitments=[commitment],
        guarantees={"prod": 8, "research": 16},
        team_models={"prod": ["H100"], "research": ["A100"]},
        projects={},
        mig_memory={},
        teams=["prod", "research"],
        total_usd=0.0,
    )


def usage_csv(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "usage.csv"
    path.write_text(HEADER + body, encoding="utf-8")
    return path


HAND_USAGE = (
    # the committed node, half of March (372 of its 744 h) by prod's chat service
    f"prod,chat,prod-ns,2027-03-01T00:00:00Z,2027-03-16T12:00:00Z,8,,{P5},reserved_1y\n"
    # and 124 h by research's fine-tune
    f"research,finetune,research-ns,2027-03-20T00:00:00Z,2027-03-25T04:00:00Z,8,,{P5},reserved_1y\n"
    # a MIG inference service: one 1g.10gb slice for a day, on demand
    f"prod,embed,prod-ns,2027-03-01T00:00:00Z,2027-03-02T00:00:00Z,,1g.10gb,{P5},on_demand\n"
    # a spot training job: two nodes (16 GPUs) for 10 h
    f"research,pretrain,research-ns,2027-03-05T00:00:00Z,2027-03-05T10:00:00Z,16,,{P5},spot\n"
)


def _by_project(result, project: str) -> tuple[float, float, float]:
    part = result.rows[result.rows["project"] == project]
    return float(part["cost_usd"].sum()), float(part["idle_usd"].sum()), float(part["gpu_hours"].sum())


def test_hand_computed_case_guarantees_rule(tmp_path: Path):
    path = usage_csv(tmp_path, HAND_USAGE)
    result = charge_usage(book(), read_usage(path, book()), IdleRule.GUARANTEES, path)
    # by hand: the commitment costs 48 x 744 = 35,712 in March; used 372 + 124 = 496 node-hours at its
    # rate of $48 per node-hour; the idle 248 h (248 x 48 = 11,904) go to prod, the only team whose
    # guarantee an H100 commitment backs (research's guarantee is on A100s)
    assert _by_project(result, "chat") == pytest.approx((372 * 48.0, 0.0, 372 * 8.0))
    assert _by_project(result, "finetune") == pytest.approx((124 * 48.0, 0.0, 124 * 8.0))
    idle = result.rows[result.rows["project"] == IDLE_PROJECT]
    assert list(idle["team"]) == ["prod"]
    assert float(idle["cost_usd"].sum()) == pytest.approx(248 * 48.0)
    # MIG: 1g.10gb is 1 of 7 compute slices: 24/7 GPU-hours at $80/8 = $10 per GPU-hour
    assert _by_project(result, "embed") == pytest.approx((24 / 7 * 10.0, 0.0, 24 / 7))
    # spot: 16 GPUs x 10 h at $24/8 = $3 per GPU-hour
    assert _by_project(result, "pretrain") == pytest.approx((160 * 3.0, 0.0, 160.0))
    bill = 48.0 * 744 + 24 / 7 * 10.0 + 160 * 3.0
    assert result.expected_total_usd == pytest.approx(bill)
    assert abs(result.total_usd - bill) < 0.005
    assert set(result.rows["month"]) == {"2027-03"}
    team = result.rows.groupby("team")["cost_usd"].sum()
    assert team["prod"] == pytest.approx(372 * 48.0 + 248 * 48.0 + 24 / 7 * 10.0)
    window = result.windows.iloc[0]
    assert window["used_fraction"] == pytest.approx(496 / 744)
    assert window["idle_usd"] == pytest.approx(248 * 48.0)


def test_hand_computed_case_usage_rule(tmp_path: Path):
    path = usage_csv(tmp_path, HAND_USAGE)
    result = charge_usage(book(), read_usage(path, book()), IdleRule.USAGE, path)
    # by hand: the whole 35,712 over the 496 used node-hours, $72 per node-hour used
    cost = 48.0 * 744
    assert _by_project(result, "chat") == pytest.approx((cost * 372 / 496, 372 * 24.0, 372 * 8.0))
    assert _by_project(result, "finetune") == pytest.approx((cost * 124 / 496, 124 * 24.0, 124 * 8.0))
    assert IDLE_PROJECT not in set(result.rows["project"])
    rate = result.rates[result.rates["tier"] == "reserved_1y"].iloc[0]
    assert rate["effective_usd_per_gpu_hour"] == pytest.approx(72.0 / 8)
    assert rate["price_usd_per_gpu_hour"] == pytest.approx(6.0)
    assert abs(result.total_usd - (cost + 24 / 7 * 10.0 + 480.0)) < 0.005


def test_usage_split_at_month_boundaries_and_month_filter(tmp_path: Path):
    """A pod running across midnight of March 31 is charged in both months; --month keeps March, whose
    bill holds the commitment's whole March."""
    path = usage_csv(tmp_path, f"prod,chat,ns,2027-03-31T20:00:00Z,2027-04-01T06:00:00Z,2,,{P5},on_demand\n")
    rows = read_usage(path, book(), allow_outside_horizon=True)  # April is after the plan's March
    both = charge_usage(book(), rows, IdleRule.GUARANTEES, path)
    on_demand = both.rows[both.rows["tier"] == "on_demand"].set_index("month")["gpu_hours"]
    assert on_demand.to_dict() == pytest.approx({"2027-03": 8.0, "2027-04": 12.0})
    march = charge_usage(book(), rows, IdleRule.GUARANTEES, path, month="2027-03")
    assert march.expected_total_usd == pytest.approx(8 * 10.0 + 48.0 * 744)  # nobody used c1: idle, to prod
    assert abs(march.total_usd - march.expected_total_usd) < 0.005


def test_amortize_matches_its_definition():
    used = {"a": 30.0, "b": 10.0}
    # usage: every used hour at cost / used hours
    shares = amortize(100.0, used, 50.0, IdleRule.USAGE, {"g": 1.0})
    assert shares["a"].usd == pytest.approx(75.0) and shares["b"].usd == pytest.approx(25.0)
    assert shares["a"].idle_usd + shares["b"].idle_usd == pytest.approx(100.0 * 10 / 50)
    # guarantees: used hours at cost / capacity (2 per hour), the idle 10 h to backers by weight
    shares = amortize(100.0, used, 50.0, IdleRule.GUARANTEES, {"g": 3.0, "h": 1.0})
    assert shares["a"].usd == pytest.approx(60.0) and shares["b"].usd == pytest.approx(20.0)
    assert shares["g"].usd == pytest.approx(15.0) and shares["h"].usd == pytest.approx(5.0)
    # nothing backs it: shared by use, as the usage rule
    assert amortize(100.0, used, 50.0, IdleRule.GUARANTEES, {})["a"].usd == pytest.approx(75.0)
    # nobody used it: to the backers, else the fallback
    assert amortize(100.0, {}, 50.0, IdleRule.USAGE, {}, {"x": 1.0, "y": 1.0})["x"].usd == pytest.approx(50.0)


def test_mig_fraction_is_compute_slices():
    assert mig_gpu_fraction("H100", "3g.40gb") == pytest.approx(3 / 7)
    assert mig_gpu_fraction("A100-40GB", "1g.5gb") == pytest.approx(1 / 7)
    with pytest.raises(ValueError, match="valid"):
        mig_gpu_fraction("H100", "2g.99gb")


@pytest.mark.parametrize(
    ("body", "where", "text"),
    [
        (
            line(f"8,,{P5},on_demand", "2027-03-02T00:00:00Z,2027-03-01T00:00:00Z"),
            "row 2, column end",
            "after",
        ),
        (line(f"8,,{P5},reserved"), "row 2, column tier", "unknown tier"),
        (line(f"-1,,{P5},on_demand"), "row 2, column gpus", "greater than 0"),
        (line(f"eight,,{P5},on_demand"), "row 2, column gpus", "not a number"),
        (line(f"1,1g.10gb,{P5},on_demand"), "row 2, column gpus", "exactly one"),
        (line(f"1,,{P5},on_demand", "yesterday,2027-03-02T00:00:00Z"), "row 2, column start", "not a time"),
        (line(f"1,,{P5},on_demand", team=""), "row 2, column team", "empty"),
    ],
)
def test_bad_usage_rows_are_named_by_row_and_column(tmp_path: Path, body: str, where: str, text: str):
    good = line(f"8,,{P5},on_demand")
    path = usage_csv(tmp_path, body)
    with pytest.raises(InputError, match=text) as caught:
        read_usage(path, book())
    assert caught.value.where == where
    # the same bad row after two good ones is row 4
    path = usage_csv(tmp_path, good + "\n" + body)
    with pytest.raises(InputError) as caught:
        read_usage(path, book())
    assert caught.value.where == where.replace("row 2", "row 4")


@pytest.mark.parametrize(
    ("body", "where", "text"),
    [
        (line("8,,aws:nowhere:p9,on_demand"), "row 2, column offering", "not an offering"),
        (line(f",1g.99gb,{P5},on_demand"), "row 2, column mig_profile", "no MIG profile"),
        (line(f"8,,{P5},reserved_3y"), "row 2, column tier", "no reserved_3y"),
        (line(f"8,,{P5},reserved_1y", "2027-05-01T00:00:00Z,2027-05-02T00:00:00Z"), "row 2, column tier",
         "serves from 2027-05-01T00:00:00Z to 2027-05-02T00:00:00Z"),
        # the commitment ends with March: an April hour of the row is not on it
        (line(f"8,,{P5},reserved_1y", "2027-03-31T20:00:00Z,2027-04-01T01:00:00Z"), "row 2, column tier",
         "serves from 2027-04-01T00:00:00Z to 2027-04-01T01:00:00Z"),
    ],
)  # fmt: skip
def test_usage_rows_the_plan_cannot_price(tmp_path: Path, body: str, where: str, text: str):
    """Refused when read against the plan (outside the horizon allowed, to reach the tier check)."""
    path = usage_csv(tmp_path, body)
    with pytest.raises(InputError, match=text) as caught:
        read_usage(path, book(), allow_outside_horizon=True)
    assert caught.value.where == where


def test_usage_header_problems(tmp_path: Path):
    path = tmp_path / "u.csv"
    path.write_text("team,start,end,gpus,offerng,tier\n", encoding="utf-8")
    with pytest.raises(InputError, match="did you mean 'offering'"):
        read_usage(path, book())
    path.write_text("team,start,end,gpus,tier\n", encoding="utf-8")
    with pytest.raises(InputError, match="offering") as caught:
        read_usage(path, book())
    assert caught.value.where == "row 1, column offering"


def test_opencost_export_converts_to_usage(tmp_path: Path):
    """Two pods of an /allocation?aggregate=pod export: GPUs = gpuHours / hours; team, project, tier and
    MIG slice from the pod's labels; __idle__ and CPU-only pods skipped."""
    labels = {"team": "prod", "project": "chat", "gpuplan.io/offering": P5, "gpuplan.io/tier": "on_demand"}
    export = {
        "code": 200,
        "data": [
            {
                "chat-0": {
                    "name": "chat-0",
                    "properties": {"namespace": "prod-ns", "pod": "chat-0", "labels": labels},
                    "start": "2027-03-01T00:00:00Z",
                    "end": "2027-03-01T10:00:00Z",
                    "gpuHours": 20.0,
                    "gpuCost": 200.0,
                },
                "embed-0": {
                    "properties": {
                        "namespace": "prod",
                        "labels": {"gpuplan.io/mig-profile": "1g.10gb", "gpuplan.io/offering": P5},
                    },
                    "start": "2027-03-01T00:00:00Z",
                    "end": "2027-03-01T07:00:00Z",
                    "gpuHours": 7.0,
                },
                "web-0": {"properties": {"namespace": "web"}, "start": "2027-03-01T00:00:00Z",
                          "end": "2027-03-01T01:00:00Z", "gpuHours": 0.0},
                "__idle__": {"gpuHours": 99.0},
            }
        ],
    }  # fmt: skip
    path = tmp_path / "allocation.json"
    path.write_text(json.dumps(export), encoding="utf-8")
    rows = from_opencost(path, book())
    assert [(r.team, r.project, r.gpus, r.mig_profile, r.hours) for r in rows] == [
        ("prod", "chat", 2.0, None, 10.0),
        ("prod", "prod", None, "1g.10gb", 7.0),
    ]
    result = charge_usage(book(), rows, IdleRule.GUARANTEES, path)
    # by hand: 20 GPU-h at $10, 7 h of a 1/7 slice = 1 GPU-h at $10, and the idle commitment
    assert result.expected_total_usd == pytest.approx(200.0 + 10.0 + 48.0 * 744)
    pod = {
        "properties": {"namespace": "prod"},
        "start": "2027-03-01T00:00:00Z",
        "end": "2027-03-01T01:00:00Z",
    }
    unlabelled = {"code": 200, "data": [{"p": {**pod, "gpuHours": 1.0}}]}
    path.write_text(json.dumps(unlabelled), encoding="utf-8")
    with pytest.raises(InputError, match=r"gpuplan\.io/offering") as caught:
        from_opencost(path, book())
    assert caught.value.where == "data[0].p"
    assert from_opencost(path, book(), offering=P5)[0].offering == P5
