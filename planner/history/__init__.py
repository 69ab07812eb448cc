"""Demand from the fleet's own history: readers, hourly series, forecasts and backtests (issue 40)."""
