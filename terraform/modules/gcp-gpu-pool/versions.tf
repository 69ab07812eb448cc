terraform {
  # 1.9 is the first release whose variable validations may refer to other variables.
  required_version = ">= 1.9"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.0, < 8.0"
    }
  }
}
