terraform {
  # 1.9 is the first release whose variable validations may refer to other variables (the gang rule on
  # spot_nodes).
  required_version = ">= 1.9"

  required_providers {
    # 5.74 is the first release whose launch templates take interface_type = "efa-only"
    # (hashicorp/terraform-provider-aws pull request 39882)
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.74, < 7.0"
    }
  }
}
