"""The planning problem as both methods, the baselines and MIG see it: the commitment columns a scenario
may buy and holds already (``purchases``), the index sets of feasible tuples (``sets``), and the scenario
checked against its catalog before any solve (``checks``: what ``gpuplan validate`` and ``plan`` both run).
"""
