"""CustomPriority (Koordinator): the plugin (`plugin`) and its args (`args`)."""
