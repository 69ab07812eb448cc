# Common interface (the same names on the aws-, gcp- and azure-gpu-pool modules).

variable "name" {
  description = "Prefix of every resource name (the scale sets add -on-demand / -spot)."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,40}$", var.name))
    error_message = "name must start with a lower-case letter and hold at most 41 of [a-z0-9-]."
  }
}

variable "plan_id" {
  description = "The gpuplan plan id: the value of the gpuplan-plan tag on every resource."
  type        = string

  validation {
    condition     = length(var.plan_id) > 0 && length(var.plan_id) <= 256
    error_message = "plan_id must be 1 to 256 characters (an Azure tag value)."
  }
}

variable "pool" {
  description = "The gpuplan pool name: the value of the gpuplan-pool tag on every resource."
  type        = string

  validation {
    condition     = length(var.pool) > 0 && length(var.pool) <= 256
    error_message = "pool must be 1 to 256 characters (an Azure tag value)."
  }
}

variable "run" {
  description = "The training run this pool is the gang of (tag gpuplan-run). A gang gets a proximity placement group and one fixed-size scale set in it; null for an ordinary pool."
  type        = string
  default     = null

  validation {
    condition     = var.run == null ? true : length(var.run) > 0 && length(var.run) <= 256
    error_message = "run must be null or 1 to 256 characters (an Azure tag value)."
  }
}

variable "on_demand_nodes" {
  description = "Number of on-demand (priority Regular) VMs: a whole number, 0 or more."
  type        = number
  default     = 0

  validation {
    condition     = var.on_demand_nodes >= 0 && floor(var.on_demand_nodes) == var.on_demand_nodes
    error_message = "on_demand_nodes must be a whole number >= 0."
  }
}

variable "spot_nodes" {
  description = "Number of spot VMs (priority Spot, evicted by deletion, never for price): a whole number, 0 or more."
  type        = number
  default     = 0

  validation {
    condition     = var.spot_nodes >= 0 && floor(var.spot_nodes) == var.spot_nodes
    error_message = "spot_nodes must be a whole number >= 0."
  }

  validation {
    condition     = var.run == null ? true : var.on_demand_nodes == 0 || var.spot_nodes == 0
    error_message = "A gang (run set) is all spot or all on-demand: on_demand_nodes and spot_nodes cannot both be > 0."
  }

  validation {
    # A gang (and an InfiniBand pool) is one scale set in a single placement group, which Azure caps at 100 VMs.
    condition     = (var.run != null || var.fabric != null) ? var.on_demand_nodes <= 100 && var.spot_nodes <= 100 : true
    error_message = "A gang or an InfiniBand pool is a single placement group: at most 100 nodes per kind."
  }
}

variable "fabric" {
  description = "Node-to-node fabric: null, or \"infiniband\" for the RDMA ND sizes (the scale set is then one placement group, so its VMs share the InfiniBand network)."
  type        = string
  default     = null

  validation {
    condition     = var.fabric == null ? true : var.fabric == "infiniband"
    error_message = "fabric must be null or \"infiniband\" on Azure (efa is AWS, tcpx/tcpxo are GCP)."
  }

  validation {
    condition     = var.fabric == null ? true : can(regex("^Standard_ND.*r", var.vm_size))
    error_message = "fabric \"infiniband\" needs an RDMA ND size (Standard_ND...r..., e.g. Standard_ND96isr_H100_v5)."
  }
}

variable "reserved_nodes" {
  description = "When > 0, a capacity reservation group holding a reservation of this many VMs of vm_size; the on-demand scale set launches into it."
  type        = number
  default     = 0

  validation {
    condition     = var.reserved_nodes >= 0 && floor(var.reserved_nodes) == var.reserved_nodes
    error_message = "reserved_nodes must be a whole number >= 0."
  }

  validation {
    # azurerm: capacity_reservation_group_id cannot be combined with proximity_placement_group_id, and needs
    # single_placement_group = false, which a gang and an InfiniBand pool both need to be true.
    condition     = var.reserved_nodes == 0 ? true : var.run == null && var.fabric == null
    error_message = "On Azure a capacity reservation cannot serve a gang (proximity placement group) or an InfiniBand pool (single placement group): set reserved_nodes = 0 there."
  }
}

variable "placement_group_name" {
  description = "Name of a gang's proximity placement group (null: <name>-ppg). gpuplan's roots pass the name gpuplan provision gives it, so a fleet applied by Terraform and one reconciled by provision agree."
  type        = string
  default     = null

  validation {
    condition     = var.placement_group_name == null || can(regex("^[a-zA-Z0-9][a-zA-Z0-9._-]{0,79}$", var.placement_group_name))
    error_message = "placement_group_name must be 1-80 letters, digits, '.', '_' or '-', starting with a letter or digit."
  }
}

variable "reservation_name" {
  description = "Name of the capacity reservation (null: <name>-reservation). gpuplan's roots pass the name gpuplan provision gives a gang's reservation."
  type        = string
  default     = null

  validation {
    condition     = var.reservation_name == null || can(regex("^[a-zA-Z0-9][a-zA-Z0-9._-]{0,79}$", var.reservation_name))
    error_message = "reservation_name must be 1-80 letters, digits, '.', '_' or '-', starting with a letter or digit."
  }
}

variable "tags" {
  description = "Extra tags for every resource; the gpuplan-plan, gpuplan-pool, gpuplan-run and gpuplan-managed-by tags win over keys of the same name."
  type        = map(string)
  default     = {}

  validation {
    condition     = length(var.tags) <= 46
    error_message = "Azure allows 50 tags per resource and the module sets up to 4: at most 46 extra tags."
  }
}

# Azure.

variable "resource_group_name" {
  description = "The existing resource group every resource is created in."
  type        = string

  validation {
    condition     = can(regex("^[-\\w.()]{1,90}$", var.resource_group_name)) && !endswith(var.resource_group_name, ".")
    error_message = "resource_group_name must be 1 to 90 of letters, digits, - _ . ( ), not ending in a dot."
  }
}

variable "location" {
  description = "Azure region, e.g. \"eastus\"."
  type        = string

  validation {
    condition     = length(trimspace(var.location)) > 0
    error_message = "location must not be empty."
  }
}

variable "vm_size" {
  description = "The VM size (scale set SKU), e.g. \"Standard_ND96isr_H100_v5\"."
  type        = string

  validation {
    condition     = can(regex("^Standard_[A-Za-z0-9_-]+$", var.vm_size))
    error_message = "vm_size must be an Azure size name such as Standard_ND96isr_H100_v5."
  }
}

variable "subnet_id" {
  description = "ARM id of the existing subnet the VMs' network interface joins."
  type        = string

  validation {
    condition     = can(regex("(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\\.Network/virtualNetworks/[^/]+/subnets/[^/]+$", var.subnet_id))
    error_message = "subnet_id must be a subnet's ARM id: /subscriptions/.../resourceGroups/.../providers/Microsoft.Network/virtualNetworks/.../subnets/...."
  }
}

variable "admin_username" {
  description = "The VMs' local administrator (SSH key login only, no password)."
  type        = string
  default     = "gpuplan"

  validation {
    condition     = can(regex("^[a-z_][a-z0-9_-]{0,31}$", var.admin_username)) && !contains(["root", "admin", "administrator", "user", "guest", "test"], var.admin_username)
    error_message = "admin_username must be a Linux user name (lower case, at most 32) and not one Azure reserves (root, admin, ...)."
  }
}

variable "ssh_public_key" {
  description = "The administrator's SSH public key (ssh-rsa or ssh-ed25519). Public, so not sensitive; the module sets no password."
  type        = string

  validation {
    condition     = can(regex("^(ssh-rsa|ssh-ed25519) [A-Za-z0-9+/=]+", var.ssh_public_key))
    error_message = "ssh_public_key must be an OpenSSH public key line starting with ssh-rsa or ssh-ed25519."
  }
}

variable "source_image" {
  description = "Marketplace image of the VMs; the default is Microsoft's Ubuntu HPC image (NVIDIA and InfiniBand drivers included)."
  type = object({
    publisher = string
    offer     = string
    sku       = string
    version   = string
  })
  default = {
    publisher = "microsoft-dsvm"
    offer     = "ubuntu-hpc"
    sku       = "2204"
    version   = "latest"
  }

  validation {
    condition     = alltrue([for v in values(var.source_image) : v != null && length(trimspace(v)) > 0])
    error_message = "source_image needs a non-empty publisher, offer, sku and version."
  }
}

variable "zones" {
  description = "Availability zones of the scale sets; a gang and a reservation use only the first. Empty: regional."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for z in var.zones : contains(["1", "2", "3"], z)]) && length(distinct(var.zones)) == length(var.zones)
    error_message = "zones must be distinct values among \"1\", \"2\" and \"3\"."
  }
}

variable "os_disk_storage_account_type" {
  description = "Storage type of each VM's OS disk."
  type        = string
  default     = "Premium_LRS"

  validation {
    condition     = contains(["Standard_LRS", "StandardSSD_LRS", "StandardSSD_ZRS", "Premium_LRS", "Premium_ZRS"], var.os_disk_storage_account_type)
    error_message = "os_disk_storage_account_type must be one of Standard_LRS, StandardSSD_LRS, StandardSSD_ZRS, Premium_LRS, Premium_ZRS."
  }
}

variable "os_disk_size_gb" {
  description = "Size of each VM's OS disk in GB; null keeps the image's size."
  type        = number
  default     = null

  validation {
    condition     = var.os_disk_size_gb == null ? true : var.os_disk_size_gb >= 30 && floor(var.os_disk_size_gb) == var.os_disk_size_gb
    error_message = "os_disk_size_gb must be null or a whole number >= 30."
  }
}

variable "accelerated_networking" {
  description = "Turn on accelerated networking on the VMs' network interface (the size must support it)."
  type        = bool
  default     = false
}
