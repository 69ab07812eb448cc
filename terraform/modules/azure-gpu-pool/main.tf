# A gang's VMs share one proximity placement group, limited to the pool's size.
resource "azurerm_proximity_placement_group" "this" {
  count = local.gang ? 1 : 0

  name                = coalesce(var.placement_group_name, "${var.name}-ppg")
  resource_group_name = var.resource_group_name
  location            = var.location
  allowed_vm_sizes    = [var.vm_size]
  zone                = local.first_zone
  tags                = local.tags
}

# Reserved capacity: a group holding one reservation of reserved_nodes VMs of vm_size.
resource "azurerm_capacity_reservation_group" "this" {
  count = local.reserved ? 1 : 0

  name                = "${var.name}-crg"
  resource_group_name = var.resource_group_name
  location            = var.location
  zones               = local.first_zone == null ? null : local.one_zone
  tags                = local.tags
}

resource "azurerm_capacity_reservation" "this" {
  count = local.reserved ? 1 : 0

  name                          = coalesce(var.reservation_name, "${var.name}-reservation")
  capacity_reservation_group_id = azurerm_capacity_reservation_group.this[0].id
  zone                          = local.first_zone
  tags                          = local.tags

  sku {
    name     = var.vm_size
    capacity = var.reserved_nodes
  }
}

# One Uniform scale set per kind present (on-demand, spot). Fixed size: instances is the plan's count,
# upgrades are manual and nothing is overprovisioned, so the VMs Azure lists are the VMs asked for.
# depends_on: the reservation must hold its capacity before VMs launch into its group, and outlive them.
resource "azurerm_linux_virtual_machine_scale_set" "this" {
  for_each = local.scale_sets

  name                = each.value.name
  resource_group_name = var.resource_group_name
  location            = var.location
  sku                 = var.vm_size
  instances           = each.value.instances
  zones               = each.value.zones

  priority        = each.value.priority
  eviction_policy = each.value.eviction_policy
  max_bid_price   = each.value.max_bid_price

  proximity_placement_group_id  = each.value.placement_group ? azurerm_proximity_placement_group.this[0].id : null
  capacity_reservation_group_id = each.value.reservation ? azurerm_capacity_reservation_group.this[0].id : null
  single_placement_group        = each.value.single_placement_group

  upgrade_mode  = "Manual"
  overprovision = false

  admin_username                  = var.admin_username
  disable_password_authentication = true

  admin_ssh_key {
    username   = var.admin_username
    public_key = var.ssh_public_key
  }

  source_image_reference {
    publisher = var.source_image.publisher
    offer     = var.source_image.offer
    sku       = var.source_image.sku
    version   = var.source_image.version
  }

  os_disk {
    caching              = "ReadWrite"
    storage_account_type = var.os_disk_storage_account_type
    disk_size_gb         = var.os_disk_size_gb
  }

  network_interface {
    name                           = "${each.value.name}-nic"
    primary                        = true
    accelerated_networking_enabled = var.accelerated_networking

    ip_configuration {
      name      = "internal"
      primary   = true
      subnet_id = var.subnet_id
    }
  }

  tags = local.tags

  depends_on = [azurerm_capacity_reservation.this]
}
