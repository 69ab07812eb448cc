output "proximity_placement_group_id" {
  description = "ID of the gang's proximity placement group; null for a pool that is not a gang."
  value       = local.gang ? azurerm_proximity_placement_group.this[0].id : null
}

output "proximity_placement_group_name" {
  description = "Name of the gang's proximity placement group; null for a pool that is not a gang."
  value       = local.gang ? azurerm_proximity_placement_group.this[0].name : null
}

output "scale_set_ids" {
  description = "ID of each scale set, by kind (\"on-demand\", \"spot\"); a kind with no nodes has no entry."
  value       = { for kind, vmss in azurerm_linux_virtual_machine_scale_set.this : kind => vmss.id }
}

output "on_demand_scale_set_id" {
  description = "ID of the on-demand scale set; null when the pool has no on-demand nodes."
  value       = try(azurerm_linux_virtual_machine_scale_set.this["on-demand"].id, null)
}

output "spot_scale_set_id" {
  description = "ID of the spot scale set; null when the pool has no spot nodes."
  value       = try(azurerm_linux_virtual_machine_scale_set.this["spot"].id, null)
}

output "capacity_reservation_group_id" {
  description = "ID of the capacity reservation group the on-demand nodes launch into; null when nothing is reserved."
  value       = local.reserved ? azurerm_capacity_reservation_group.this[0].id : null
}

output "capacity_reservation_id" {
  description = "ID of the capacity reservation; null when nothing is reserved."
  value       = local.reserved ? azurerm_capacity_reservation.this[0].id : null
}

output "node_counts" {
  description = "Nodes this instance asks for: on_demand, spot, reserved and total (on_demand + spot)."
  value = {
    on_demand = var.on_demand_nodes
    spot      = var.spot_nodes
    reserved  = var.reserved_nodes
    total     = var.on_demand_nodes + var.spot_nodes
  }
}

output "tags" {
  description = "The tags set on every resource (var.tags merged under the gpuplan ones)."
  value       = local.tags
}
