"""The commands: the `desched` command line (`cli`), the upstream descheduler flags it
accepts (`upstream_flags`) and the `kubectl desched` plugin (`kubectl_plugin`). They sit above
live/ and reach the network only through it."""
