"""GCP flex-start VMs (Dynamic Workload Scheduler) as Compute Engine sells them: the longest run, the start
delay a plan allows for, the price.

One file for the rules, so the planner (flex-start as a training tier, ``planner/planning/problem/sets.py``),
``gpuplan verify`` (``planner/verify/flex_start.py``) and the GCP adapter agree on what a flex-start gang
is. Facts, with their sources:

- A flex-start VM is created with ``scheduling.provisioningModel: FLEX_START`` and a run duration
  (``maxRunDuration``) of at most 7 days; Compute Engine deletes it at the end of that duration
  (https://docs.cloud.google.com/compute/docs/instances/about-flex-start-vms; the resize request's
  ``--requested-run-duration`` "must be between 10m and 7d",
  https://cloud.google.com/sdk/gcloud/reference/compute/instance-groups/managed/resize-requests/create).
- A gang's VMs are granted all at once, as soon as capacity is available, with no guaranteed start time
  (https://cloud.google.com/compute/docs/instance-groups/about-resize-requests-mig), and are billed only
  while they run (https://cloud.google.com/vertex-ai/docs/predictions/use-flex-start-vms: "You are only
  charged for the amount of time your workload is running").
- Price: Dynamic Workload Scheduler pricing, "a discount up to 53% for memory, vCPUs, and any attached
  GPUs" against on-demand (about-resize-requests-mig above). The catalog holds the rate per offering
  (``flex_start_usd_h``); where no quote was read it is :data:`FLEX_START_ASSUMED_RATIO` x on-demand, marked
  ``assumed`` in its ``flex_start_basis`` column.
- Start delay: Google publishes no expected wait. The default a scenario plans with,
  :data:`DEFAULT_FLEX_START_DELAY_HOURS`, is the longest wait Vertex AI's DWS flex-start allows by default
  (``scheduling.maxWaitDuration``: "The default is 24 hours",
  https://googleapis.dev/dotnet/Google.Apis.Aiplatform.v1/latest/api/
  Google.Apis.Aiplatform.v1.Data.GoogleCloudAiplatformV1Scheduling.html): a run placed on
  flex-start starts no earlier than its window's start plus that delay, so a request made at the window's
  start that waits the whole default still finishes inside the window.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_FLEX_START_DELAY_HOURS",
    "FLEX_START_ASSUMED_RATIO",
    "FLEX_START_MAX_RUN_HOURS",
    "why_no_flex_start",
]

#: The longest a flex-start VM runs (``maxRunDuration``): 7 days.
FLEX_START_MAX_RUN_HOURS = 7 * 24
#: The start delay a scenario plans with unless it says otherwise (``purchase.flex_start_delay_hours``).
DEFAULT_FLEX_START_DELAY_HOURS = 24.0
#: The flex-start rate as a share of on-demand where no quote was read: 1 - the 53% DWS discount (an
#: upper bound of the discount Google states, so an optimistic ASSUMPTION; quote it where it matters).
FLEX_START_ASSUMED_RATIO = 0.47


def why_no_flex_start(cloud: str, hours: float) -> str | None:
    """Why a gang of ``cloud`` running ``hours`` cannot run on flex-start VMs (None: it can)."""
    if cloud != "gcp":
        return f"flex-start is a GCP provisioning model ({cloud} sells none)"
    if hours > FLEX_START_MAX_RUN_HOURS + 1e-9:
        return f"{hours:g} h: longer than a flex-start VM runs ({FLEX_START_MAX_RUN_HOURS} h, 7 days)"
    return None
