"""Small helpers with no Kubernetes knowledge."""
