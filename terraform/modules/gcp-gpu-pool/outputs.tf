output "placement_policy_id" {
  description = "Id of the COLLOCATED group placement policy, or null when the pool is not a gang of two or more."
  value       = local.placement ? google_compute_resource_policy.placement[0].id : null
}

output "placement_policy_name" {
  description = "Name of the placement policy, or null when there is none."
  value       = local.placement ? google_compute_resource_policy.placement[0].name : null
}

output "reservation_id" {
  description = "Id of the specific reservation, or null when reserved_nodes is 0."
  value       = local.reservation ? google_compute_reservation.this[0].id : null
}

output "reservation_name" {
  description = "Name of the reservation (what SPECIFIC_RESERVATION affinity targets), or null when there is none."
  value       = local.reservation ? google_compute_reservation.this[0].name : null
}

output "instance_template_ids" {
  description = "Instance template id per kind (reserved, ondemand, spot) present; empty for a gang."
  value       = { for kind, template in google_compute_instance_template.this : kind => template.id }
}

output "instance_group_manager_ids" {
  description = "Zonal managed instance group id per kind (reserved, ondemand, spot) present; empty for a gang."
  value       = { for kind, mig in google_compute_instance_group_manager.this : kind => mig.id }
}

output "instance_groups" {
  description = "URL of the instance group behind each managed instance group, per kind."
  value       = { for kind, mig in google_compute_instance_group_manager.this : kind => mig.instance_group }
}

output "instance_ids" {
  description = "Ids of a gang's instances, in order; empty when the pool is not a gang."
  value       = google_compute_instance.gang[*].id
}

output "instance_self_links" {
  description = "Self links of a gang's instances, in order; empty when the pool is not a gang."
  value       = google_compute_instance.gang[*].self_link
}

output "node_counts" {
  description = "Nodes this module launches: on_demand, spot, reserved (the reservation's size), in_reservation (on-demand nodes consuming it) and total."
  value = {
    on_demand      = var.on_demand_nodes
    spot           = var.spot_nodes
    reserved       = var.reserved_nodes
    in_reservation = local.reserved_in_use
    total          = var.on_demand_nodes + var.spot_nodes
  }
}

output "group_sizes" {
  description = "Target size per managed instance group kind; empty for a gang."
  value       = { for kind, group in local.groups : kind => group.size }
}

output "labels" {
  description = "Labels put on every labelled resource (the extra labels merged under the gpuplan ones)."
  value       = local.labels
}
