################################################################################
# Common interface (the same on every cloud's gpuplan module)
################################################################################

variable "name" {
  description = "Prefix of every resource name. Lower case, starts with a letter, at most 41 characters so the suffixes fit GCP's 63."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,40}$", var.name))
    error_message = "name must match ^[a-z][a-z0-9-]{0,40}$ (lower case letters, digits and hyphens, starting with a letter)."
  }
}

variable "plan_id" {
  description = "Id of the gpuplan plan; the value of the gpuplan-plan label (lower-cased, other characters than [a-z0-9_-] become hyphens)."
  type        = string

  validation {
    condition     = length(var.plan_id) > 0 && length(var.plan_id) <= 63
    error_message = "plan_id must be 1 to 63 characters (a GCP label value)."
  }
}

variable "pool" {
  description = "Name of the pool in the plan; the value of the gpuplan-pool label (normalised like plan_id)."
  type        = string

  validation {
    condition     = length(var.pool) > 0 && length(var.pool) <= 63
    error_message = "pool must be 1 to 63 characters (a GCP label value)."
  }
}

variable "run" {
  description = "Training run this pool is the gang of, or null. A gang is labelled gpuplan-run, gets a COLLOCATED placement policy and launches a fixed set of instances (no managed group, no autoscaling)."
  type        = string
  default     = null

  validation {
    condition     = var.run == null ? true : length(var.run) > 0 && length(var.run) <= 63
    error_message = "run must be null or 1 to 63 characters (a GCP label value)."
  }
}

variable "on_demand_nodes" {
  description = "Number of on-demand (STANDARD provisioning model) nodes."
  type        = number
  default     = 0

  validation {
    condition     = var.on_demand_nodes >= 0 && floor(var.on_demand_nodes) == var.on_demand_nodes
    error_message = "on_demand_nodes must be a whole number >= 0."
  }
}

variable "spot_nodes" {
  description = "Number of Spot nodes. A pool with both kinds gets one managed instance group per kind; a gang must be one kind only."
  type        = number
  default     = 0

  validation {
    condition     = var.spot_nodes >= 0 && floor(var.spot_nodes) == var.spot_nodes
    error_message = "spot_nodes must be a whole number >= 0."
  }

  validation {
    condition     = var.run == null || var.spot_nodes == 0 || var.on_demand_nodes == 0
    error_message = "A gang (run set) is either all spot or all on-demand: set spot_nodes or on_demand_nodes, not both."
  }
}

variable "fabric" {
  description = "GPU interconnect: null, \"tcpx\" (a3-highgpu-8g, 4 GPUDirect-TCPX NICs), \"tcpxo\" (a3-megagpu-8g, 8 GPUDirect-TCPXO NICs) or \"infiniband\" (A3 Ultra / A4, 8 MRDMA NICs for GPUDirect-RDMA)."
  type        = string
  default     = null

  validation {
    condition     = var.fabric == null ? true : contains(["tcpx", "tcpxo", "infiniband"], var.fabric)
    error_message = "fabric must be null, \"tcpx\", \"tcpxo\" or \"infiniband\" on GCP (\"efa\" is AWS only)."
  }

  validation {
    condition = (
      var.fabric == null ? true :
      var.fabric == "tcpx" ? var.machine_type == "a3-highgpu-8g" :
      var.fabric == "tcpxo" ? var.machine_type == "a3-megagpu-8g" :
      startswith(var.machine_type, "a3-ultragpu-") || startswith(var.machine_type, "a4-highgpu-")
    )
    error_message = "fabric needs its machine type: tcpx a3-highgpu-8g, tcpxo a3-megagpu-8g, infiniband a3-ultragpu-* or a4-highgpu-*."
  }
}

variable "reserved_nodes" {
  description = "When > 0, a specific zonal reservation of that many on-demand nodes of machine_type; the first min(on_demand_nodes, reserved_nodes) on-demand nodes consume it (SPECIFIC_RESERVATION affinity), the rest launch outside it."
  type        = number
  default     = 0

  validation {
    condition     = var.reserved_nodes >= 0 && floor(var.reserved_nodes) == var.reserved_nodes
    error_message = "reserved_nodes must be a whole number >= 0."
  }
}

variable "placement_group_name" {
  description = "Name of a gang's compact placement policy (null: <name>-placement). gpuplan's roots pass the name gpuplan provision gives it, so a fleet applied by Terraform and one reconciled by provision agree."
  type        = string
  default     = null

  validation {
    condition     = var.placement_group_name == null || can(regex("^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$", var.placement_group_name))
    error_message = "placement_group_name must be a GCP resource name: a lower-case letter, then up to 62 lower-case letters, digits or '-', not ending in '-'."
  }
}

variable "reservation_name" {
  description = "Name of the capacity reservation (null: <name>-rsv). gpuplan's roots pass the name gpuplan provision gives a gang's reservation."
  type        = string
  default     = null

  validation {
    condition     = var.reservation_name == null || can(regex("^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$", var.reservation_name))
    error_message = "reservation_name must be a GCP resource name: a lower-case letter, then up to 62 lower-case letters, digits or '-', not ending in '-'."
  }
}

variable "reservation_end" {
  description = "When the capacity reservation ends, as an RFC 3339 UTC time (2027-01-05T18:00:00Z), or null: it lasts until deleted. Compute Engine deletes it at that time (delete_at_time). gpuplan's roots pass a gang's planned end plus the margin gpuplan provision gives its reservations, so a root applied and never destroyed stops paying for the reservation."
  type        = string
  default     = null

  validation {
    condition     = var.reservation_end == null || (can(regex("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$", var.reservation_end)) && can(formatdate("YYYY", var.reservation_end)))
    error_message = "reservation_end must be null or an RFC 3339 time in UTC such as 2027-01-05T18:00:00Z."
  }
}

variable "labels" {
  description = "Extra labels for every labelled resource; the gpuplan-plan, gpuplan-pool, gpuplan-run and gpuplan-managed-by labels win over keys of the same name."
  type        = map(string)
  default     = {}

  validation {
    condition = alltrue([
      for k, v in var.labels : can(regex("^[a-z][a-z0-9_-]{0,62}$", k)) && can(regex("^[a-z0-9_-]{0,63}$", v))
    ])
    error_message = "Label keys must match ^[a-z][a-z0-9_-]{0,62}$ and values ^[a-z0-9_-]{0,63}$ (GCP label rules)."
  }
}

################################################################################
# GCP
################################################################################

variable "project" {
  description = "Project id every resource is created in."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project))
    error_message = "project must be a GCP project id: 6 to 30 characters, lower case letters, digits and hyphens, starting with a letter."
  }
}

variable "region" {
  description = "Region of the subnetworks and of the placement policy, e.g. us-central1."
  type        = string

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must look like us-central1 or europe-west4."
  }
}

variable "zone" {
  description = "Zone of the instances, the managed instance groups and the reservation; inside region, e.g. us-central1-a."
  type        = string

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+-[a-z]$", var.zone)) && startswith(var.zone, "${var.region}-")
    error_message = "zone must look like us-central1-a and lie in region."
  }
}

variable "machine_type" {
  description = "Machine type of every node, e.g. a3-highgpu-8g, a2-ultragpu-8g, g2-standard-48 (accelerator-optimized types bring their GPUs)."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9]*-[a-z0-9-]+$", var.machine_type))
    error_message = "machine_type must be a GCE machine type name such as a3-highgpu-8g."
  }
}

variable "image" {
  description = "Boot image or image family (any form GCE accepts); the default is a Deep Learning VM family with CUDA 12.4."
  type        = string
  default     = "projects/deeplearning-platform-release/global/images/family/common-cu124-debian-11-py310"

  validation {
    condition     = length(var.image) > 0
    error_message = "image must not be empty."
  }
}

variable "boot_disk_gb" {
  description = "Boot disk size in GB."
  type        = number
  default     = 200

  validation {
    condition     = var.boot_disk_gb >= 10 && floor(var.boot_disk_gb) == var.boot_disk_gb
    error_message = "boot_disk_gb must be a whole number >= 10."
  }
}

variable "boot_disk_type" {
  description = "Boot disk type (null: per machine type, hyperdisk-balanced on A3 Ultra and A4, which take Hyperdisk only, pd-balanced elsewhere). a3-highgpu/megagpu boot from pd-balanced or hyperdisk-balanced."
  type        = string
  default     = null

  validation {
    condition     = var.boot_disk_type == null || contains(["pd-balanced", "pd-ssd", "pd-standard", "hyperdisk-balanced"], coalesce(var.boot_disk_type, "pd-balanced"))
    error_message = "boot_disk_type must be pd-balanced, pd-ssd, pd-standard or hyperdisk-balanced."
  }

  validation {
    condition     = var.boot_disk_type == null || !startswith(var.machine_type, "a3-") || contains(["pd-balanced", "hyperdisk-balanced"], coalesce(var.boot_disk_type, "pd-balanced"))
    error_message = "a3 machine types boot from hyperdisk-balanced or pd-balanced."
  }

  # https://cloud.google.com/compute/docs/accelerator-optimized-machines (A3 Ultra and A4: Hyperdisk only)
  validation {
    condition     = var.boot_disk_type == null || !can(regex("^(a3-ultragpu|a4-highgpu|a4x-highgpu)-", var.machine_type)) || var.boot_disk_type == "hyperdisk-balanced"
    error_message = "A3 Ultra and A4 machine types take Hyperdisk only: boot_disk_type must be hyperdisk-balanced (or null)."
  }
}

variable "network" {
  description = "Network of the primary (gVNIC) interface."
  type        = string
  default     = "default"

  validation {
    condition     = length(var.network) > 0
    error_message = "network must not be empty."
  }
}

variable "subnetwork" {
  description = "Subnetwork of the primary interface, or null for an auto-mode network."
  type        = string
  default     = null
}

variable "gpudirect_networks" {
  description = "Extra gVNIC interfaces for GPUDirect, in NIC order: exactly 4 for tcpx (a3-highgpu-8g), 8 for tcpxo (a3-megagpu-8g), 0 or 1 (the second host NIC) for infiniband, none without a fabric."
  type = list(object({
    network    = string
    subnetwork = string
  }))
  default = []

  validation {
    condition = (
      var.fabric == "tcpx" ? length(var.gpudirect_networks) == 4 :
      var.fabric == "tcpxo" ? length(var.gpudirect_networks) == 8 :
      var.fabric == "infiniband" ? length(var.gpudirect_networks) <= 1 :
      length(var.gpudirect_networks) == 0
    )
    error_message = "gpudirect_networks must hold 4 networks for tcpx, 8 for tcpxo, at most 1 for infiniband and none without a fabric."
  }
}

variable "rdma_networks" {
  description = "MRDMA interfaces for fabric infiniband (A3 Ultra / A4 GPUDirect-RDMA), one per GPU: exactly 8, on a network with an RDMA network profile; empty otherwise."
  type = list(object({
    network    = string
    subnetwork = string
  }))
  default = []

  validation {
    condition     = var.fabric == "infiniband" ? length(var.rdma_networks) == 8 : length(var.rdma_networks) == 0
    error_message = "rdma_networks must hold exactly 8 networks for fabric infiniband and none otherwise."
  }
}
