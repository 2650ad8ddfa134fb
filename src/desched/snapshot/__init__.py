"""Snapshot files and the indexed ClusterSnapshot built from them."""
