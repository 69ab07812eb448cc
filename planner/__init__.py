"""Everything that decides, checks, explains and acts, in layers (each imports only those below it):

``cli`` (the commands) -> ``operations`` (reconcile, provision, the daemon, the portal) -> ``outputs``
(reports, Terraform, Kueue, the desired state) | ``verify`` (the independent check) | ``simulate`` (trace
replay) -> ``planning`` (the problem, MIG, baselines, the optimizer, what-if, break-even) -> ``solvers``
(HiGHS, CBC). The domain is ``models/``; the clouds are ``providers/``. The contracts are in
``pyproject.toml`` (``[tool.importlinter]``); docs/architecture.md is the map.
"""
