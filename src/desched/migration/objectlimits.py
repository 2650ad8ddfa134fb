"""The object limiters as a pod meets them (docs/migration.md): the pod's keys (its
namespace, its workload) and the maximum its workload's replicas allow, resolved over a snapshot.

Shared by the MigrationController plugin (a token reserved as a migration is decided) and the
live migration service (a token reserved just before it evicts the pod of a job someone else
created); either gives the token back if the migration does not happen.
"""

from __future__ import annotations

from desched.migration.arbitration import MigrationLedger
from desched.migration.limiter import NAMESPACE, WORKLOAD, ObjectLimiters, int_value
from desched.migration.limits import IntOrPercent, IntOrStringError, get_max_migrating
from desched.model.pod import Pod
from desched.snapshot.workloads import Workload


class PodObjectLimits:
    """`limiters` seen through `ledger` (its snapshot and workload resolver). The limiters
    outlive any one snapshot: give each snapshot's ledger with the call."""

    def __init__(self, limiters: ObjectLimiters,
                 max_migrating_per_workload: IntOrPercent | None) -> None:
        self.limiters = limiters
        self.max_migrating_per_workload = max_migrating_per_workload

    @staticmethod
    def keys(pod: Pod, ledger: MigrationLedger) -> dict[str, str]:
        keys = {NAMESPACE: str(pod.namespace)}
        workload = ledger.workload_key(pod)
        if workload is not None:
            keys[WORKLOAD] = workload
        return keys

    def reserve(self, pod: Pod, ledger: MigrationLedger, now: float) -> str | None:
        """checkPodExceedObjectLimiter (why the pod must wait, or None) and, when the pod may go,
        take its tokens at once (give_back undoes it if the migration does not happen).
        Koordinator checks, then feeds after the eviction; between the two, another migration
        of the workload could pass the same check."""
        keys = self.keys(pod, ledger)
        with self.limiters.lock:
            why = self.limiters.exceeded(keys, now)
            if why is None:
                self._track(pod, keys, ledger, now)
            return why

    def give_back(self, pod: Pod, ledger: MigrationLedger, now: float) -> None:
        """The reserved migration did not happen: return its tokens."""
        keys = self.keys(pod, ledger)
        with self.limiters.lock:
            for kind in self.limiters.configs:
                key = keys.get(kind)
                if key is not None:
                    self.limiters.give_back(kind, key, now)

    def _track(self, pod: Pod, keys: dict[str, str], ledger: MigrationLedger,
               now: float) -> None:
        """trackEvictedPod: feed each limiter for the pod. Each type is fed on its own
        (Koordinator stops at the first type whose maximum is 0)."""
        for kind, config in self.limiters.configs.items():
            key = keys.get(kind)
            if key is None:
                continue
            if kind == WORKLOAD:
                found = ledger.resolver.resolve(pod)
                if not isinstance(found, Workload):
                    continue  # no expected replicas: nothing to scale the limit by
                value = config.max_migrating if config.max_migrating is not None \
                    else self.max_migrating_per_workload
                try:
                    max_migrating = get_max_migrating(found.replicas, value)
                except IntOrStringError:
                    max_migrating = 0
            else:
                max_migrating = int_value(config.max_migrating)
            self.limiters.track(kind, key, max_migrating, now)
