"""Scenario validation and the demand / training-run expansion in models.workloads."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import yaml

from models.errors import InputError
from models.scenario import load, parse
from models.workloads import hourly_demand, per_period_max, service_demand, training_runs

EXAMPLE = Path(__file__).resolve().parents[2] / "scenarios" / "mixed-fleet.yaml"


def example() -> dict:
    return yaml.safe_load(EXAMPLE.read_text())


def test_example_loads_with_its_values():
    scenario = load(EXAMPLE)
    assert scenario.horizon.periods == 8760
    assert scenario.purchase.max_spot_share == 0.7
    assert [s.name for s in scenario.inference] == ["chat-70b", "embed-small"]
    pretrain = scenario.training[0]
    assert pretrain.needs_fabric and pretrain.preemptible and pretrain.checkpoint.write_minutes == 4


@pytest.mark.parametrize(
    ("mutate", "where", "words"),
    [
        (
            lambda d: d["inference"][0]["replicas"].update(peek=3),
            "inference[0].replicas.peek",
            "unknown field",
        ),
        (lambda d: d["horizon"].update(hours="a year"), "horizon.hours", "not a number"),
        (lambda d: d["training"][0].update(team="nobody"), "training[0].team", "unknown team"),
        (lambda d: d["inference"][1].update(gpu_models=["H10O"]), "inference[1].gpu_models", "unknown GPU"),
        (lambda d: d["inference"][0].update(gpu_memory_gb=40), "inference[0]", "exactly one"),
        (
            lambda d: d["inference"][0]["replicas"].update(profile="weekly"),
            "inference[0].replicas",
            "profile",
        ),
        (lambda d: d["horizon"].update(period_hours=7), "horizon", "multiple"),
        (lambda d: d["purchase"].update(max_spot_share=1.5), "purchase.max_spot_share", "at most 1"),
        (lambda d: d["purchase"].update(terms=["5y"]), "purchase.terms[0]", "1y"),
        (
            lambda d: d["training"][0].update(deadline="2030-01-01T00:00:00Z"),
            "training[0].deadline",
            "outside the horizon",
        ),
        (lambda d: d["teams"].append({"name": "assistant"}), None, "duplicate"),
    ],
)
def test_bad_input_names_the_field(mutate, where, words):
    data = copy.deepcopy(example())
    mutate(data)
    with pytest.raises(InputError) as caught:
        parse(data, "fleet.yaml")
    assert caught.value.file == "fleet.yaml"
    if where:
        assert caught.value.where == where
    assert words in str(caught.value)


def test_yaml_syntax_error_names_the_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\nhorizon: {start: 2027-01-01, hours: 24\n")
    with pytest.raises(InputError) as caught:
        load(path)
    assert caught.value.where and caught.value.where.startswith("line ")


def test_diurnal_profile_peaks_at_the_peak_hour_and_dips_on_weekends():
    data = example()
    scenario = parse(data)
    chat = scenario.inference[0]
    hourly = hourly_demand(chat.replicas, scenario.horizon)
    # 2027-01-01 is a Friday: hour 17 is the weekday peak, 20 x growth^(17/730)
    assert hourly[17] == pytest.approx(20 * 1.03 ** (17 / 730))
    assert hourly[5] == pytest.approx(6 * 1.03 ** (5 / 730))  # 12 h from the peak: the trough
    saturday_peak = 24 + 17
    assert hourly[saturday_peak] == pytest.approx(0.6 * 20 * 1.03 ** (saturday_peak / 730))
    demand = service_demand(scenario, chat, EXAMPLE.parent)
    assert demand.dtype.kind == "i" and demand[17] == 21  # 20.01 replicas need 21
    assert demand.max() == np.ceil(hourly.max())  # growth: the last weeks peak highest


def test_csv_series_holds_each_row_until_the_next(tmp_path):
    (tmp_path / "d.csv").write_text("hour,replicas\n0,3\n5,7.2\n10,1\n")
    data = example()
    data["horizon"] = {"start": "2027-01-01T00:00:00Z", "hours": 12, "period_hours": 4}
    data["training"] = []
    data["inference"][0]["replicas"] = {"csv": "d.csv"}
    scenario = parse(data)
    hourly = hourly_demand(scenario.inference[0].replicas, scenario.horizon, tmp_path)
    assert list(hourly) == [3] * 5 + [7.2] * 5 + [1, 1]
    assert list(per_period_max(hourly, 4)) == [3, 8, 8]  # peak hour of each period, whole replicas


@pytest.mark.parametrize(
    ("content", "where"),
    [
        ("hour,replicas\n0,3\n2,x\n", "row 3, column replicas"),
        ("hour,replicas\n0,3\n0,4\n", "row 3, column hour"),
        ("when,replicas\n0,3\n", "row 1, column when"),
    ],
)
def test_bad_csv_series_names_row_and_column(tmp_path, content, where):
    (tmp_path / "d.csv").write_text(content)
    data = example()
    data["inference"][0]["replicas"] = {"csv": "d.csv"}
    scenario = parse(data)
    with pytest.raises(InputError) as caught:
        service_demand(scenario, scenario.inference[0], tmp_path)
    assert caught.value.where == where and caught.value.file.endswith("d.csv")


def test_weekly_repeat_gives_one_run_per_week_and_skips_a_stub_week():
    scenario = parse(example())
    runs = [r for r in training_runs(scenario) if r.name == "finetune-weekly"]
    assert len(runs) == 53  # 52 full weeks + the last day (24 h >= the 20 h run)
    assert [r.first_period for r in runs[:3]] == [0, 168, 336]
    assert runs[-1].end_period == 8760
    data = example()
    data["training"][1]["hours"] = 30  # the last 24 h stub can no longer hold a run
    assert len([r for r in training_runs(parse(data)) if r.name == "finetune-weekly"]) == 52
    pretrain = next(r for r in training_runs(scenario) if r.name == "pretrain-34b")
    assert (pretrain.first_period, pretrain.end_period) == (744, 2880)
    assert np.isclose(pretrain.window_end_hour - pretrain.window_start_hour, 2136)
