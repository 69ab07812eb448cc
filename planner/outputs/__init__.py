"""Plans written out for other tools: Terraform roots (``terraform.py``)."""
