# One gpuplan pool on AWS. The root module made by `gpuplan terraform` calls this module once per pool
# (for_each over the pools of terraform.tfvars.json); the first group of inputs has the same shape on
# every cloud, the second is AWS's own.

################################################################################
# Common to every cloud
################################################################################

variable "name" {
  description = "Prefix of every resource name (the module adds short suffixes such as -lt, -asg, -pg)."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,40}$", var.name))
    error_message = "name must start with a lower-case letter and hold at most 41 lower-case letters, digits or hyphens."
  }
}

variable "plan_id" {
  description = "Id of the gpuplan plan this pool comes from; the value of the gpuplan-plan tag."
  type        = string

  validation {
    condition     = length(var.plan_id) > 0 && length(var.plan_id) <= 256
    error_message = "plan_id must be 1 to 256 characters (an AWS tag value)."
  }
}

variable "pool" {
  description = "Name of the pool in the plan; the value of the gpuplan-pool tag."
  type        = string

  validation {
    condition     = length(var.pool) > 0 && length(var.pool) <= 256
    error_message = "pool must be 1 to 256 characters (an AWS tag value)."
  }
}

variable "run" {
  description = "Training run this pool is the gang of, or null. A gang is tagged gpuplan-run, gets a cluster placement group in the first subnet and keeps a fixed size."
  type        = string
  default     = null

  validation {
    condition     = var.run == null || (try(length(var.run), 0) > 0 && try(length(var.run), 0) <= 256)
    error_message = "run must be null or 1 to 256 characters (an AWS tag value)."
  }
}

variable "on_demand_nodes" {
  description = "Number of on-demand nodes: the on-demand base of the group."
  type        = number
  default     = 0

  validation {
    condition     = var.on_demand_nodes >= 0 && floor(var.on_demand_nodes) == var.on_demand_nodes
    error_message = "on_demand_nodes must be a whole number, 0 or more."
  }
}

variable "spot_nodes" {
  description = "Number of spot nodes, launched above the on-demand base. A gang may have spot nodes or on-demand nodes, not both."
  type        = number
  default     = 0

  validation {
    condition     = var.spot_nodes >= 0 && floor(var.spot_nodes) == var.spot_nodes
    error_message = "spot_nodes must be a whole number, 0 or more."
  }

  validation {
    condition     = var.run == null || var.spot_nodes == 0 || var.on_demand_nodes == 0
    error_message = "A gang (run set) is either all spot or all on-demand: set spot_nodes or on_demand_nodes to 0."
  }
}

variable "fabric" {
  description = "Interconnect between the nodes: null (the default network interface only) or \"efa\" (one EFA interface per network card of the instance type)."
  type        = string
  default     = null

  validation {
    condition     = var.fabric == null || contains(["efa"], coalesce(var.fabric, "efa"))
    error_message = "On AWS fabric must be null or \"efa\"."
  }
}

variable "reserved_nodes" {
  description = "When above 0, a targeted On-Demand Capacity Reservation for this many nodes, in the first subnet's availability zone, that the on-demand nodes launch into."
  type        = number
  default     = 0

  validation {
    condition     = var.reserved_nodes >= 0 && floor(var.reserved_nodes) == var.reserved_nodes
    error_message = "reserved_nodes must be a whole number, 0 or more."
  }
}

variable "placement_group_name" {
  description = "Name of a gang's cluster placement group (null: <name>-pg). gpuplan's roots pass the name gpuplan provision gives it, so a fleet applied by Terraform and one reconciled by provision agree."
  type        = string
  default     = null

  validation {
    condition     = var.placement_group_name == null || can(regex("^[a-zA-Z0-9][a-zA-Z0-9._-]{0,254}$", var.placement_group_name))
    error_message = "placement_group_name must be 1-255 letters, digits, '.', '_' or '-'."
  }
}

variable "reservation_name" {
  description = "Name of the capacity reservation (null: <name>-cr). gpuplan's roots pass the name gpuplan provision gives a gang's reservation."
  type        = string
  default     = null

  validation {
    condition     = var.reservation_name == null || try(length(var.reservation_name) >= 1 && length(var.reservation_name) <= 256, false)
    error_message = "reservation_name (a Name tag) must be 1-256 characters."
  }
}

variable "reservation_end" {
  description = "When the capacity reservation ends, as an RFC 3339 UTC time (2027-01-05T18:00:00Z), or null: it lasts until deleted. EC2 makes it a limited reservation and cancels it within an hour of that time. gpuplan's roots pass a gang's planned end plus the margin gpuplan provision gives its reservations, so a root applied and never destroyed stops paying for the reservation."
  type        = string
  default     = null

  validation {
    condition     = var.reservation_end == null || (can(regex("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$", var.reservation_end)) && can(formatdate("YYYY", var.reservation_end)))
    error_message = "reservation_end must be null or an RFC 3339 time in UTC such as 2027-01-05T18:00:00Z."
  }
}

variable "tags" {
  description = "Extra tags for every resource. The gpuplan-plan, gpuplan-pool, gpuplan-run and gpuplan-managed-by tags are applied over them."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for key in keys(var.tags) : !startswith(lower(key), "aws:")])
    error_message = "Tag keys starting with \"aws:\" are reserved by AWS."
  }
}

################################################################################
# AWS
################################################################################

variable "instance_type" {
  description = "EC2 instance type of every node, for example p5.48xlarge."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]*\\.[a-z0-9-]+$", var.instance_type))
    error_message = "instance_type must look like FAMILY.SIZE, for example p5.48xlarge."
  }
}

variable "image_id" {
  description = "AMI the nodes boot from."
  type        = string

  validation {
    condition     = can(regex("^ami-[0-9a-f]{8,17}$", var.image_id))
    error_message = "image_id must be an AMI id (ami- followed by 8 to 17 hex digits)."
  }
}

variable "subnet_ids" {
  description = "Subnets the group may launch into. A gang, and a pool with a reservation, use only the first (one availability zone)."
  type        = list(string)

  validation {
    condition     = length(var.subnet_ids) >= 1
    error_message = "subnet_ids must name at least one subnet."
  }

  validation {
    condition     = alltrue([for id in var.subnet_ids : can(regex("^subnet-[0-9a-f]+$", id))])
    error_message = "Every subnet id must look like subnet-0123abcd."
  }
}

variable "security_group_ids" {
  description = "Security groups of the nodes' network interfaces (for EFA, a group that lets all traffic in and out between its members)."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for id in var.security_group_ids : can(regex("^sg-[0-9a-f]+$", id))])
    error_message = "Every security group id must look like sg-0123abcd."
  }
}

variable "key_name" {
  description = "EC2 key pair for SSH to the nodes, or null for none."
  type        = string
  default     = null

  validation {
    condition     = var.key_name == null || try(length(var.key_name), 0) > 0
    error_message = "key_name must be null or a non-empty key pair name."
  }
}

variable "iam_instance_profile_name" {
  description = "IAM instance profile of the nodes, or null for none."
  type        = string
  default     = null

  validation {
    condition     = var.iam_instance_profile_name == null || try(length(var.iam_instance_profile_name), 0) > 0
    error_message = "iam_instance_profile_name must be null or a non-empty name."
  }
}

variable "user_data_base64" {
  description = "Base64-encoded user data run at boot (for example a cluster join script), or null."
  type        = string
  default     = null

  validation {
    condition     = var.user_data_base64 == null || can(base64decode(coalesce(var.user_data_base64, "")))
    error_message = "user_data_base64 must be valid base64."
  }
}

variable "instance_platform" {
  description = "Operating system the capacity reservation is for; it must match the AMI."
  type        = string
  default     = "Linux/UNIX"

  validation {
    condition = contains([
      "Linux/UNIX", "Red Hat Enterprise Linux", "SUSE Linux", "Ubuntu Pro", "Windows",
    ], var.instance_platform)
    error_message = "instance_platform must be one of Linux/UNIX, Red Hat Enterprise Linux, SUSE Linux, Ubuntu Pro, Windows."
  }
}

variable "wait_for_capacity_timeout" {
  description = "How long terraform waits for the group to reach its size (a Go duration such as \"10m\"; \"0\" does not wait)."
  type        = string
  default     = "10m"

  validation {
    condition     = can(regex("^(0|([0-9]+h)?([0-9]+m)?([0-9]+s)?)$", var.wait_for_capacity_timeout)) && var.wait_for_capacity_timeout != ""
    error_message = "wait_for_capacity_timeout must be \"0\" or a duration such as \"10m\" or \"1h30m\"."
  }
}
