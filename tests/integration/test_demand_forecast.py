"""`gpuplan demand --prometheus ... -o DIR` on the real Prometheus of prometheus_stand_in.py, forecast
half (issue 40, points 2 and 3): the scenario.yaml it writes validates and plans as written; its P50
CSVs (and every quantile and the sampled paths) are the forecast of the history it read; the training
jobs are the median sampled future of the gangs seen; the page names every service and the source."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from prometheus_stand_in import HOURS, SERVICES, PrometheusServer
from typer.testing import CliRunner

from models.scenario import load
from models.workloads import hourly_demand
from planner.cli.app import app
from planner.history.forecast import forecast, series_seed

pytestmark = pytest.mark.xdist_group("prometheus")
AHEAD = 7 * 24
PATHS = 20
SEED = 7


@pytest.fixture(scope="module")
def written(prom: PrometheusServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run of gpuplan demand with a 7-day horizon and a 2-day backtest, read by every test here."""
    out = tmp_path_factory.mktemp("demand") / "out"
    command = ["demand", "--prometheus", prom.url, "--since", "10d", "--until", prom.fleet.end.isoformat()]
    options = ["--horizon", "7d", "--paths", str(PATHS), "--seed", str(SEED), "--backtest", "2d"]
    result = CliRunner().invoke(app, [*command, *options, "-o", str(out), "-q"])
    assert result.exit_code == 0, (result.output, result.exception)
    return out


def test_sampled_paths_are_written_as_futures(written: Path) -> None:
    """futures.yaml (issue 41) names one equally weighted future per sampled path (10 of them by default),
    each service's CSV being that path of its paths/<service>.npz, and loads as gpuplan futures reads it."""
    from models.futures import load_futures

    spec = load_futures(written / "futures.yaml")
    assert [f.name for f in spec.futures] == [f"path-{k:03d}" for k in range(10)]
    assert spec.weights() == pytest.approx([0.1] * 10)
    for k, future in enumerate(spec.futures):
        assert sorted(future.series) == sorted(SERVICES)
        for service, csv in future.series.items():
            frame = pd.read_csv(csv)
            assert list(frame["hour"]) == list(range(AHEAD))
            with np.load(written / "paths" / f"{service}.npz") as paths:
                np.testing.assert_allclose(frame["replicas"], paths["paths"][k], rtol=1e-6)


@pytest.mark.slow  # ~10 s: gpuplan plan (its solver, its checker) on the written scenario
def test_the_written_scenario_validates_and_plans(written: Path, tmp_path: Path) -> None:
    scenario = load(written / "scenario.yaml")
    assert sorted(s.name for s in scenario.inference) == sorted(SERVICES)
    assert {s.name: s.team for s in scenario.inference}["chat"] == "assist"  # the pods' team label
    history_end = pd.Timestamp(json.loads((written / "history.json").read_text())["provenance"]["end"])
    assert pd.Timestamp(scenario.horizon.start) == history_end + pd.Timedelta(hours=1)
    assert scenario.horizon.hours == AHEAD
    text = (written / "scenario.yaml").read_text()
    assert "clouds:" in text and text.count("# REVIEW") >= 5
    validated = CliRunner().invoke(app, ["validate", str(written / "scenario.yaml")])
    assert validated.exit_code == 0, validated.output
    plan = tmp_path / "plan"
    options = ["--time-limit", "5", "--no-report", "-q"]
    planned = CliRunner().invoke(app, ["plan", str(written / "scenario.yaml"), "-o", str(plan), *options])
    assert planned.exit_code == 0, (planned.output, planned.exception)
    document = json.loads((plan / "plan.json").read_text())
    assert document["costs"]["total_usd"] > 0 and not document["unserved"]
    assert set(document["costs"]["by_workload"]) == {w.name for w in scenario.workloads}


def test_the_p50_csv_is_the_forecast_of_the_history_read(written: Path) -> None:
    scenario = load(written / "scenario.yaml")
    for service in scenario.inference:
        read = pd.read_csv(written / "history" / f"{service.name}.csv", index_col="time", parse_dates=True)
        assert len(read) == HOURS
        again = forecast(read["gpus"], AHEAD, (0.1, 0.5, 0.9), PATHS, series_seed(SEED, service.name))
        for label, q in (("p10", 0.1), ("p50", 0.5), ("p90", 0.9)):
            frame = pd.read_csv(written / "forecast" / service.name / f"{label}.csv")
            assert list(frame.columns) == ["hour", "replicas"] and list(frame["hour"]) == list(range(AHEAD))
            # the history CSV holds 10 digits: a refit on it differs from the first fit in the 6th
            np.testing.assert_allclose(frame["replicas"], again.quantile(q).to_numpy(), rtol=1e-5)
        # what the planner reads of the scenario is that P50, hour by hour
        planned = hourly_demand(service.replicas, scenario.horizon, written, service.name)
        np.testing.assert_allclose(planned, again.quantile(0.5).to_numpy(), rtol=1e-5)
        with np.load(written / "paths" / f"{service.name}.npz") as paths:
            assert paths["paths"].shape == (PATHS, AHEAD)
            np.testing.assert_allclose(paths["paths"], again.paths, rtol=1e-4, atol=1e-4)  # float32
            assert str(paths["start"]) == scenario.horizon.start.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_training_jobs_are_the_median_sampled_future_of_the_gangs_seen(written: Path) -> None:
    scenario = load(written / "scenario.yaml")
    samples = pd.read_csv(written / "paths" / "training_runs.csv", parse_dates=["start", "end"])
    assert set(samples["team"]) == {"research"} and set(samples["sample"]) <= set(range(PATHS))
    gpu_hours = np.zeros(PATHS)
    for row in samples.itertuples():
        gpu_hours[row.sample] += (row.end - row.start).total_seconds() / 3600 * row.nodes * row.gpus_per_node
    chosen = json.loads((written / "history.json").read_text())["forecast"]["training"]["research"]
    assert gpu_hours[chosen["scenario_sample"]] == np.sort(gpu_hours)[(PATHS - 1) // 2]
    runs = samples[samples["sample"] == chosen["scenario_sample"]]
    horizon_end = scenario.horizon.end
    kept = [r for r in runs.itertuples() if r.start.floor("h") + (r.end - r.start) <= horizon_end]
    assert len(scenario.training) == len(kept) > 0
    for job, run in zip(scenario.training, kept, strict=True):
        assert (job.team, job.nodes, job.gpus_per_node) == ("research", run.nodes, run.gpus_per_node)
        assert job.earliest_start == run.start.floor("h").to_pydatetime()
        assert job.hours == pytest.approx((run.end - run.start).total_seconds() / 3600, abs=0.01)
        assert job.deadline is not None and job.deadline <= horizon_end


def test_the_page_names_every_service_and_the_source(written: Path, prom: PrometheusServer) -> None:
    html = (written / "demand.html").read_text()
    md = (written / "demand.md").read_text()
    for name in SERVICES:
        assert f'id="chart-{name}"' in html and f"### {name}" in md
    assert prom.url in html and prom.url in md
    assert "2 steps 2026" in md or "2 steps" in md  # the monitoring's gap, and how it was filled
    assert "Backtest: the last 48 h held out" in md and "Backtest" in html
    # config, plotly.js inline once, one per chart, and the base page's chart-fitting script
    assert html.count("<script") == 3 + len(SERVICES)
    assert "<script src" not in html  # offline
    document = yaml.safe_load((written / "scenario.yaml").read_text())
    assert all(s["replicas"]["csv"] in md for s in document["inference"])
