"""The solvers, behind one adapter each: HiGHS through highspy (``highs``: every model the planner hands to
HiGHS), and PuLP problems solved by HiGHS or CBC with their status as enums (``solve``).
"""
