"""Replay job traces on a fleet under different scheduling policies (``gpuplan simulate``).

Why: the planner decides how many GPUs to hold; whether those GPUs are actually kept busy depends on the
scheduler. ``fleet`` holds the inputs (fleet, jobs) and the cluster state, ``policies`` the scheduling
policies, ``events`` the discrete-event replay and its results; ``philly`` turns the Microsoft Philly
trace (plus synthetic inference services) into jobs and sizes a fleet for them with the planner.
"""

from __future__ import annotations

from planner.simulate.events import SimResult, Simulator, simulate
from planner.simulate.fleet import PRIORITIES, ClusterState, Fleet, Job, Shape
from planner.simulate.policies import (
    POLICIES,
    BestFitPolicy,
    KubernetesPolicy,
    NaivePolicy,
    Policy,
    WorkloadAwarePolicy,
    make_policy,
)

__all__ = [
    "POLICIES",
    "PRIORITIES",
    "BestFitPolicy",
    "ClusterState",
    "Fleet",
    "Job",
    "KubernetesPolicy",
    "NaivePolicy",
    "Policy",
    "Shape",
    "SimResult",
    "Simulator",
    "WorkloadAwarePolicy",
    "make_policy",
    "simulate",
]
