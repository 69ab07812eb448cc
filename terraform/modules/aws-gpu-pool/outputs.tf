output "placement_group_id" {
  description = "Id (pg-...) of the gang's cluster placement group; null when the pool is not a gang."
  value       = try(aws_placement_group.this[0].placement_group_id, null)
}

output "placement_group_name" {
  description = "Name of the gang's cluster placement group; null when the pool is not a gang."
  value       = try(aws_placement_group.this[0].name, null)
}

output "launch_template_id" {
  description = "Id of the launch template the group launches from."
  value       = aws_launch_template.this.id
}

output "autoscaling_group_name" {
  description = "Name of the Auto Scaling group holding every node of the pool."
  value       = aws_autoscaling_group.this.name
}

output "autoscaling_group_arn" {
  description = "ARN of the Auto Scaling group."
  value       = aws_autoscaling_group.this.arn
}

output "group_ids" {
  description = "Group holding each kind of node: on_demand and spot name the same Auto Scaling group on AWS (one group with a mixed-instances policy), null for a kind the pool has none of."
  value = {
    on_demand = var.on_demand_nodes > 0 ? aws_autoscaling_group.this.id : null
    spot      = var.spot_nodes > 0 ? aws_autoscaling_group.this.id : null
  }
}

output "capacity_reservation_id" {
  description = "Id of the targeted capacity reservation; null when nothing is reserved."
  value       = try(aws_ec2_capacity_reservation.this[0].id, null)
}

output "capacity_reservation_availability_zone" {
  description = "Availability zone of the capacity reservation; null when nothing is reserved."
  value       = try(aws_ec2_capacity_reservation.this[0].availability_zone, null)
}

output "efa_interfaces" {
  description = "Number of EFA network interfaces in the launch template (one per network card), 0 without EFA."
  value       = local.network_cards
}

output "node_counts" {
  description = "Nodes of the pool by kind: on_demand, spot, reserved and total (on_demand + spot)."
  value = {
    on_demand = var.on_demand_nodes
    spot      = var.spot_nodes
    reserved  = var.reserved_nodes
    total     = local.size
  }
}
