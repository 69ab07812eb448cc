"""`gpuplan futures` prices the cloud's savings-plan recommendation (a peer of the point forecast's plan) on
every future, as it prices the peers that buy reservations (issue 41, point 4).

The newsvendor case of test_futures.py with EC2 Instance Savings Plans for sale: the peer buys ``L`` USD per
hour at the horizon's start (plan.json ``baselines.peers[].savings_plans``). Held in a future of ``d``
nodes with nothing more for sale, it costs over the horizon ``H * (L + max(d - L / s, 0) * o)`` (``s`` its
rate per node-hour: it covers ``L / s`` nodes, on demand serves the rest) and, to the end of its year, the
savings plan paid and covering nothing (the cautious tail) beside the future's nodes on demand.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import models
from models.futures import FuturesDocument
from planner.cli import app
from tests.integration.test_futures import BASE, HOURS, P5, SKEWED, YEAR, _futures, _rates, _scenario


def _plan_rate() -> float:
    """The 1-year EC2 Instance Savings Plan rate of p5.48xlarge in us-east-1, read from the embedded terms
    file itself."""
    terms = Path(models.__file__).parent / "data" / "catalog.terms.csv"
    with terms.open(encoding="utf-8") as handle:
        return next(
            float(row["usd_h"])
            for row in csv.DictReader(handle)
            if row["offering"] == P5
            and row["kind"] == "savings-plan-ec2-instance"
            and row["term_years"] == "1"
        )


def test_the_savings_plan_peer_is_priced_on_every_future(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path, purchase={"terms": ["1y"], "schedule": "horizon",
                                             "savings_plans": ["ec2-instance"]})  # fmt: skip
    result = CliRunner().invoke(
        app, ["futures", str(scenario), str(_futures(tmp_path, SKEWED)), "-o", str(tmp_path / "out"),
              "--time-limit", "10", "--workers", "1", "-q"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    point = json.loads((tmp_path / "out" / "point" / "plan.json").read_text())
    (peer,) = [p for p in point["baselines"]["peers"] if p["policy"] == "savings_plan"]
    (bought,) = peer["savings_plans"]
    level = bought["usd_per_hour"]
    assert bought["scope"] == "ec2-instance p5 us-east-1" and level > 0
    doc = FuturesDocument.read(tmp_path / "out" / "futures.json")
    (candidate,) = [c for c in doc.candidates if f"peer: {peer['name']}" in (c.name, *c.also)]
    assert [(p.usd_per_hour, p.nodes) for p in candidate.purchases] == [(pytest.approx(level), None)]
    _r, o = _rates(scenario)
    rate = _plan_rate()
    covered = level / rate
    for future, _w, x in SKEWED:
        d = BASE * x
        horizon = HOURS * (level + max(d - covered, 0.0) * o)
        tail = (YEAR - HOURS) * (level + d * o)
        assert candidate.horizon_usd[future] == pytest.approx(horizon, rel=1e-6), future
        assert candidate.tail_usd[future] == pytest.approx(tail, rel=1e-6), future
    assert doc.summary.best_peer is not None
