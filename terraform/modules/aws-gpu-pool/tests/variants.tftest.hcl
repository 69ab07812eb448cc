# `terraform test` (>= 1.7) of the pool variants against a mock AWS provider: nothing leaves the machine.
# tests/integration/test_terraform_aws_module.py runs it on a copy of the module.

# Ids in the shapes the provider's own checks expect (random mock strings fail them).
mock_provider "aws" {
  mock_resource "aws_launch_template" {
    defaults = {
      id             = "lt-0123456789abcdef0"
      latest_version = 1
    }
  }

  mock_resource "aws_ec2_capacity_reservation" {
    defaults = {
      id = "cr-0123456789abcdef0"
    }
  }

  mock_resource "aws_placement_group" {
    defaults = {
      arn = "arn:aws:ec2:us-east-1:123456789012:placement-group/gang-pg"
    }
  }
}

override_data {
  target = data.aws_ec2_instance_type.this
  values = {
    maximum_network_cards = 4
    efa_supported         = true
  }
}

override_data {
  target = data.aws_subnet.first
  values = {
    availability_zone = "us-east-1a"
  }
}

variables {
  plan_id       = "plan-1"
  pool          = "pool-a"
  instance_type = "p4d.24xlarge"
  image_id      = "ami-0a1b2c3d4e5f60718"
  subnet_ids    = ["subnet-0a0a0a0a", "subnet-0b0b0b0b"]
}

run "mixed_pool_is_one_asg_with_on_demand_base_and_spot_above" {
  command = apply

  variables {
    name            = "mixed"
    on_demand_nodes = 2
    spot_nodes      = 3
  }

  assert {
    condition     = aws_autoscaling_group.this.min_size == 5 && aws_autoscaling_group.this.max_size == 5 && aws_autoscaling_group.this.desired_capacity == 5
    error_message = "A mixed pool of 2 + 3 nodes should be a fixed group of 5."
  }

  assert {
    condition     = length(aws_autoscaling_group.this.launch_template) == 0 && length(aws_autoscaling_group.this.mixed_instances_policy) == 1
    error_message = "A pool with spot nodes should use a mixed-instances policy, not the plain launch template."
  }

  assert {
    condition = (
      aws_autoscaling_group.this.mixed_instances_policy[0].instances_distribution[0].on_demand_base_capacity == 2
      && aws_autoscaling_group.this.mixed_instances_policy[0].instances_distribution[0].on_demand_percentage_above_base_capacity == 0
      && aws_autoscaling_group.this.mixed_instances_policy[0].instances_distribution[0].spot_allocation_strategy == "price-capacity-optimized"
    )
    error_message = "The distribution should be an on-demand base of 2, spot above it, price-capacity-optimized."
  }

  assert {
    condition     = length(aws_placement_group.this) == 0 && length(aws_ec2_capacity_reservation.this) == 0 && aws_autoscaling_group.this.placement_group == null
    error_message = "A pool without a run or a reservation should have no placement group and no reservation."
  }

  assert {
    condition     = toset(aws_autoscaling_group.this.vpc_zone_identifier) == toset(var.subnet_ids)
    error_message = "A pool that is no gang and holds no reservation should spread over every subnet."
  }

  assert {
    condition     = length(aws_launch_template.this.network_interfaces) == 0
    error_message = "Without a fabric the launch template should have no explicit network interfaces."
  }

  assert {
    condition     = output.group_ids.on_demand == output.group_ids.spot && output.node_counts.total == 5
    error_message = "Both kinds should be in the one group, and the counts should add up."
  }
}

run "efa_gang_with_reservation" {
  command = apply

  variables {
    name            = "gang"
    run             = "run-7"
    fabric          = "efa"
    on_demand_nodes = 2
    reserved_nodes  = 2
    reservation_end = "2027-01-05T18:00:00Z"
  }

  assert {
    condition     = aws_ec2_capacity_reservation.this[0].end_date_type == "limited" && aws_ec2_capacity_reservation.this[0].end_date == "2027-01-05T18:00:00Z"
    error_message = "A reservation with reservation_end should be limited, ending then."
  }

  assert {
    condition     = aws_placement_group.this[0].strategy == "cluster" && aws_autoscaling_group.this.placement_group == "gang-pg"
    error_message = "A gang should launch into its own cluster placement group."
  }

  assert {
    condition     = aws_launch_template.this.placement[0].group_name == "gang-pg"
    error_message = "The launch template should name the placement group."
  }

  assert {
    condition     = length(aws_launch_template.this.network_interfaces) == 4
    error_message = "p4d.24xlarge (4 network cards in the mock) should get 4 EFA interfaces."
  }

  assert {
    condition = alltrue([
      for i, nic in aws_launch_template.this.network_interfaces :
      nic.interface_type == (i == 0 ? "efa" : "efa-only") && nic.network_card_index == i && nic.device_index == (i == 0 ? 0 : 1)
    ])
    error_message = "Card 0 should carry the efa primary at device index 0, every other card an efa-only interface at device index 1."
  }

  assert {
    condition     = aws_launch_template.this.vpc_security_group_ids == null
    error_message = "With explicit interfaces the security groups belong on the interfaces."
  }

  assert {
    condition = (
      aws_ec2_capacity_reservation.this[0].instance_count == 2
      && aws_ec2_capacity_reservation.this[0].instance_match_criteria == "targeted"
      && aws_ec2_capacity_reservation.this[0].availability_zone == "us-east-1a"
      && aws_ec2_capacity_reservation.this[0].placement_group_arn == aws_placement_group.this[0].arn
    )
    error_message = "The gang's reservation should be targeted, sized 2, in the first subnet's zone and its placement group."
  }

  assert {
    condition     = aws_launch_template.this.capacity_reservation_specification[0].capacity_reservation_target[0].capacity_reservation_id == aws_ec2_capacity_reservation.this[0].id
    error_message = "The launch template should target the reservation."
  }

  assert {
    condition     = aws_autoscaling_group.this.vpc_zone_identifier == toset(["subnet-0a0a0a0a"])
    error_message = "A gang should use only the first subnet."
  }

  assert {
    condition     = length(aws_autoscaling_group.this.mixed_instances_policy) == 0 && length(aws_autoscaling_group.this.launch_template) == 1
    error_message = "An all on-demand gang should use the plain launch template."
  }

  assert {
    condition     = aws_placement_group.this[0].tags["gpuplan-run"] == "run-7" && aws_ec2_capacity_reservation.this[0].tags["gpuplan-plan"] == "plan-1"
    error_message = "The gang's resources should carry the run and plan tags."
  }

  assert {
    condition     = output.capacity_reservation_id == aws_ec2_capacity_reservation.this[0].id && output.placement_group_name == "gang-pg" && output.efa_interfaces == 4
    error_message = "The outputs should name the reservation, the placement group and the interface count."
  }
}

run "on_demand_pool_uses_the_plain_launch_template" {
  command = apply

  variables {
    name            = "od"
    on_demand_nodes = 3
    tags            = { team = "ml", "gpuplan-pool" = "overridden" }
  }

  assert {
    condition     = length(aws_autoscaling_group.this.mixed_instances_policy) == 0 && aws_autoscaling_group.this.launch_template[0].id == aws_launch_template.this.id
    error_message = "An on-demand pool should use the launch template directly."
  }

  assert {
    condition     = aws_autoscaling_group.this.desired_capacity == 3 && !aws_autoscaling_group.this.capacity_rebalance
    error_message = "Three on-demand nodes, no spot rebalancing."
  }

  assert {
    condition     = aws_launch_template.this.tags["gpuplan-pool"] == "pool-a" && aws_launch_template.this.tags["team"] == "ml"
    error_message = "Extra tags should be kept, and the gpuplan tags should win over them."
  }

  assert {
    condition     = output.group_ids.spot == null && output.placement_group_id == null && output.capacity_reservation_id == null
    error_message = "No spot group, placement group or reservation for a plain on-demand pool."
  }
}

run "reservation_without_an_end_is_unlimited" {
  command = apply

  variables {
    name            = "held"
    on_demand_nodes = 2
    reserved_nodes  = 2
  }

  assert {
    condition     = aws_ec2_capacity_reservation.this[0].end_date_type == "unlimited" && aws_ec2_capacity_reservation.this[0].end_date == null
    error_message = "Without reservation_end the reservation should be unlimited, with no end date."
  }
}

run "gang_with_both_kinds_is_rejected" {
  command = plan

  variables {
    name            = "bad"
    run             = "run-7"
    on_demand_nodes = 1
    spot_nodes      = 1
  }

  expect_failures = [var.spot_nodes]
}

run "efa_on_a_type_without_efa_is_rejected" {
  command = plan

  override_data {
    target = data.aws_ec2_instance_type.this
    values = {
      maximum_network_cards = 1
      efa_supported         = false
    }
  }

  variables {
    name            = "noefa"
    fabric          = "efa"
    instance_type   = "g5.xlarge"
    on_demand_nodes = 1
  }

  expect_failures = [aws_launch_template.this]
}
