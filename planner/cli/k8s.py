"""`gpuplan k8s`: a plan as Kueue quotas and team namespaces (``planner/outputs/k8s.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from models.errors import GpuplanError
from models.files import atomic_directory
from planner.cli.common import err, fail, out

__all__ = ["k8s"]


_HELP = "\n\n".join(
    (
        "Write Kueue (kueue.x-k8s.io/v1beta2) quotas and team namespaces for a plan, one YAML file per kind "
        "in DIR. Apply them, with Kueue installed, by `kubectl apply -f DIR` (files apply in name order, "
        "namespaces first). The same plan always writes the same bytes.",
        "00-namespaces.yaml, 01-service-accounts.yaml: a Namespace and a ServiceAccount per team.",
        "10-resource-flavors.yaml: a ResourceFlavor per GPU product and capacity type the plan holds, "
        "selecting nodes by nvidia.com/gpu.product and gpuplan.io/capacity-type (reserved, owned, "
        "on-demand, spot; spot nodes are tainted gpuplan.io/capacity-type=spot:NoSchedule and only "
        "workloads that tolerate it are admitted there), and one per GPU product with MIG slices (the "
        "resources nvidia.com/mig-<profile>; nodes pick their slicing by nvidia.com/mig.config).",
        "11-workload-priority-classes.yaml: production inference 1000 > inference 800 > training 500 > "
        "batch 100.",
        "12-cluster-queues.yaml: a ClusterQueue per team in cohort gpuplan: nominal quota = its "
        "guaranteed GPUs on the committed flavors it can use, borrowing limit = burst - guaranteed, "
        "flavors cheapest first as the plan prices them; and gpuplan-shared, which admits nothing and "
        "lends the GPUs the plan holds beyond the guarantees.",
        "13-local-queues.yaml: a LocalQueue per team namespace. 20-mig-parted-config.yaml: the plan's "
        "mig-parted config as a ConfigMap for the GPU Operator's mig-manager.",
        "README.md: the labels each node pool needs, each team's quota, and each workload's queue, "
        "priority class and spot toleration.",
    )
)


def k8s(
    plan_dir: Annotated[Path, typer.Argument(help="plan directory written by gpuplan plan")],
    output: Annotated[Path, typer.Option("--output", "-o", help="directory of manifests to write")] = Path(
        "k8s"
    ),
    reclaim: Annotated[
        str,
        typer.Option(
            help="reclaimWithinCohort of the team queues: Any (a guarantee is taken back from any "
            "borrower) or LowerPriority (only from borrowers of lower priority)"
        ),
    ] = "Any",
    namespace_prefix: Annotated[
        str, typer.Option(help="prefix of every team's namespace and queue name (e.g. team-)")
    ] = "",
    gpu_operator_namespace: Annotated[
        str, typer.Option(help="namespace of the NVIDIA GPU Operator (where the MIG ConfigMap goes)")
    ] = "gpu-operator",
) -> None:
    from models.plan import Plan
    from planner.outputs.k8s import build_manifests

    try:
        loaded = Plan.read(plan_dir)
        manifests = build_manifests(
            loaded,
            source=plan_dir / "plan.json",
            reclaim=reclaim,
            namespace_prefix=namespace_prefix,
            gpu_operator_namespace=gpu_operator_namespace,
        )
        with atomic_directory(output) as staging:
            written = manifests.write(staging)
    except GpuplanError as exc:
        raise fail(exc) from None
    for warning in manifests.warnings:
        err.print(f"[yellow]warning:[/] {warning}", highlight=False)
    names = ", ".join(path.name for path in written)
    out.print(f"wrote {output}/: {names} (kubectl apply -f {output})", highlight=False)


k8s.__doc__ = _HELP
