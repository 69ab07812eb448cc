"""Attribute paths the gpuplan GCP Terraform (module and generated roots) may use, per google resource.

Written by hand from hashicorp/terraform-provider-google ``website/docs/r/<resource>.html.markdown``
(the commit of the page read is named above each entry). A path is dotted through nested blocks
(``scheduling.provisioning_model``); ``dynamic "x"`` blocks count as ``x``. Only arguments are listed,
not computed attributes. Each set is a documented subset: the arguments a GPU pool can reasonably set,
so a misspelling or a block in the wrong place is reported by ``hcl_walk.check_allowed``.

Not in the pages read: ``google_compute_reservation`` takes no ``resource_policies`` (so a reservation
cannot carry the gang's placement policy here), and ``network_interface.nic_type`` lists GVNIC and
VIRTIO_NET only; MRDMA (A3 Ultra GPUDirect-RDMA) is a Compute API value that later provider releases
accept. Values are not checked by this list, paths are.
"""

from __future__ import annotations

__all__ = ["ALLOWED"]


def _nested(block: str, names: set[str]) -> set[str]:
    """``block`` itself and ``block.name`` for each name."""
    return {block} | {f"{block}.{name}" for name in names}


_SCHEDULING_COMMON = {
    "automatic_restart",
    "on_host_maintenance",
    "preemptible",
    "provisioning_model",
    "instance_termination_action",
    "min_node_cpus",
}

_NETWORK_INTERFACE = (
    _nested(
        "network_interface",
        {
            "network",
            "subnetwork",
            "subnetwork_project",
            "network_ip",
            "nic_type",
            "stack_type",
            "queue_count",
            "access_config",
            "alias_ip_range",
            "ipv6_access_config",
        },
    )
    | _nested("network_interface.access_config", {"nat_ip", "network_tier"})
    | _nested("network_interface.alias_ip_range", {"ip_cidr_range", "subnetwork_range_name"})
    | _nested("network_interface.ipv6_access_config", {"network_tier"})
)

_SHIELDED = _nested(
    "shielded_instance_config", {"enable_secure_boot", "enable_vtpm", "enable_integrity_monitoring"}
)

_RESERVATION_AFFINITY = _nested("reservation_affinity", {"type", "specific_reservation"}) | _nested(
    "reservation_affinity.specific_reservation", {"key", "values"}
)

ALLOWED: dict[str, set[str]] = {
    # website/docs/r/compute_resource_policy.html.markdown @ 022e24ae73bceb5483647baad913c9dc9ebb7169
    "google_compute_resource_policy": {"name", "description", "project", "region"}
    | _nested("group_placement_policy", {"vm_count", "availability_domain_count", "collocation"}),
    # website/docs/r/compute_instance_template.html.markdown @ 00b984c6987304290117e54f87cdfd38f2be0685
    "google_compute_instance_template": {
        "name",
        "name_prefix",
        "description",
        "instance_description",
        "project",
        "region",
        "machine_type",
        "min_cpu_platform",
        "can_ip_forward",
        "labels",
        "tags",
        "metadata",
        "metadata_startup_script",
        "resource_policies",
        "resource_manager_tags",
    }
    | _nested(
        "disk",
        {
            "auto_delete",
            "boot",
            "device_name",
            "disk_name",
            "disk_size_gb",
            "disk_type",
            "interface",
            "labels",
            "mode",
            "provisioned_iops",
            "resource_policies",
            "source",
            "source_image",
            "source_snapshot",
            "type",
            "disk_encryption_key",
        },
    )
    | _nested("disk.disk_encryption_key", {"kms_key_self_link"})
    | _NETWORK_INTERFACE
    | _nested("network_performance_config", {"total_egress_bandwidth_tier"})
    | _nested(
        "scheduling", (_SCHEDULING_COMMON - {"min_node_cpus"}) | {"max_run_duration", "node_affinities"}
    )
    | _nested("scheduling.max_run_duration", {"seconds", "nanos"})
    | _nested("scheduling.node_affinities", {"key", "operator", "value"})
    | _RESERVATION_AFFINITY
    | _nested("service_account", {"email", "scopes"})
    | _nested("guest_accelerator", {"type", "count"})
    | _SHIELDED
    | _nested("advanced_machine_features", {"enable_nested_virtualization", "threads_per_core"}),
    # website/docs/r/compute_instance_group_manager.html.markdown @ 05e5c00be11439496d0b683e05a3d3ac7aeae548
    "google_compute_instance_group_manager": {
        "name",
        "base_instance_name",
        "zone",
        "project",
        "description",
        "target_size",
        "target_pools",
        "wait_for_instances",
    }
    | _nested("version", {"name", "instance_template", "target_size"})
    | _nested("version.target_size", {"fixed", "percent"})
    | _nested("named_port", {"name", "port"})
    | _nested("auto_healing_policies", {"health_check", "initial_delay_sec"})
    | _nested(
        "update_policy",
        {
            "type",
            "minimal_action",
            "max_surge_fixed",
            "max_surge_percent",
            "max_unavailable_fixed",
            "max_unavailable_percent",
            "min_ready_sec",
        },
    ),
    # website/docs/r/compute_instance.html.markdown @ 022e24ae73bceb5483647baad913c9dc9ebb7169
    "google_compute_instance": {
        "name",
        "zone",
        "project",
        "description",
        "machine_type",
        "min_cpu_platform",
        "hostname",
        "labels",
        "tags",
        "metadata",
        "metadata_startup_script",
        "resource_policies",
        "allow_stopping_for_update",
        "deletion_protection",
        "desired_status",
        "can_ip_forward",
    }
    | _nested(
        "boot_disk",
        {"auto_delete", "device_name", "mode", "source", "initialize_params", "kms_key_self_link"},
    )
    | _nested("boot_disk.initialize_params", {"image", "size", "type", "labels"})
    | _nested("scratch_disk", {"interface"})
    | _nested("attached_disk", {"source", "device_name", "mode", "kms_key_self_link"})
    | _NETWORK_INTERFACE
    | _nested("network_performance_config", {"total_egress_bandwidth_tier"})
    | _nested("scheduling", _SCHEDULING_COMMON | {"max_run_duration", "node_affinities"})
    | _nested("scheduling.max_run_duration", {"seconds", "nanos"})
    | _nested("scheduling.node_affinities", {"key", "operator", "values"})
    | _RESERVATION_AFFINITY
    | _nested("service_account", {"email", "scopes"})
    | _nested("guest_accelerator", {"type", "count"})
    | _SHIELDED,
    # website/docs/r/compute_reservation.html.markdown @ 022e24ae73bceb5483647baad913c9dc9ebb7169;
    # delete_at_time (from 6.44.0) @ e03b7622a2 of hashicorp/terraform-provider-google
    "google_compute_reservation": {
        "name",
        "zone",
        "project",
        "description",
        "specific_reservation_required",
        "delete_at_time",
    }
    | _nested("specific_reservation", {"count", "instance_properties"})
    | _nested(
        "specific_reservation.instance_properties",
        {"machine_type", "min_cpu_platform", "guest_accelerators", "local_ssds"},
    )
    | _nested(
        "specific_reservation.instance_properties.guest_accelerators",
        {"accelerator_type", "accelerator_count"},
    )
    | _nested("specific_reservation.instance_properties.local_ssds", {"interface", "disk_size_gb"})
    | _nested("share_settings", {"share_type"}),
}
