"""desched: a Kubernetes descheduler compatible with kubernetes-sigs/descheduler and
koord-descheduler."""

__version__ = "0.1.0"
