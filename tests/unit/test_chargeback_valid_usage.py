"""Chargeback never crashes on valid usage (issue 36 point 4), each case against figures computed by hand:
a plan without commitments (it raised ``KeyError: 'used_node_hours'``), usage outside every commitment's
window, and a month nobody used (in the middle of the usage, and asked for with ``month``).

The hand book (``test_chargeback.book``): one 8-GPU H100 offering at $80 per node-hour on demand ($10 per
GPU-hour) and $24 spot ($3 per GPU-hour); one node on a 1-year commitment at $48 per node-hour."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import pytest
from test_chargeback import HEADER, P5, book

from models.chargeback import IDLE_PROJECT, Book, IdleRule
from models.plan import Commitment
from models.tiers import Term
from models.usage import charge_usage, read_usage

MAY = datetime(2027, 5, 1, tzinfo=UTC)
JUNE = datetime(2027, 6, 1, tzinfo=UTC)


def usage(tmp_path: Path, *rows: str) -> Path:
    path = tmp_path / "usage.csv"
    path.write_text(HEADER + "".join(f"{r}\n" for r in rows), encoding="utf-8")
    return path


def no_commitments() -> Book:
    """The hand book without its commitment: everything is paid as used (as the portal's demo plan)."""
    return dataclasses.replace(book(), commitments=[])


def march_to_may() -> Book:
    """The hand book over March to May (2,208 hours), its commitment serving all three months."""
    c = book().commitments[0]
    longer = c.model_copy(update={"end": JUNE, "end_period": 2208, "cost_in_horizon_usd": 48.0 * 2208})
    return dataclasses.replace(book(), periods=2208, commitments=[longer])


def test_plan_without_commitments_charges_usage_at_its_prices(tmp_path: Path):
    path = usage(
        tmp_path,
        # 2 GPUs for 10 h on demand: 20 GPU-h x $10 = $200
        f"prod,chat,ns,2027-03-01T00:00:00Z,2027-03-01T10:00:00Z,2,,{P5},on_demand",
        # 8 GPUs for 5 h on spot: 40 GPU-h x $3 = $120
        f"research,train,ns,2027-03-02T00:00:00Z,2027-03-02T05:00:00Z,8,,{P5},spot",
    )
    plan = no_commitments()
    for rule in IdleRule:
        result = charge_usage(plan, read_usage(path, plan), rule, path)
        assert result.expected_total_usd == pytest.approx(320.0)
        assert abs(result.total_usd - 320.0) < 0.005
        by_team = result.rows.groupby("team")["cost_usd"].sum().to_dict()
        assert by_team == pytest.approx({"prod": 200.0, "research": 120.0})
        assert result.rows["idle_usd"].sum() == 0.0
        assert len(result.windows) == 0 and "used_node_hours" in result.windows.columns
        assert result.notes == []


def test_plan_without_commitments_month_nobody_used_charges_nothing(tmp_path: Path):
    path = usage(tmp_path, f"prod,chat,ns,2027-03-01T00:00:00Z,2027-03-01T10:00:00Z,2,,{P5},on_demand")
    plan = dataclasses.replace(no_commitments(), periods=2208)  # March to May
    result = charge_usage(plan, read_usage(path, plan), IdleRule.GUARANTEES, path, month="2027-04")
    assert len(result.rows) == 0 and result.total_usd == 0.0 and result.expected_total_usd == 0.0


def test_usage_outside_every_commitments_window(tmp_path: Path):
    """The commitment serves March only; on-demand usage in April (inside a two-month horizon) is priced
    on demand, and April's bill holds no commitment cost."""
    plan = dataclasses.replace(book(), periods=1464)  # March and April
    path = usage(tmp_path, f"prod,chat,ns,2027-04-02T00:00:00Z,2027-04-03T00:00:00Z,4,,{P5},on_demand")
    result = charge_usage(plan, read_usage(path, plan), IdleRule.GUARANTEES, path)
    # by hand: 4 GPUs x 24 h x $10 = $960, nothing else in April
    assert result.expected_total_usd == pytest.approx(960.0)
    assert abs(result.total_usd - 960.0) < 0.005
    assert list(result.rows["month"]) == ["2027-04"] and list(result.rows["team"]) == ["prod"]
    assert len(result.windows) == 0


def test_month_nobody_used_between_used_months_is_billed(tmp_path: Path):
    """Usage in March and May: the commitment is paid in April too, where nobody used it; under the
    guarantees rule April's whole cost is idle, charged to prod (the one team an H100 commitment backs)."""
    plan = march_to_may()
    path = usage(
        tmp_path,
        # 100 h of the committed node in March by prod, 200 h in May by research
        f"prod,chat,ns,2027-03-01T00:00:00Z,2027-03-05T04:00:00Z,8,,{P5},reserved_1y",
        f"research,finetune,ns,2027-05-01T00:00:00Z,2027-05-09T08:00:00Z,8,,{P5},reserved_1y",
    )
    result = charge_usage(plan, read_usage(path, plan), IdleRule.GUARANTEES, path)
    # by hand: $48 per node-hour for 744 + 720 + 744 hours
    assert result.expected_total_usd == pytest.approx(48.0 * 2208)
    assert abs(result.total_usd - 48.0 * 2208) < 0.005
    month = result.rows.groupby("month")["cost_usd"].sum().to_dict()
    assert month == pytest.approx({"2027-03": 48.0 * 744, "2027-04": 48.0 * 720, "2027-05": 48.0 * 744})
    april = result.rows[result.rows["month"] == "2027-04"]
    assert list(zip(april["team"], april["project"], strict=True)) == [("prod", IDLE_PROJECT)]
    assert float(april["idle_usd"].sum()) == pytest.approx(48.0 * 720)
    may = result.rows[(result.rows["month"] == "2027-05") & (result.rows["team"] == "research")]
    assert float(may["cost_usd"].sum()) == pytest.approx(48.0 * 200)  # its used hours at the rate
    windows = result.windows.set_index("month")
    assert windows.loc["2027-04", "used_node_hours"] == 0.0
    assert windows.loc["2027-04", "used_fraction"] == 0.0


@pytest.mark.parametrize("rule", list(IdleRule))
def test_month_nobody_used_asked_for(tmp_path: Path, rule: IdleRule):
    """``month`` = April, used by nobody: its commitment cost, $48 x 720, to prod as idle (the backer,
    under either rule: with no user, the backers pay)."""
    plan = march_to_may()
    path = usage(tmp_path, f"prod,chat,ns,2027-03-01T00:00:00Z,2027-03-02T00:00:00Z,8,,{P5},reserved_1y")
    result = charge_usage(plan, read_usage(path, plan), rule, path, month="2027-04")
    assert result.expected_total_usd == pytest.approx(48.0 * 720)
    assert abs(result.total_usd - 48.0 * 720) < 0.005
    assert result.rows[["team", "project"]].values.tolist() == [["prod", IDLE_PROJECT]]


def test_commitment_bought_mid_horizon(tmp_path: Path):
    """A commitment starting April 1 (bought at a purchase step): March's usage on demand, April's on
    it; a committed row in March is refused by the reader, never charged to a commitment not yet held."""
    plan = march_to_may()
    late = Commitment(
        offering=P5, term=Term.ONE_YEAR, nodes=1, usd_per_node_hour=48.0, cost_in_horizon_usd=48.0 * 1464,
        obligation_beyond_horizon_usd=0.0, name="c2", start=datetime(2027, 4, 1, tzinfo=UTC), end=JUNE,
        start_period=744, end_period=2208,
    )  # fmt: skip
    plan = dataclasses.replace(plan, commitments=[late])
    path = usage(
        tmp_path,
        f"prod,chat,ns,2027-03-31T00:00:00Z,2027-04-01T00:00:00Z,8,,{P5},on_demand",
        f"prod,chat,ns,2027-04-01T00:00:00Z,2027-04-02T00:00:00Z,8,,{P5},reserved_1y",
    )
    result = charge_usage(plan, read_usage(path, plan), IdleRule.USAGE, path)
    # by hand: March 24 h x $80 on demand; April the commitment's 720 h x $48, all to prod (its one user)
    assert result.expected_total_usd == pytest.approx(24 * 80.0 + 720 * 48.0)
    assert result.rows.groupby("month")["cost_usd"].sum().to_dict() == pytest.approx(
        {"2027-03": 24 * 80.0, "2027-04": 720 * 48.0}
    )
