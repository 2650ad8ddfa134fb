"""LowNodeLoad (Koordinator): the plugin (`plugin`), its args (`args`), the anomaly detector
it keeps per node (`detector`) and the order it evicts in (`sort`)."""
