"""The plugins. Importing this package registers every plugin with the framework registry."""

from desched.plugins import defaultevictor, podlifetime, removeduplicates

__all__ = ["defaultevictor", "podlifetime", "removeduplicates"]
