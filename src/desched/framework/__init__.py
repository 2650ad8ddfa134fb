"""Profiles, extension points, the plugin registry, the Evictor and decision records."""
