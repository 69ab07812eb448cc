"""planner/history without a server: repairs of a series (gaps, negative values, counter resets), the
mapping, credentials from the environment, and the file sources (usage CSV, OpenCost export) giving the
same History as each other, hour by hour."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_output import assert_input_error
from typer.testing import CliRunner

from models.errors import InputError
from planner.cli.app import app
from planner.history.mapping import Mapping, Rule, SeriesKey, load_mapping
from planner.history.prometheus import auth_from_env
from planner.history.series import clean, grid
from planner.history.sources import read_opencost_history, read_usage_history

T0 = datetime(2027, 3, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


def index(hours: int) -> pd.DatetimeIndex:
    return grid(T0, T0 + (hours - 1) * HOUR, HOUR)


def test_a_short_gap_is_interpolated_and_a_covered_absence_is_zero() -> None:
    idx = index(10)
    values = pd.Series([1, 2, np.nan, np.nan, 5, np.nan, 7, 8, 9, 10], index=idx, dtype=float)
    covered = np.array([1, 1, 0, 0, 1, 1, 1, 1, 1, 1], dtype=bool)
    series, quality = clean(values, idx, covered)
    assert list(series) == [1, 2, 3, 4, 5, 0, 7, 8, 9, 10]  # step 5 was seen: nobody asked for GPUs
    assert [(f.steps, f.reason, f.method) for f in quality.fills] == [(2, "gap", "linear")]
    assert (quality.steps, quality.measured, quality.filled) == (10, 8, 2)


def test_a_long_gap_takes_the_same_hour_a_week_earlier() -> None:
    idx = index(24 * 9)
    daily = np.array([10 + (h % 24) + 5 * ((h // 24) % 7 == 1) for h in range(len(idx))], dtype=float)
    values = daily.copy()
    values[24 * 8 : 24 * 8 + 10] = np.nan
    covered = ~np.isnan(values)
    series, quality = clean(pd.Series(values, index=idx), idx, covered)
    np.testing.assert_array_equal(series.to_numpy(), daily)
    assert [(f.steps, f.method) for f in quality.fills] == [(10, "week-before")]


def test_negative_and_counter_resets_are_mended_and_counted() -> None:
    idx = index(6)
    series, quality = clean(pd.Series([2, 2, -1, 2, 2, 2.0], index=idx), idx, np.ones(6, dtype=bool))
    assert list(series) == [2, 2, 2, 2, 2, 2] and quality.negatives == 1
    assert quality.fills[0].reason == "negative"
    counter = pd.Series([0, 10, 20, 5, 15, 25.0], index=idx)
    series, quality = clean(counter, idx, np.ones(6, dtype=bool), counter=True)
    assert list(series) == [0, 10, 10, 5, 10, 10] and quality.resets == 1


def test_the_default_mapping_is_gpuplan_k8s_namespaces_and_a_file_names_services(tmp_path: Path) -> None:
    default = Mapping(namespace_prefix="acme-")
    assert default.target(SeriesKey("acme-research")).team == "research"  # gpuplan k8s --namespace-prefix
    assert default.target(SeriesKey("ml", "", "chat")).service == "chat"
    mapped = Mapping(services=(Rule(service="chat", team="assist", namespace="ml", workload_label="chat"),))
    assert mapped.target(SeriesKey("ml", "", "chat")).team == "assist"  # type: ignore[union-attr]
    assert mapped.target(SeriesKey("ml", "", "other")) is None
    bad = tmp_path / "m.yaml"
    bad.write_text("services:\n  - {service: chat, team: a, namespace: ml, extra: 1}\n")
    with pytest.raises(InputError, match=r"services\.0\.extra"):
        load_mapping(bad)
    bad.write_text("services:\n  - {service: chat, team: a}\n")
    with pytest.raises(InputError, match="give at least one of namespace"):
        load_mapping(bad)


def test_credentials_come_from_the_environment_and_are_never_echoed() -> None:
    assert auth_from_env({}) is None
    assert "secret" not in repr(auth_from_env({"GPUPLAN_PROMETHEUS_TOKEN": "secret"}))
    with pytest.raises(InputError, match="GPUPLAN_PROMETHEUS_PASSWORD") as caught:
        auth_from_env({"GPUPLAN_PROMETHEUS_USER": "ops"})
    assert "ops" not in str(caught.value)
    with pytest.raises(InputError, match="not both"):
        auth_from_env({"GPUPLAN_PROMETHEUS_TOKEN": "secret", "GPUPLAN_PROMETHEUS_USER": "ops"})


def _usage(tmp_path: Path) -> Path:
    """Two teams' pods: chat holds 2 GPUs for 10 h from 00:30, train 8 GPUs for 3 h from 02:00."""
    path = tmp_path / "usage.csv"
    path.write_text(
        "team,project,namespace,start,end,gpus,offering,tier\n"
        "assist,chat,ml,2027-03-01T00:30:00Z,2027-03-01T10:30:00Z,2,aws:us-east-1:p5.48xlarge,on_demand\n"
        "research,train,research,2027-03-01T02:00:00Z,2027-03-01T05:00:00Z,8,aws:us-east-1:p5.48xlarge,spot\n"
    )
    return path


def _opencost(tmp_path: Path) -> Path:
    """The same pods as an OpenCost /allocation export (aggregate=pod)."""

    def pod(ns: str, team: str, project: str, start: str, end: str, gpu_hours: float) -> dict[str, object]:
        labels = {"team": team, "project": project}
        return {
            "start": start,
            "end": end,
            "gpuHours": gpu_hours,
            "properties": {"namespace": ns, "labels": labels},
        }

    data = {
        "code": 200,
        "data": [
            {
                "ml/chat-0": pod("ml", "assist", "chat", "2027-03-01T00:30:00Z",
                                 "2027-03-01T10:30:00Z", 20.0),
                "research/train-0": pod("research", "research", "train", "2027-03-01T02:00:00Z",
                                        "2027-03-01T05:00:00Z", 24.0),
                "__idle__": {"gpuHours": 5.0},
            }
        ],
    }  # fmt: skip
    path = tmp_path / "opencost.json"
    path.write_text(json.dumps(data))
    return path


def test_the_usage_csv_and_opencost_give_the_same_hourly_series(tmp_path: Path) -> None:
    usage = read_usage_history(_usage(tmp_path), Mapping(), HOUR)
    opencost = read_opencost_history(_opencost(tmp_path), Mapping(), HOUR)
    assert sorted(usage.services) == sorted(opencost.services) == ["chat", "train"]
    chat = usage.services["chat"]
    assert chat.team == "assist" and len(usage.index) == 11  # 00:00 to 10:00
    assert list(chat.gpus) == [1.0, *[2.0] * 9, 1.0]  # half of the first and last hours
    assert list(usage.services["train"].gpus[:6]) == [0, 0, 8, 8, 8, 0]
    for name in usage.services:
        pd.testing.assert_series_equal(usage.services[name].gpus, opencost.services[name].gpus)
        assert type(usage.services[name]) is type(opencost.services[name])
    assert (usage.provenance.source, opencost.provenance.source) == ("usage", "opencost")
    assert any("shorter" in w or "less than a week" in w for w in usage.warnings)


def test_demand_from_a_usage_csv_writes_the_files_and_bad_flags_write_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["demand", "--usage", str(_usage(tmp_path)), "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out / "history" / "chat.csv")
    assert list(frame["gpus"])[:2] == [1, 2]
    assert json.loads((out / "history.json").read_text())["provenance"]["source"] == "usage"
    again = tmp_path / "again"
    both = ["demand", "--usage", "u.csv", "--opencost", "o.json", "-o", str(again)]
    assert_input_error(CliRunner().invoke(app, both), "--opencost", "give one source")
    step = ["demand", "--usage", str(_usage(tmp_path)), "--step", "90x", "-o", str(again)]
    assert_input_error(CliRunner().invoke(app, step), "--step", "not a duration")
    assert not again.exists()
