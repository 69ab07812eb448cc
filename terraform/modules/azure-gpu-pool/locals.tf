# Every decision of the module, from the variables only (tests evaluate this file on its own).
locals {
  gang     = var.run != null
  reserved = var.reserved_nodes > 0
  # A gang and a reservation live in one zone: the first of var.zones (none when var.zones is empty).
  first_zone = length(var.zones) > 0 ? var.zones[0] : null
  one_zone   = local.first_zone == null ? [] : [local.first_zone]

  tags = merge(
    var.tags,
    { "gpuplan-plan" = var.plan_id, "gpuplan-pool" = var.pool, "gpuplan-managed-by" = "terraform" },
    local.gang ? { "gpuplan-run" = var.run } : {},
  )

  # One scale set per kind present: a scale set has a single priority.
  kinds = {
    "on-demand" = {
      instances       = var.on_demand_nodes
      priority        = "Regular"
      eviction_policy = null
      max_bid_price   = null
      reservation     = local.reserved
    }
    "spot" = {
      instances       = var.spot_nodes
      priority        = "Spot"
      eviction_policy = "Delete"
      max_bid_price   = -1 # pay up to the on-demand price: never evicted for price
      reservation     = false
    }
  }

  scale_sets = {
    for kind, spec in local.kinds : kind => merge(spec, {
      name            = "${var.name}-${kind}"
      placement_group = local.gang
      # Gangs and InfiniBand pools need one placement group (a gang's proximity group, the IB network);
      # a scale set launching into a capacity reservation must not be one (azurerm docs).
      single_placement_group = local.gang || var.fabric != null
      zones                  = local.gang || spec.reservation ? local.one_zone : var.zones
    }) if spec.instances > 0
  }
}
