# Everything the resources in main.tf are derived from. This file refers to variables only (no
# resources), so the tests can evaluate it with the terraform binary and no google provider.

locals {
  gang       = var.run != null
  gang_nodes = local.gang ? var.on_demand_nodes + var.spot_nodes : 0
  gang_spot  = local.gang && var.spot_nodes > 0

  # A3 Ultra and A4 take Hyperdisk only (Compute Engine, "Accelerator-optimized machine family", supported
  # disk types); every other machine type here boots from pd-balanced unless the caller says otherwise.
  hyperdisk_only = can(regex("^(a3-ultragpu|a4-highgpu|a4x-highgpu)-", var.machine_type))
  boot_disk_type = coalesce(var.boot_disk_type, local.hyperdisk_only ? "hyperdisk-balanced" : "pd-balanced")

  # A compact placement policy only means something for two or more VMs.
  placement = local.gang && local.gang_nodes >= 2

  reservation      = var.reserved_nodes > 0
  reservation_name = coalesce(var.reservation_name, "${var.name}-rsv")
  # the compact placement policy's name, as gpuplan provision gives it when the root passes it
  placement_name  = coalesce(var.placement_group_name, "${var.name}-placement")
  reserved_in_use = min(var.on_demand_nodes, var.reserved_nodes)

  # Pools that are not gangs: one managed instance group per kind that has nodes. An instance
  # template has one provisioning model and one reservation affinity, hence three kinds.
  group_sizes = local.gang ? {} : {
    reserved = local.reserved_in_use
    ondemand = var.on_demand_nodes - local.reserved_in_use
    spot     = var.spot_nodes
  }
  groups = {
    for kind, size in local.group_sizes : kind => {
      size       = size
      scheduling = kind == "spot" ? "spot" : "standard"
      reserved   = kind == "reserved"
    } if size > 0
  }

  # Gangs: fixed instances in the placement policy, all of one kind; on-demand ones consume the
  # reservation while it has room.
  gang_instances = [
    for i in range(local.gang_nodes) : {
      name       = format("%s-%02d", var.name, i)
      scheduling = local.gang_spot ? "spot" : "standard"
      reserved   = !local.gang_spot && i < var.reserved_nodes
    }
  ]

  scheduling = {
    spot = {
      provisioning_model          = "SPOT"
      preemptible                 = true
      automatic_restart           = false
      on_host_maintenance         = "TERMINATE"
      instance_termination_action = "DELETE"
    }
    standard = {
      provisioning_model          = "STANDARD"
      preemptible                 = false
      automatic_restart           = true
      on_host_maintenance         = "TERMINATE"
      instance_termination_action = null
    }
  }

  # NICs after the primary gVNIC: the GPUDirect-TCPX(O) gVNICs, or the second host gVNIC and the
  # eight MRDMA NICs of GPUDirect-RDMA. The variable validations keep both lists empty without a fabric.
  extra_nics = concat(
    [for n in var.gpudirect_networks : { network = n.network, subnetwork = n.subnetwork, nic_type = "GVNIC" }],
    [for n in var.rdma_networks : { network = n.network, subnetwork = n.subnetwork, nic_type = "MRDMA" }],
  )

  # GCP label values: lower case, [a-z0-9_-], at most 63 characters. gpuplan-run only on a gang.
  gpuplan_values = {
    "gpuplan-plan"       = var.plan_id
    "gpuplan-pool"       = var.pool
    "gpuplan-run"        = var.run
    "gpuplan-managed-by" = "terraform"
  }
  gpuplan_labels = {
    for key, value in local.gpuplan_values : key => substr(replace(lower(value), "/[^a-z0-9_-]/", "-"), 0, 63)
    if value != null
  }
  labels = merge(var.labels, local.gpuplan_labels)

  description = "gpuplan plan ${var.plan_id}, pool ${var.pool}"
}
