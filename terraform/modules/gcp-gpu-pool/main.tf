################################################################################
# Placement: a COLLOCATED group placement policy for a gang of two or more nodes
################################################################################

resource "google_compute_resource_policy" "placement" {
  count = local.placement ? 1 : 0

  name        = local.placement_name
  project     = var.project
  region      = var.region
  description = local.description

  group_placement_policy {
    collocation = "COLLOCATED"
    vm_count    = local.gang_nodes
  }
}

################################################################################
# Reservation: reserved_nodes on-demand nodes of machine_type, consumed by name only; with
# reservation_end, Compute Engine deletes it then (deleteAtTime, Compute Engine API reference,
# reservations), so a root applied and never destroyed stops paying for it
################################################################################

resource "google_compute_reservation" "this" {
  count = local.reservation ? 1 : 0

  name                          = local.reservation_name
  project                       = var.project
  zone                          = var.zone
  description                   = local.description
  specific_reservation_required = true
  delete_at_time                = var.reservation_end

  specific_reservation {
    count = var.reserved_nodes

    instance_properties {
      machine_type = var.machine_type
    }
  }
}

################################################################################
# Pools that are not gangs: one instance template and one zonal MIG per kind
################################################################################

# Instance templates are immutable: name_prefix and create_before_destroy let a changed template be
# created before the managed instance group moves to it and the old one is deleted.
resource "google_compute_instance_template" "this" {
  for_each = local.groups

  name_prefix  = "${var.name}-${each.key}-"
  project      = var.project
  region       = var.region
  description  = local.description
  machine_type = var.machine_type
  labels       = local.labels

  disk {
    boot         = true
    auto_delete  = true
    source_image = var.image
    disk_size_gb = var.boot_disk_gb
    disk_type    = local.boot_disk_type
    labels       = local.labels
  }

  network_interface {
    network    = var.network
    subnetwork = var.subnetwork
    nic_type   = "GVNIC"
  }

  dynamic "network_interface" {
    for_each = local.extra_nics
    content {
      network    = network_interface.value.network
      subnetwork = network_interface.value.subnetwork
      nic_type   = network_interface.value.nic_type
    }
  }

  scheduling {
    provisioning_model          = local.scheduling[each.value.scheduling].provisioning_model
    preemptible                 = local.scheduling[each.value.scheduling].preemptible
    automatic_restart           = local.scheduling[each.value.scheduling].automatic_restart
    on_host_maintenance         = local.scheduling[each.value.scheduling].on_host_maintenance
    instance_termination_action = local.scheduling[each.value.scheduling].instance_termination_action
  }

  dynamic "reservation_affinity" {
    for_each = each.value.reserved ? [local.reservation_name] : []
    content {
      type = "SPECIFIC_RESERVATION"
      specific_reservation {
        key    = "compute.googleapis.com/reservation-name"
        values = [reservation_affinity.value]
      }
    }
  }

  lifecycle {
    create_before_destroy = true
  }

  depends_on = [google_compute_reservation.this]
}

resource "google_compute_instance_group_manager" "this" {
  for_each = local.groups

  name               = "${var.name}-${each.key}"
  base_instance_name = "${var.name}-${each.key}"
  project            = var.project
  zone               = var.zone
  description        = local.description
  target_size        = each.value.size
  wait_for_instances = false

  version {
    name              = each.key
    instance_template = google_compute_instance_template.this[each.key].id
  }
}

################################################################################
# Gangs: a fixed set of instances in the placement policy
################################################################################

resource "google_compute_instance" "gang" {
  count = local.gang_nodes

  name              = local.gang_instances[count.index].name
  project           = var.project
  zone              = var.zone
  description       = local.description
  machine_type      = var.machine_type
  labels            = local.labels
  resource_policies = local.placement ? [google_compute_resource_policy.placement[0].self_link] : []

  boot_disk {
    auto_delete = true

    initialize_params {
      image  = var.image
      size   = var.boot_disk_gb
      type   = local.boot_disk_type
      labels = local.labels
    }
  }

  network_interface {
    network    = var.network
    subnetwork = var.subnetwork
    nic_type   = "GVNIC"
  }

  dynamic "network_interface" {
    for_each = local.extra_nics
    content {
      network    = network_interface.value.network
      subnetwork = network_interface.value.subnetwork
      nic_type   = network_interface.value.nic_type
    }
  }

  scheduling {
    provisioning_model          = local.scheduling[local.gang_instances[count.index].scheduling].provisioning_model
    preemptible                 = local.scheduling[local.gang_instances[count.index].scheduling].preemptible
    automatic_restart           = local.scheduling[local.gang_instances[count.index].scheduling].automatic_restart
    on_host_maintenance         = local.scheduling[local.gang_instances[count.index].scheduling].on_host_maintenance
    instance_termination_action = local.scheduling[local.gang_instances[count.index].scheduling].instance_termination_action
  }

  dynamic "reservation_affinity" {
    for_each = local.gang_instances[count.index].reserved ? [local.reservation_name] : []
    content {
      type = "SPECIFIC_RESERVATION"
      specific_reservation {
        key    = "compute.googleapis.com/reservation-name"
        values = [reservation_affinity.value]
      }
    }
  }

  depends_on = [google_compute_reservation.this]
}
