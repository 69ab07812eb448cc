"""Attribute paths the AWS Terraform code of gpuplan may use, per resource and data source type.

Written by hand from the hashicorp/terraform-provider-aws documentation pages named per entry
(``website/docs/r/<name>.html.markdown`` for resources, ``website/docs/d/<name>.html.markdown`` for data
sources) and checked path by path against the exact schema of **hashicorp/aws 5.100.0**
(``terraform providers schema -json``): ``test_allowlist_paths_exist_in_the_provider_schema`` in
``test_terraform_aws_module.py`` fails on any entry the provider does not know. Nested blocks are dotted
(``network_interfaces.interface_type``); data sources are keyed ``data.<type>``. Only the arguments a GPU
pool needs (and a few close neighbours) are listed, so a misspelt or misplaced attribute fails the
allow-list check with its path. ``tests/integration/hcl_walk.py`` does the walking.
"""

from __future__ import annotations

__all__ = ["ALLOWED", "PROVIDER_VERSION"]

PROVIDER_VERSION = "5.100.0"

ALLOWED: dict[str, set[str]] = {
    # website/docs/r/placement_group.html.markdown (hashicorp/terraform-provider-aws, page as stored at
    # 0879a1c6; spread_level and partition_count from the 5.100.0 schema)
    "aws_placement_group": {"name", "strategy", "partition_count", "spread_level", "tags"},
    # website/docs/r/ec2_capacity_reservation.html.markdown (stored at 0e612835 and 4faf1608; the
    # placement_group_arn argument is newer than the stored page and is in the 5.100.0 schema)
    "aws_ec2_capacity_reservation": {
        "availability_zone",
        "ebs_optimized",
        "end_date",
        "end_date_type",
        "ephemeral_storage",
        "instance_count",
        "instance_match_criteria",
        "instance_platform",
        "instance_type",
        "placement_group_arn",
        "tags",
        "tenancy",
    },
    # website/docs/r/launch_template.html.markdown (stored at 8966abc2)
    "aws_launch_template": {
        "name",
        "name_prefix",
        "description",
        "default_version",
        "update_default_version",
        "image_id",
        "instance_type",
        "key_name",
        "user_data",
        "ebs_optimized",
        "vpc_security_group_ids",
        "tags",
        "block_device_mappings",
        "block_device_mappings.device_name",
        "block_device_mappings.ebs",
        "block_device_mappings.ebs.delete_on_termination",
        "block_device_mappings.ebs.encrypted",
        "block_device_mappings.ebs.iops",
        "block_device_mappings.ebs.throughput",
        "block_device_mappings.ebs.volume_size",
        "block_device_mappings.ebs.volume_type",
        "capacity_reservation_specification",
        "capacity_reservation_specification.capacity_reservation_preference",
        "capacity_reservation_specification.capacity_reservation_target",
        "capacity_reservation_specification.capacity_reservation_target.capacity_reservation_id",
        "capacity_reservation_specification.capacity_reservation_target.capacity_reservation_resource_group_arn",
        "iam_instance_profile",
        "iam_instance_profile.arn",
        "iam_instance_profile.name",
        "instance_market_options",
        "instance_market_options.market_type",
        "instance_market_options.spot_options",
        "instance_market_options.spot_options.instance_interruption_behavior",
        "instance_market_options.spot_options.max_price",
        "instance_market_options.spot_options.spot_instance_type",
        "metadata_options",
        "metadata_options.http_endpoint",
        "metadata_options.http_put_response_hop_limit",
        "metadata_options.http_tokens",
        "metadata_options.instance_metadata_tags",
        "network_interfaces",
        "network_interfaces.associate_public_ip_address",
        "network_interfaces.delete_on_termination",
        "network_interfaces.description",
        "network_interfaces.device_index",
        "network_interfaces.interface_type",
        "network_interfaces.network_card_index",
        "network_interfaces.security_groups",
        "network_interfaces.subnet_id",
        "placement",
        "placement.availability_zone",
        "placement.group_name",
        "placement.partition_number",
        "placement.tenancy",
        "tag_specifications",
        "tag_specifications.resource_type",
        "tag_specifications.tags",
    },
    # website/docs/r/autoscaling_group.html.markdown (stored at 17a97a98 and 000522f0)
    "aws_autoscaling_group": {
        "name",
        "name_prefix",
        "min_size",
        "max_size",
        "desired_capacity",
        "vpc_zone_identifier",
        "availability_zones",
        "placement_group",
        "capacity_rebalance",
        "health_check_type",
        "health_check_grace_period",
        "wait_for_capacity_timeout",
        "protect_from_scale_in",
        "termination_policies",
        "suspended_processes",
        "capacity_reservation_specification",
        "capacity_reservation_specification.capacity_reservation_preference",
        "capacity_reservation_specification.capacity_reservation_target",
        "capacity_reservation_specification.capacity_reservation_target.capacity_reservation_ids",
        "launch_template",
        "launch_template.id",
        "launch_template.name",
        "launch_template.version",
        "mixed_instances_policy",
        "mixed_instances_policy.instances_distribution",
        "mixed_instances_policy.instances_distribution.on_demand_allocation_strategy",
        "mixed_instances_policy.instances_distribution.on_demand_base_capacity",
        "mixed_instances_policy.instances_distribution.on_demand_percentage_above_base_capacity",
        "mixed_instances_policy.instances_distribution.spot_allocation_strategy",
        "mixed_instances_policy.instances_distribution.spot_max_price",
        "mixed_instances_policy.launch_template",
        "mixed_instances_policy.launch_template.launch_template_specification",
        "mixed_instances_policy.launch_template.launch_template_specification.launch_template_id",
        "mixed_instances_policy.launch_template.launch_template_specification.launch_template_name",
        "mixed_instances_policy.launch_template.launch_template_specification.version",
        "mixed_instances_policy.launch_template.override",
        "mixed_instances_policy.launch_template.override.instance_type",
        "mixed_instances_policy.launch_template.override.weighted_capacity",
        "tag",
        "tag.key",
        "tag.value",
        "tag.propagate_at_launch",
        "timeouts",
        "timeouts.delete",
    },
    # website/docs/d/ec2_instance_type.html.markdown (stored at a1eca88c): only the argument; the module
    # reads maximum_network_cards and efa_supported from it
    "data.aws_ec2_instance_type": {"instance_type"},
    # website/docs/d/subnet.html.markdown (stored at acdc6f66)
    "data.aws_subnet": {"id", "filter", "filter.name", "filter.values", "vpc_id", "availability_zone"},
    # the interruption queue (terraform/modules/aws-interruption-queue), from the pages
    # website/docs/r/sqs_queue.html.markdown, sqs_queue_policy.html.markdown,
    # cloudwatch_event_rule.html.markdown and cloudwatch_event_target.html.markdown, each path checked
    # against the 5.100.0 schema by test_allowlist_paths_exist_in_the_provider_schema
    "aws_sqs_queue": {
        "name",
        "message_retention_seconds",
        "visibility_timeout_seconds",
        "sqs_managed_sse_enabled",
        "kms_master_key_id",
        "tags",
    },
    "aws_sqs_queue_policy": {"queue_url", "policy"},
    "aws_cloudwatch_event_rule": {"name", "description", "event_pattern", "event_bus_name", "state", "tags"},
    "aws_cloudwatch_event_target": {"rule", "target_id", "arn", "event_bus_name"},
}
