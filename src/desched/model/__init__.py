"""Lean typed structs for the Kubernetes objects descheduling reads."""
