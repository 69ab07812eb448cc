locals {
  tags = merge(var.tags, { "gpuplan-plan" = var.plan_id, "gpuplan-managed-by" = "terraform" })

  # The EC2 events gpuplan reads (providers/aws.py _parse_event), each matched by its own rule, as
  # Karpenter's interruption queue does: EC2 User Guide, spot-instance-termination-notices.html,
  # rebalance-recommendations.html, monitoring-instance-state-changes.html.
  rules = {
    spot-interruption = { "source" = ["aws.ec2"], "detail-type" = ["EC2 Spot Instance Interruption Warning"] }
    rebalance         = { "source" = ["aws.ec2"], "detail-type" = ["EC2 Instance Rebalance Recommendation"] }
    state-change      = { "source" = ["aws.ec2"], "detail-type" = ["EC2 Instance State-change Notification"] }
  }
}

resource "aws_sqs_queue" "this" {
  name                      = var.name
  message_retention_seconds = var.message_retention_seconds
  sqs_managed_sse_enabled   = true
  tags                      = local.tags
}

################################################################################
# Only EventBridge may send to the queue
################################################################################

resource "aws_sqs_queue_policy" "this" {
  queue_url = aws_sqs_queue.this.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        Sid       = "EventBridgeSends"
        Effect    = "Allow"
        Principal = { Service = ["events.amazonaws.com", "sqs.amazonaws.com"] }
        Action    = "sqs:SendMessage"
        Resource  = aws_sqs_queue.this.arn
      },
    ]
  })
}

################################################################################
# One rule per event type, each targeting the queue
################################################################################

resource "aws_cloudwatch_event_rule" "this" {
  for_each = local.rules

  name          = "${var.name}-${each.key}"
  description   = "gpuplan: ${each.value["detail-type"][0]} to ${var.name}"
  event_pattern = jsonencode(each.value)
  tags          = local.tags
}

resource "aws_cloudwatch_event_target" "this" {
  for_each = local.rules

  rule      = aws_cloudwatch_event_rule.this[each.key].name
  target_id = "gpuplan-queue"
  arn       = aws_sqs_queue.this.arn
}
