"""Policy hot reload for `desched run`: the policy file is watched (polled, and at once on SIGHUP);
a changed file is validated as soon as it is noticed and handed to the loop, which applies it at
the next cycle boundary, never mid-cycle. An invalid file is not applied: the running policy
stays, one log line names the file and the problem, and `desched_policy_reload_total{result}`
counts it.

Polling the file's bytes (a hash, every few seconds) rather than watching inotify events is
deliberate: a ConfigMap volume is updated by swapping a `..data` symlink, which inotify reports on
the directory, not the file, and the file is small.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from desched.errors import InputError
from desched.framework.policy import Policy
from desched.live.logging import get_logger
from desched.live.metrics import Metrics
from desched.plugins.catalog import PLUGINS
from desched.policy.loader import parse_policy

log = get_logger("desched.reload")


def policy_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class PendingPolicy:
    policy: Policy
    digest: str


class PolicyReloader:
    """Notices a changed policy file and keeps the validated new policy until the loop takes it."""

    def __init__(self, path: str, digest: str, metrics: Metrics) -> None:
        self.path = path
        self.running = digest  # the running policy's file hash
        self.metrics = metrics
        self.pending: PendingPolicy | None = None
        self._refused = ""  # hash of the last invalid content, so it is reported once
        metrics.policy_loaded(path, digest)

    def check(self) -> None:
        """Read the file; validate it if it changed (cheap when it did not: a hash)."""
        try:
            data = Path(self.path).read_bytes()
        except OSError as err:
            # A ConfigMap update swaps the file atomically: a missing file is a real problem,
            # yet not one to act on; the running policy stays.
            self._refuse(f"os:{err.errno}", f"cannot read the policy file: "
                                            f"{err.strerror or err}")
            return
        digest = policy_digest(data)
        if digest == self.running:
            if self.pending is not None:  # changed, then changed back before a cycle took it
                log.info("policy file is back to the running policy", policy=self.path)
            self.pending, self._refused = None, ""
            return
        if digest == self._refused or (self.pending and digest == self.pending.digest):
            return
        try:
            policy = parse_policy(self.path, data, PLUGINS)
            check(policy)
        except InputError as err:
            self._refuse(digest, str(err))
            return
        self.pending = PendingPolicy(policy, digest)
        log.info("policy file changed; it applies at the next cycle", policy=self.path,
                 hash=digest[:12])

    def _refuse(self, digest: str, problem: str) -> None:
        if digest == self._refused:
            return
        self._refused = digest
        self.pending = None  # a valid change followed by an invalid one: neither applies
        self.metrics.policy_reloads.labels("failed").inc()
        log.error("policy not reloaded; the running policy stays", policy=self.path,
                  error=problem)

    def take(self) -> PendingPolicy | None:
        pending, self.pending = self.pending, None
        return pending

    def applied(self, pending: PendingPolicy) -> None:
        self.running = pending.digest
        self._refused = ""
        self.metrics.policy_reloads.labels("success").inc()
        self.metrics.policy_loaded(self.path, pending.digest)

    def not_applied(self, pending: PendingPolicy, problem: str) -> None:
        """The loop could not apply a valid policy (it changes how the process runs)."""
        self._refuse(pending.digest, problem)


def check(policy: Policy) -> None:
    from desched.framework.runner import check_policy

    check_policy(policy)
