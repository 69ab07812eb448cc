"""Replay job traces on a fleet under different scheduling policies (``gpuplan simulate``).

Why: the planner decides how many GPUs to hold; whether those GPUs are actually kept busy depends on the
scheduler. ``events`` is the discrete-event replay and its policies; ``philly`` turns the Microsoft
Philly trace (plus synthetic inference services) into jobs and sizes a fleet for them with the planner.
"""

from __future__ import annotations

from planner.simulate.events import (
    POLICIES,
    PRIORITIES,
    BestFitPolicy,
    ClusterState,
    Fleet,
    Job,
    NaivePolicy,
    Policy,
    Shape,
    SimResult,
    Simulator,
    WorkloadAwarePolicy,
    make_policy,
    simulate,
)

__all__ = [
    "POLICIES",
    "PRIORITIES",
    "BestFitPolicy",
    "ClusterState",
    "Fleet",
    "Job",
    "NaivePolicy",
    "Policy",
    "Shape",
    "SimResult",
    "Simulator",
    "WorkloadAwarePolicy",
    "make_policy",
    "simulate",
]
