"""Demand from what the fleet did (issue 40): a Prometheus server, an OpenCost allocation export or a
usage CSV read into hourly demand per service and the training runs seen, with what was read, from where,
and every gap and how it was filled (:class:`planner.history.result.History`).

Modules, each with one job: ``prometheus`` (the HTTP API client: auth, chunks, retries), ``queries`` (the
PromQL per role and its overrides), ``mapping`` (series -> gpuplan services), ``series`` (gaps, resets,
fills), ``assemble`` (measured series -> services), ``runs`` (gangs -> training runs), ``read`` (Prometheus
-> History), ``sources`` (OpenCost and usage CSV -> History), ``result`` (History, its files),
``errors``; ``forecast`` (seasonal forecasts with quantiles and sampled paths, training-run rates) and
``backtest`` (its error and band coverage on held-out history) build on History.
"""
