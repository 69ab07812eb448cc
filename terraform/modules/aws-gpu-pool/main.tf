locals {
  gang     = var.run != null
  efa      = var.fabric == "efa"
  reserved = var.reserved_nodes > 0
  has_spot = var.spot_nodes > 0
  size     = var.on_demand_nodes + var.spot_nodes

  # The gpuplan tags win over the caller's: a pool must always be findable by plan and pool.
  tags = merge(
    var.tags,
    {
      "gpuplan-plan"       = var.plan_id
      "gpuplan-pool"       = var.pool
      "gpuplan-managed-by" = "terraform"
    },
    local.gang ? { "gpuplan-run" = var.run } : {},
  )

  # A cluster placement group and a capacity reservation live in one availability zone, so a gang and a
  # reserved pool launch in the first subnet only; other pools may spread over all of them.
  subnet_ids = local.gang || local.reserved ? [var.subnet_ids[0]] : var.subnet_ids

  # names as gpuplan provision gives them, when the root passes them
  placement_group_name = coalesce(var.placement_group_name, "${var.name}-pg")
  reservation_name     = coalesce(var.reservation_name, "${var.name}-cr")

  # EFA: one interface per network card (p5.48xlarge has 32, p4d.24xlarge 4), as AWS advises for
  # instances with several cards (EC2 User Guide, "Maximize network bandwidth on Amazon EC2 instances with
  # multiple network cards", efa-acc-inst-types.html): card 0 carries the primary interface at device
  # index 0, of type "efa" (EFA with ENA: the node's one private IP); every other card an "efa-only"
  # interface at device index 1, which takes no IP address, so a node takes one address of its subnet.
  network_cards = local.efa ? data.aws_ec2_instance_type.this[0].maximum_network_cards : 0
}

################################################################################
# Look-ups
################################################################################

data "aws_ec2_instance_type" "this" {
  count = local.efa ? 1 : 0

  instance_type = var.instance_type
}

data "aws_subnet" "first" {
  count = local.reserved ? 1 : 0

  id = var.subnet_ids[0]
}

################################################################################
# Placement group (gangs)
################################################################################

resource "aws_placement_group" "this" {
  count = local.gang ? 1 : 0

  name     = local.placement_group_name
  strategy = "cluster"
  tags     = merge(local.tags, { "Name" = local.placement_group_name })
}

################################################################################
# Capacity reservation
#
# With reservation_end it is a limited reservation: EC2 cancels it by itself within an hour of that time
# (EC2 API Reference, CreateCapacityReservation, EndDate and EndDateType), so a root applied and never
# destroyed stops paying for it then; without, it lasts until it is cancelled.
################################################################################

resource "aws_ec2_capacity_reservation" "this" {
  count = local.reserved ? 1 : 0

  instance_type           = var.instance_type
  instance_platform       = var.instance_platform
  instance_count          = var.reserved_nodes
  availability_zone       = data.aws_subnet.first[0].availability_zone
  instance_match_criteria = "targeted"
  end_date_type           = var.reservation_end == null ? "unlimited" : "limited"
  end_date                = var.reservation_end
  placement_group_arn     = local.gang ? aws_placement_group.this[0].arn : null
  tags                    = merge(local.tags, { "Name" = local.reservation_name })
}

################################################################################
# Launch template
#
# With explicit (EFA) network interfaces the security groups go on the interfaces, not on the template.
# (Comments stay outside resource bodies: python-hcl2 reports comments inside them as a body key.)
################################################################################

resource "aws_launch_template" "this" {
  name                   = "${var.name}-lt"
  description            = "gpuplan pool ${var.pool} of plan ${var.plan_id}"
  image_id               = var.image_id
  instance_type          = var.instance_type
  key_name               = var.key_name
  user_data              = var.user_data_base64
  update_default_version = true

  vpc_security_group_ids = local.efa ? null : var.security_group_ids

  dynamic "iam_instance_profile" {
    for_each = var.iam_instance_profile_name == null ? [] : [var.iam_instance_profile_name]

    content {
      name = iam_instance_profile.value
    }
  }

  dynamic "network_interfaces" {
    for_each = range(local.network_cards)

    content {
      network_card_index    = network_interfaces.value
      device_index          = network_interfaces.value == 0 ? 0 : 1
      interface_type        = network_interfaces.value == 0 ? "efa" : "efa-only"
      security_groups       = var.security_group_ids
      delete_on_termination = true
    }
  }

  dynamic "placement" {
    for_each = local.gang ? [aws_placement_group.this[0].name] : []

    content {
      group_name = placement.value
    }
  }

  dynamic "capacity_reservation_specification" {
    for_each = local.reserved ? [aws_ec2_capacity_reservation.this[0].id] : []

    content {
      capacity_reservation_target {
        capacity_reservation_id = capacity_reservation_specification.value
      }
    }
  }

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 2
  }

  dynamic "tag_specifications" {
    for_each = toset(["instance", "volume", "network-interface"])

    content {
      resource_type = tag_specifications.value
      tags          = merge(local.tags, { "Name" = var.name })
    }
  }

  tags = merge(local.tags, { "Name" = "${var.name}-lt" })

  lifecycle {
    precondition {
      condition     = !local.efa || try(data.aws_ec2_instance_type.this[0].efa_supported, false)
      error_message = "fabric = \"efa\" needs an instance type that supports EFA."
    }
  }
}

################################################################################
# Auto Scaling group: fixed size (min = max = desired)
#
# Without spot nodes it launches from the plain launch template; with spot nodes through a
# mixed-instances policy whose on-demand base is the on-demand nodes and everything above it spot.
# capacity_rebalance replaces spot nodes at risk of interruption ahead of time, but not in a gang: a
# replacement node outside the gang's placement and timing restarts the whole run anyway.
################################################################################

resource "aws_autoscaling_group" "this" {
  name                      = "${var.name}-asg"
  min_size                  = local.size
  max_size                  = local.size
  desired_capacity          = local.size
  vpc_zone_identifier       = local.subnet_ids
  placement_group           = local.gang ? aws_placement_group.this[0].name : null
  wait_for_capacity_timeout = var.wait_for_capacity_timeout

  capacity_rebalance = local.has_spot && !local.gang

  dynamic "launch_template" {
    for_each = local.has_spot ? [] : [aws_launch_template.this.id]

    content {
      id      = launch_template.value
      version = aws_launch_template.this.latest_version
    }
  }

  dynamic "mixed_instances_policy" {
    for_each = local.has_spot ? [aws_launch_template.this.id] : []

    content {
      instances_distribution {
        on_demand_base_capacity                  = var.on_demand_nodes
        on_demand_percentage_above_base_capacity = 0
        spot_allocation_strategy                 = "price-capacity-optimized"
      }

      launch_template {
        launch_template_specification {
          launch_template_id = mixed_instances_policy.value
          version            = aws_launch_template.this.latest_version
        }

        override {
          instance_type = var.instance_type
        }
      }
    }
  }

  dynamic "tag" {
    for_each = merge(local.tags, { "Name" = var.name })

    content {
      key                 = tag.key
      value               = tag.value
      propagate_at_launch = true
    }
  }
}
