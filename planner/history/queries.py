"""The PromQL gpuplan reads a fleet's history with, and the small YAML file that overrides it.

Each query has a role. ``allocated`` (required) and ``mig`` give what is billed: GPUs (and MIG slices)
requested by *running* pods, from kube-state-metrics (https://github.com/kubernetes/kube-state-metrics/blob/main/docs/metrics/workload/pod-metrics.md:
``kube_pod_container_resource_requests`` with ``resource="nvidia_com_gpu"``, ``kube_pod_status_phase``,
``kube_pod_labels``), summed per namespace and per the team and workload pod labels, leaving out the pods
of gangs (``runs`` reads those, pod by pod, so training is not counted twice). ``coverage`` says when the
monitoring itself saw the cluster: a step where it is empty is a *gap* (filled, and said so); a step where
it has data but a service's series has none is 0 GPUs (no running pod asked for any). ``utilization``
(DCGM exporter ``DCGM_FI_DEV_GPU_UTIL`` by ``exported_namespace``:
https://docs.nvidia.com/datacenter/dcgm/latest/gpu-telemetry/dcgm-exporter.html) and ``pending`` (Kueue
``kueue_pending_workloads`` by ``cluster_queue``: https://kueue.sigs.k8s.io/docs/reference/metrics/) are
optional: when they return nothing, a warning says so.

kube-state-metrics exports pod labels on ``kube_pod_labels`` as ``label_<name>`` with every character
that is not a letter, digit or ``_`` made ``_`` (``gpuplan.io/workload`` -> ``label_gpuplan_io_workload``),
and only those allowed by ``--metric-labels-allowlist``: allow the team, workload and gang labels there.

The queries file (``--queries q.yaml``), every key optional, unknown keys refused::

    team_label: gpuplan.io/team            # pod labels, as on the pod (not the label_ form)
    workload_label: gpuplan.io/workload
    gang_labels: [jobset.sigs.k8s.io/jobset-name, job-name]
    queries:                               # PromQL replacing a default (gpuplan demand --show-queries)
      allocated: sum by (namespace) (...)
      utilization: ...
    counters: [pending]                    # roles whose query returns a raw counter (resets are mended)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from models.errors import InputError
from models.yamlfile import read_yaml

__all__ = [
    "DEFAULT_GANG_LABELS",
    "ROLES",
    "QueryConfig",
    "Role",
    "load_queries",
    "metric_label",
]

Role = Literal["allocated", "mig", "coverage", "utilization", "pending", "runs"]
ROLES: Final[tuple[Role, ...]] = ("allocated", "mig", "coverage", "utilization", "pending", "runs")
#: Roles that must return data: without them there is no demand to read.
REQUIRED_ROLES: Final = frozenset({"allocated", "coverage"})
#: The pod labels that group a gang's pods, most specific first (the OpenCost export reads them too):
#: JobSet (``jobset.sigs.k8s.io/jobset-name``, on every pod of every child Job: ``JobSetNameKey`` of
#: https://github.com/kubernetes-sigs/jobset api/jobset/v1alpha2), the Kubeflow training operator (its
#: ``JobNameLabel``: https://github.com/kubeflow/training-operator), Kueue's plain-pod groups
#: (``GroupNameLabel``: https://kueue.sigs.k8s.io/docs/tasks/run/plain_pods/; Kueue names a Job's
#: workload only in the annotation ``kueue.x-k8s.io/workload``, not a label), batch/v1 Job
#: (``batch.kubernetes.io/job-name`` since Kubernetes 1.27, and the older ``job-name`` it still sets:
#: https://kubernetes.io/docs/reference/labels-annotations-taints/#batch-kubernetes-io-job-name).
DEFAULT_GANG_LABELS: Final = (
    "jobset.sigs.k8s.io/jobset-name",
    "training.kubeflow.org/job-name",
    "kueue.x-k8s.io/pod-group-name",
    "batch.kubernetes.io/job-name",
    "job-name",
)
_LABEL: Final = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._/-]{0,251}[A-Za-z0-9])?")
_NOT_WORD: Final = re.compile(r"[^A-Za-z0-9_]")


def metric_label(pod_label: str) -> str:
    """The name kube-state-metrics gives a pod label on ``kube_pod_labels``: ``label_`` + the label
    with every character that is not a letter, digit or underscore made ``_``."""
    return "label_" + _NOT_WORD.sub("_", pod_label)


class QueryConfig(BaseModel):
    """What ``--queries`` may set (module docstring); the defaults are what a fleet gpuplan k8s set up
    exposes. :meth:`query` gives each role's PromQL, the override or the default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    team_label: str = Field("gpuplan.io/team", pattern=_LABEL.pattern)
    workload_label: str = Field("gpuplan.io/workload", pattern=_LABEL.pattern)
    gang_labels: tuple[str, ...] = Field(DEFAULT_GANG_LABELS, min_length=1, max_length=8)
    queries: dict[Role, str] = Field(default_factory=dict)
    counters: tuple[Role, ...] = ()

    @property
    def team_key(self) -> str:
        return metric_label(self.team_label)

    @property
    def workload_key(self) -> str:
        return metric_label(self.workload_label)

    @property
    def gang_keys(self) -> tuple[str, ...]:
        return tuple(metric_label(label) for label in self.gang_labels)

    def query(self, role: Role) -> str:
        """``role``'s PromQL: the file's, else the default."""
        return self.queries.get(role) or self.defaults()[role]

    def all(self) -> dict[Role, str]:
        return {role: self.query(role) for role in ROLES}

    def defaults(self) -> dict[Role, str]:
        """The default PromQL per role, built from the label settings."""
        team, workload = self.team_key, self.workload_key
        running = 'on (namespace, pod) group_left() (kube_pod_status_phase{phase="Running"} == 1)'
        labels = f"on (namespace, pod) group_left({team}, {workload}) kube_pod_labels"
        gang = " or ".join(f'kube_pod_labels{{{key}!=""}}' for key in self.gang_keys)
        not_gang = f"unless on (namespace, pod) ({gang})"

        def services(selector: str, by: str) -> str:
            # PromQL binds ``*`` tighter than ``unless``: brackets make it (requests unless gangs) * labels
            return (
                f"sum by ({by}) ((("
                f"kube_pod_container_resource_requests{{{selector}}} * {running}) {not_gang}) * {labels})"
            )

        gangs = ", ".join(self.gang_keys)
        return {
            "allocated": services('resource="nvidia_com_gpu"', f"namespace, {team}, {workload}"),
            "mig": services('resource=~"nvidia_com_mig_.+"', f"namespace, resource, {team}, {workload}"),
            "coverage": "count(kube_pod_info)",
            "utilization": "avg by (exported_namespace) (DCGM_FI_DEV_GPU_UTIL)",
            "pending": "sum by (cluster_queue) (kueue_pending_workloads)",
            "runs": (
                "sum by (namespace, pod, node, "
                f'{gangs}) ((kube_pod_container_resource_requests{{resource="nvidia_com_gpu"}} * {running}) '
                f"* on (namespace, pod) group_left({gangs}) kube_pod_labels)"
            ),
        }


def load_queries(path: Path | None) -> QueryConfig:
    """The queries file at ``path`` (None: the defaults); InputError naming the field otherwise."""
    if path is None:
        return QueryConfig()
    data = read_yaml(path)
    if data is None:
        return QueryConfig()
    try:
        return QueryConfig.model_validate(data)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(p) for p in problem["loc"]) or None
        raise InputError(path, where, str(problem["msg"]).removeprefix("Value error, ")) from None
