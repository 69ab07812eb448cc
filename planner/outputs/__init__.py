"""Plans written for people and other tools: a plan's desired state at an instant (``desired``, shared by
provision and Terraform), its node pools (``pools``), Terraform roots (``terraform``), Kueue quotas
(``k8s``) and the reports (``reports/``). Pure: read plan files, write documents; no cloud calls.
"""
