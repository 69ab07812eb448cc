terraform {
  # 1.9 is the first release whose variable validations may refer to other variables.
  required_version = ">= 1.9"

  required_providers {
    google = {
      source = "hashicorp/google"
      # 6.44.0 is the first release whose google_compute_reservation takes delete_at_time (the
      # reservation's end; CHANGELOG.md of hashicorp/terraform-provider-google, 6.44.0 of July 16, 2025,
      # pull request 23561). The one before it to arrive: network_interface.nic_type = MRDMA (A3 Ultra
      # / A4 GPUDirect-RDMA NICs), from 6.19.0 (commit 6710afaf, "Network profile and RDMA v1
      # support"; 6.18.1 validates nic_type against GVNIC, VIRTIO_NET [, IDPF] only). Every other
      # attribute the module uses is older. 7.0.0 broke nothing it uses (its instance-template
      # disk.type change does not touch a disk_type that is set). 8.x is untested: below it.
      version = ">= 6.44.0, < 8.0.0"
    }
  }
}
