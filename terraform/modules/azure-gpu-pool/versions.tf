terraform {
  # 1.9: a variable's validation may refer to other variables (the gang and reservation rules need it).
  required_version = ">= 1.9"

  required_providers {
    azurerm = {
      source = "hashicorp/azurerm"
      # 5.0.0 is the first release whose schema has every attribute the module sets. The latest to arrive:
      # azurerm_linux_virtual_machine_scale_set network_interface.accelerated_networking_enabled, which 4.x
      # still called enable_accelerated_networking (renamed in 5.0.0, PR #32779; 5.0 upgrade guide).
      # Earlier ones: capacity reservations 3.10.0 (#16464), the scale set's capacity_reservation_group_id
      # 3.14.0 (#17530), the proximity placement group's allowed_vm_sizes and zone 3.38.0 (#19675).
      # Below 6.0: a major release removes attributes (CHANGELOG-v4.md, CHANGELOG.md of
      # hashicorp/terraform-provider-azurerm).
      version = ">= 5.0, < 6.0"
    }
  }
}
