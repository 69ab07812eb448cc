"""Acting on a fleet: a plan's desired state against a provider's inventory (``reconcile``), the actions
applied in order (``provision``), AWS Capacity Blocks (``capacity_blocks``), the scheduled daemon
(``daemon/``) and the team leads' portal on its database (``portal/``); their errors in ``errors``.
With the commands above it, the only code of ``planner/`` that talks to ``providers/``.
"""
