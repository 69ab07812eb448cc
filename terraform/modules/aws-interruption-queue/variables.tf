variable "name" {
  description = "Name of the queue and prefix of the rules (one queue per plan and region)."
  type        = string

  validation {
    condition     = can(regex("^[a-zA-Z0-9_-]{1,60}$", var.name))
    error_message = "name must be 1-60 letters, digits, hyphens or underscores (SQS queue names allow 80; the rules add a suffix)."
  }
}

variable "plan_id" {
  description = "The plan the queue serves (tag gpuplan-plan)."
  type        = string

  validation {
    condition     = length(var.plan_id) > 0
    error_message = "plan_id must not be empty."
  }
}

variable "message_retention_seconds" {
  description = "How long an unread notice stays in the queue: a spot warning is worth 2 minutes, so 5 minutes (as Karpenter's queue)."
  type        = number
  default     = 300

  validation {
    condition     = var.message_retention_seconds >= 60 && var.message_retention_seconds <= 1209600
    error_message = "message_retention_seconds must be 60 to 1209600 (SQS's limits)."
  }
}

variable "tags" {
  description = "Extra tags of the queue and the rules; the gpuplan tags win over them."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k in keys(var.tags) : !startswith(k, "aws:")])
    error_message = "Tag keys starting with \"aws:\" are reserved by AWS."
  }
}
