"""Fixtures for the usage tests."""

from fake_prometheus import prometheus

__all__ = ["prometheus"]
