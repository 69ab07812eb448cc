"""A History's future: each service's hourly forecast with its quantiles and sampled paths, each team's
training runs per month by size with sampled run sets, and (with ``--backtest``) the forecast's error on
the history's own last days; the files ``gpuplan demand -o DIR`` writes for them, and the plain data the
page is drawn from.

Why a module of its own: ``forecast`` and ``backtest`` work on one series; this is the step from a
:class:`~planner.history.result.History` (services, runs, a step that need not be an hour) to what the
scenario writer (``draft``), the page (``planner/outputs/reports/demand.py``, which takes plain data
because outputs and history are one layer) and the planner read.

Files (docs/demand.md):

- ``forecast/<service>/p<q>.csv`` per quantile (``p10``, ``p50``, ``p90``): ``hour,replicas``, the
  scenario's ``replicas: {csv: ...}`` format (models/workloads.py), ``hour`` 0 = the horizon's start;
- ``paths/<service>.npz`` (numpy ``savez_compressed``): ``paths`` (float32, paths x hours, replicas),
  ``start`` (ISO time of hour 0), ``seed``, ``model``;
- ``forecast/training_rates.csv``: per team and size class the runs per month, its 95 % interval, law;
- ``paths/training_runs.csv``: the sampled run sets (``team, sample, size_class, start, end, nodes,
  gpus_per_node``), one ``sample`` per future.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

import numpy as np
import pandas as pd
import yaml

from models.errors import InputError
from planner.history.backtest import BAND, BacktestResult, backtest
from planner.history.forecast import (
    DAY,
    RunRate,
    check_quantiles,
    forecast_many,
    sample_runs,
    series_seed,
    training_rates,
)
from planner.history.result import History, ServiceHistory

__all__ = ["HOUR", "Outlook", "ServiceOutlook", "Settings", "TeamTraining", "hourly", "outlook", "q_label"]

HOUR: Final = timedelta(hours=1)
#: Most hours a page's chart shows (history and forecast together); past it both are shown as daily means
#: (the files keep the hours).
CHART_POINTS: Final = 3000


@dataclass(frozen=True)
class Settings:
    """What to forecast: ``hours`` past the history's last hour, the quantiles, paths per series, the
    seed, the hours to hold out for the backtest (None: no backtest), worker processes, and how many of the
    sampled paths are written as demand futures for ``gpuplan futures`` (0: none)."""

    hours: int
    quantiles: tuple[float, ...] = (0.1, 0.5, 0.9)
    paths: int = 100
    seed: int = 0
    backtest_hours: int | None = None
    workers: int = 1
    futures: int = 10


@dataclass(frozen=True, eq=False)
class ServiceOutlook:
    """One service: its hourly history in replicas, the forecast, and its backtest when asked for.
    ``gpus_per_replica`` is the mapping's, else 1 with ``assumed`` True (then replicas = GPUs)."""

    service: ServiceHistory
    history: pd.Series
    gpus_per_replica: float
    assumed: bool
    forecast: Any  # planner.history.forecast.Forecast
    backtest: BacktestResult | None = None


@dataclass(frozen=True, eq=False)
class TeamTraining:
    """One team's training: the runs seen, their rates per size class, the sampled futures, and the
    sample the scenario takes (the one whose GPU-hours are the median of all samples')."""

    team: str
    runs: pd.DataFrame
    rates: list[RunRate]
    samples: pd.DataFrame
    chosen: int
    skipped: int = 0  # runs seen that cannot be a gang (fractional GPUs per node)

    @property
    def chosen_runs(self) -> pd.DataFrame:
        return self.samples[self.samples["sample"] == self.chosen].reset_index(drop=True)


@dataclass(frozen=True, eq=False)
class Outlook:
    """Every service's and team's future from one History (module docstring)."""

    start: pd.Timestamp
    settings: Settings
    services: dict[str, ServiceOutlook]
    training: dict[str, TeamTraining] = field(default_factory=dict)

    @property
    def hours(self) -> int:
        return self.settings.hours

    def csv_name(self, service: str, q: float) -> str:
        """The relative path of a service's quantile CSV (what scenario.yaml points at for P50)."""
        return f"forecast/{service}/{q_label(q)}.csv"

    def write(self, directory: Path, say: Callable[[str], None] | None = None) -> list[Path]:
        """The forecast's files under ``directory`` (a staging directory the caller renames)."""
        written: list[Path] = []
        (directory / "paths").mkdir(parents=True, exist_ok=True)
        for name, item in sorted(self.services.items()):
            folder = directory / "forecast" / name
            folder.mkdir(parents=True, exist_ok=True)
            for q in self.settings.quantiles:
                path = directory / self.csv_name(name, q)
                frame = pd.DataFrame(
                    {"hour": np.arange(self.hours), "replicas": item.forecast.quantile(q).to_numpy()}
                )
                frame.to_csv(path, index=False, float_format="%.10g")
                written.append(path)
            path = directory / "paths" / f"{name}.npz"
            np.savez_compressed(
                path,
                paths=item.forecast.paths.astype(np.float32),
                start=np.array(_stamp(self.start)),
                seed=np.array(item.forecast.seed),
                model=np.array(item.forecast.model),
            )
            written.append(path)
        written += self._write_futures(directory)
        rates = [
            {"team": team, **_rate_row(rate)} for team, t in sorted(self.training.items()) for rate in t.rates
        ]
        path = directory / "forecast" / "training_rates.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rates, columns=["team", *_RATE_COLUMNS]).to_csv(path, index=False)
        written.append(path)
        samples = [t.samples.assign(team=team) for team, t in sorted(self.training.items()) if len(t.samples)]
        columns = ["team", "sample", "size_class", "start", "end", "nodes", "gpus_per_node"]
        table = pd.concat(samples, ignore_index=True)[columns] if samples else pd.DataFrame(columns=columns)
        for column in ("start", "end"):
            table[column] = [_stamp(t) for t in table[column]]
        path = directory / "paths" / "training_runs.csv"
        table.to_csv(path, index=False)
        written.append(path)
        if say is not None:
            say(
                f"wrote the forecast: {len(self.services)} services, {self.hours} h from {_stamp(self.start)}"
            )
        return written

    def _write_futures(self, directory: Path) -> list[Path]:
        """``futures/<k>/<service>.csv`` (sampled path ``k`` of every service, the scenario's CSV format) and
        ``futures.yaml`` naming them, equally weighted: what ``gpuplan futures scenario.yaml futures.yaml``
        plans over (sample average approximation: each path is an equally likely future). The services'
        paths are drawn independently (one seed each); the training runs stay the scenario's."""
        count = min(self.settings.futures, self.settings.paths)
        if count <= 0 or not self.services:
            return []
        written: list[Path] = []
        entries = []
        for k in range(count):
            series = {}
            for name, item in sorted(self.services.items()):
                path = directory / "futures" / f"{k:03d}" / f"{name}.csv"
                path.parent.mkdir(parents=True, exist_ok=True)
                values = item.forecast.paths[k].astype(np.float32)
                pd.DataFrame({"hour": np.arange(self.hours), "replicas": values}).to_csv(
                    path, index=False, float_format="%.10g"
                )
                written.append(path)
                series[name] = f"futures/{k:03d}/{name}.csv"
            entries.append({"name": f"path-{k:03d}", "weight": 1.0, "series": series})
        text = (
            "# Drafted by gpuplan demand: sampled paths of the forecast, each an equally likely future, for\n"
            "# gpuplan futures scenario.yaml futures.yaml (training runs stay the scenario's).\n"
            + yaml.safe_dump({"futures": entries, "risk": {"cvar": 0.9, "weight": 0.0}}, sort_keys=False)
        )
        path = directory / "futures.yaml"
        path.write_text(text, encoding="utf-8")
        return [*written, path]

    def as_json(self) -> dict[str, object]:
        """The forecast's part of history.json: settings, per service its model and figures, the
        training rates, and the backtest when there was one."""
        services: dict[str, object] = {}
        for name, item in sorted(self.services.items()):
            f = item.forecast
            services[name] = {
                "model": f.model,
                "reason": f.reason,
                "gpus_per_replica": item.gpus_per_replica,
                "gpus_per_replica_assumed": item.assumed,
                "files": {q_label(q): self.csv_name(name, q) for q in self.settings.quantiles},
                "paths_file": f"paths/{name}.npz",
                "seed": f.seed,
                "mean_replicas": {q_label(q): round(float(f.quantile(q).mean()), 6) for q in f.quantiles},
                "diagnostics": dict(f.diagnostics),
            }
        document: dict[str, object] = {
            "start": _stamp(self.start),
            "hours": self.hours,
            "quantiles": list(self.settings.quantiles),
            "paths": self.settings.paths,
            "seed": self.settings.seed,
            "services": services,
            "training": {
                team: {
                    "runs_seen": len(t.runs),
                    "skipped": t.skipped,
                    "rates": [_rate_row(r) for r in t.rates],
                    "scenario_sample": t.chosen,
                    "scenario_runs": len(t.chosen_runs),
                }
                for team, t in sorted(self.training.items())
            },
        }
        if self.settings.backtest_hours is not None:
            document["backtest"] = {
                "holdout_hours": self.settings.backtest_hours,
                "services": {
                    name: backtest_json(item.backtest)
                    for name, item in sorted(self.services.items())
                    if item.backtest is not None
                },
            }
        return document

    def page_services(self) -> list[dict[str, Any]]:
        """Per service the plain data the page draws: history and forecast band (hourly, or both as daily
        means past :data:`CHART_POINTS`), model, quality, backtest figures."""
        qs = self.settings.quantiles
        low, high = qs[0], qs[-1]
        mid = 0.5 if 0.5 in qs else qs[len(qs) // 2]
        pages = []
        for name, item in sorted(self.services.items()):
            f = item.forecast
            daily = len(item.history) + len(f.quantiles) > CHART_POINTS  # one resolution for both
            history = _chart_series(item.history, daily)
            band = {q_label(q): _chart_series(f.quantile(q), daily) for q in (low, mid, high)}
            quality = item.service.quality
            pages.append(
                {
                    "name": name,
                    "team": item.service.team,
                    "namespaces": list(item.service.namespaces),
                    "series": list(item.service.series),
                    "gpus_per_replica": item.gpus_per_replica,
                    "assumed": item.assumed,
                    "model": f.model,
                    "reason": f.reason,
                    "history": history,
                    "daily": daily,
                    "band": band,
                    "low": q_label(low),
                    "mid": q_label(mid),
                    "high": q_label(high),
                    "history_mean": float(item.history.mean()),
                    "history_peak": float(item.history.max()),
                    "forecast_mean": float(f.quantile(mid).mean()),
                    "forecast_peak": float(f.quantile(high).max()),
                    "steps": quality.steps,
                    "measured": quality.measured,
                    "fills": [fill.text() for fill in quality.fills],
                    "negatives": quality.negatives,
                    "resets": quality.resets,
                    "backtest": backtest_json(item.backtest) if item.backtest is not None else None,
                }
            )
        return pages


_RATE_COLUMNS = [
    "size_class", "runs", "months", "rate_per_month", "ci_low", "ci_high", "law", "dispersion",
]  # fmt: skip


def _rate_row(rate: RunRate) -> dict[str, object]:
    return {
        "size_class": rate.size_class,
        "runs": rate.runs,
        "months": rate.months,
        "rate_per_month": round(rate.rate_per_month, 6),
        "ci_low": round(rate.ci_low, 6),
        "ci_high": round(rate.ci_high, 6),
        "law": rate.law,
        "dispersion": None if rate.dispersion is None else round(rate.dispersion, 6),
    }


def backtest_json(result: BacktestResult) -> dict[str, object]:
    """A backtest's figures: the model's and the seasonal-naive baseline's MAPE, MASE, coverage."""

    def scores(s: Any) -> dict[str, object]:
        return {
            "mae": round(s.mae, 6),
            "mape_pct": None if s.mape is None else round(s.mape, 4),
            "mase": None if s.mase is None else round(s.mase, 6),
            "coverage": round(s.coverage, 6),
            "notes": list(s.notes),
        }

    return {
        "train_hours": result.train_hours,
        "holdout_hours": result.holdout_hours,
        "season_hours": result.season,
        "band": [q_label(BAND[0]), q_label(BAND[1])],
        "model_name": result.forecast.model,
        "model": scores(result.model),
        "baseline": scores(result.baseline),
        "earns_its_keep": result.earns_its_keep,
    }


def q_label(q: float) -> str:
    """``0.1`` -> ``p10``, ``0.025`` -> ``p2.5``."""
    return f"p{q * 100:g}"


def _stamp(when: Any) -> str:
    return pd.Timestamp(when).tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ")


def _chart_series(series: pd.Series, daily: bool) -> dict[str, list[Any]]:
    """Times (ISO) and values for a chart trace: hourly, or daily means."""
    shown = series.resample("D").mean() if daily else series
    return {
        "times": [_stamp(t) for t in shown.index],
        "values": [round(float(v), 4) for v in shown.to_numpy()],
    }


# ---- from a History ------------------------------------------------------------------------------


def check_step(step: timedelta) -> None:
    """The forecast is hourly: a history read at an hour or a divisor of it; else an InputError."""
    seconds = step.total_seconds()
    if seconds <= 0 or seconds > 3600 or 3600 % seconds:
        raise InputError(
            None, "--step", f"{step} does not divide an hour; the forecast is hourly: read with --step 1h"
        )


def hourly(series: pd.Series, step: timedelta) -> pd.Series:
    """A series on ``step`` as hourly means (as is when the step is an hour); the hours the history
    covers only in part are dropped at either end."""
    check_step(step)
    if step == HOUR:
        return series.astype(float)
    per = round(3600 / step.total_seconds())
    grouped = series.astype(float).resample("h")
    counts = grouped.count()
    return grouped.mean()[counts == per]


def _history_runs(history: History) -> pd.DataFrame:
    rows = [
        {
            "name": r.name,
            "team": r.team,
            "namespace": r.namespace,
            "start": pd.Timestamp(r.start),
            "end": pd.Timestamp(r.end),
            "nodes": r.nodes,
            "gpus_per_node": r.gpus_per_node,
        }
        for r in history.runs
    ]
    columns = ["name", "team", "namespace", "start", "end", "nodes", "gpus_per_node"]
    return pd.DataFrame(rows, columns=columns)


def _median_sample(samples: pd.DataFrame, n_samples: int) -> int:
    """The sample whose GPU-hours are the median of all samples' (an empty sample counts as 0)."""
    totals = np.zeros(n_samples)
    if len(samples):
        hours = (samples["end"] - samples["start"]).dt.total_seconds() / 3600.0
        gpu_hours = hours * samples["nodes"] * samples["gpus_per_node"]
        np.add.at(totals, samples["sample"].to_numpy(dtype=int), gpu_hours.to_numpy(dtype=float))
    order = np.argsort(totals, kind="stable")
    return int(order[(n_samples - 1) // 2])


def outlook(history: History, settings: Settings, say: Callable[[str], None] | None = None) -> Outlook:
    """Forecast every service of ``history`` ``settings.hours`` ahead of its last hour, sample each team's
    training runs over that horizon, and backtest when ``settings.backtest_hours`` is set."""
    qs = check_quantiles(settings.quantiles)
    if settings.hours < 1:
        raise InputError(None, "--horizon", "must be at least one hour")
    if settings.paths < 1:
        raise InputError(None, "--paths", f"need at least one path, got {settings.paths}")
    if not history.services:
        raise InputError(None, "history", "no service to forecast: the history mapped no series")
    series: dict[str, pd.Series] = {}
    sizes: dict[str, tuple[float, bool]] = {}
    for name, service in history.services.items():
        per = service.gpus_per_replica
        sizes[name] = (per, False) if per else (1.0, True)
        series[name] = hourly(service.gpus / sizes[name][0], history.provenance.step)
    lengths = {len(s) for s in series.values()}
    hours_seen = min(lengths)
    if hours_seen < 1:
        raise InputError(None, "history", "no whole hour of history to forecast from")
    if settings.backtest_hours is not None and hours_seen - settings.backtest_hours < DAY + 1:
        raise InputError(
            None,
            "--backtest",
            f"holding out {settings.backtest_hours} h of the {hours_seen} h history leaves "
            f"{max(hours_seen - settings.backtest_hours, 0)} h: need at least {DAY + 1} h to fit; "
            "hold out less",
        )
    last = pd.Timestamp(next(iter(series.values())).index[-1])
    start = last + pd.Timedelta(hours=1)
    if say is not None:
        say(f"forecasting {len(series)} services {settings.hours} h ahead ({settings.paths} paths each)")
    forecasts = forecast_many(series, settings.hours, qs, settings.paths, settings.seed, settings.workers)
    services: dict[str, ServiceOutlook] = {}
    for name, s in series.items():
        tested = None
        if settings.backtest_hours is not None:
            tested = backtest(
                s, settings.backtest_hours, qs, settings.paths, series_seed(settings.seed, name), name
            )
        per, assumed = sizes[name]
        services[name] = ServiceOutlook(history.services[name], s, per, assumed, forecasts[name], tested)
    training = _training(history, start, settings)
    return Outlook(start, Settings(settings.hours, qs, settings.paths, settings.seed, settings.backtest_hours,
                                   settings.workers), services, training)  # fmt: skip


def _training(history: History, start: pd.Timestamp, settings: Settings) -> dict[str, TeamTraining]:
    """Per team with runs: rates over the history's window and sampled run sets over the horizon."""
    runs = _history_runs(history)
    if runs.empty:
        return {}
    whole = (runs["gpus_per_node"] >= 1) & (runs["gpus_per_node"] % 1 == 0)
    since = pd.Timestamp(history.provenance.start)
    until = pd.Timestamp(history.provenance.end) + pd.Timedelta(history.provenance.step)
    teams: dict[str, TeamTraining] = {}
    for team, group in runs.groupby("team", sort=True):
        usable = group[whole.loc[group.index]]
        skipped = len(group) - len(usable)
        if usable.empty:
            continue
        rates = training_rates(usable, since=since, until=until)
        samples = sample_runs(
            usable,
            rates,
            start,
            settings.hours,
            settings.paths,
            series_seed(settings.seed, f"training:{team}"),
        )
        chosen = _median_sample(samples, settings.paths)
        teams[str(team)] = TeamTraining(
            str(team), usable.reset_index(drop=True), rates, samples, chosen, skipped
        )
    return teams


def default_workers(services: int) -> int:
    """Processes for the fits: one for a few series (a pool costs ~1 s to start), else the CPUs, at most 8."""
    return 1 if services < 16 else max(1, min(8, os.cpu_count() or 1))


def ceil_hours(hours: float) -> float:
    """A run's length to the hundredth of an hour above (what scenario.yaml states)."""
    return math.ceil(hours * 100 - 1e-6) / 100
