"""MIG on the planner side: packing replicas onto the fewest GPUs (``packing``, a small cutting-stock
MILP through ``planner.solvers.highs``), the plan's MIG section (``layouts``) and the mig-parted config
(``config``). Profiles, placements and valid layouts are the domain's: ``models.mig``.
"""
