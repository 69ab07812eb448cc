"""Deciding: the planning problem (``problem/``: purchase columns, index sets, checks against the catalog),
MIG packing (``mig/``), the peers a plan is compared against (``baselines``), the optimizer (``optimize/``),
and the analyses built on it: what-if variants (``whatif``), own or rent (``breakeven``), their sweeps
(``sweeps``) and a plan's cost per month (``monthly``). Layered as pyproject.toml's ``planning`` contract
says: analyses -> sweeps -> optimize -> baselines -> mig -> problem.
"""
