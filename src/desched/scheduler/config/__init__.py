"""A user's KubeSchedulerConfiguration into scheduler profiles (profile.py), split as
kube-scheduler splits its config API (`pkg/scheduler/apis/config`, v1.36): the file's types
(types.py), the defaults (defaults.py: the default plugins, each args' defaulting), the
validation with kube-scheduler's wording (validation.py, field_errors.py), which plugins a
profile runs at filter and score (plugin_sets.py, over known_plugins.py), each plugin's args
registered with its type, validation and defaulting (plugin_args.py), what desched does not
model, as warnings (unmodelled.py), and the reader that decodes a file and assembles the
profiles (reader.py). Koordinator's LoadAwareScheduling args are defaulted and validated as
koord-scheduler does it (load_aware_args.py).
"""

from desched.scheduler.config.reader import load_scheduler_config, parse_scheduler_config

__all__ = ["load_scheduler_config", "parse_scheduler_config"]
