terraform {
  # 1.9: a variable's validation may refer to other variables (the gang and reservation rules need it).
  required_version = ">= 1.9"

  required_providers {
    azurerm = {
      source  = "hashicorp/azurerm"
      version = ">= 4.0, < 5.0"
    }
  }
}
