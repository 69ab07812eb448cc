"""`gpuplan daemon`: scheduled re-planning and reconciliation (issue 16): config, store and journal, jobs,
metrics. Imported only by the daemon command; needs the ``[daemon]`` extra (APScheduler, SQLAlchemy,
prometheus-client)."""
