"""Executors carry evictions out: simulation (mutates the snapshot) or the live API."""
