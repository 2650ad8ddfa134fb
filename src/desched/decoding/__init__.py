"""What the readers of configuration files share: the descheduler policy loaders (policy_files/) and
the KubeSchedulerConfiguration reader (scheduler/config/). One YAML document per file, Go's
integer ranges and aggregated errors, the walk that finds keys a schema does not name, and
mergePluginSet."""
