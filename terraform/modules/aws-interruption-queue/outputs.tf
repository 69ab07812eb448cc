output "queue_url" {
  description = "URL of the queue: put it in the provider settings as aws.interruption_queue_url."
  value       = aws_sqs_queue.this.id
}

output "queue_arn" {
  description = "ARN of the queue."
  value       = aws_sqs_queue.this.arn
}

output "rule_names" {
  description = "Name of the EventBridge rule of each event type: spot-interruption, rebalance, state-change."
  value       = { for k, r in aws_cloudwatch_event_rule.this : k => r.name }
}
