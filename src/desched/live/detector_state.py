"""LowNodeLoad's anomaly detectors kept between `desched run --once` processes.

A CronJob (the Helm chart's default kind) starts a new process for every run, so detectors held
in memory would never reach `consecutiveAbnormalities` (default 5) and LowNodeLoad would never
act. A one-cycle run therefore reads the detectors from a ConfigMap it owns (`<lease name>-state`
in the Lease's namespace) before its cycle and writes them back after it. A dry run keeps its
own key, so it counts as a real run would without touching the real run's counts.

The ConfigMap is never needed for the run to go on: a missing one starts fresh detectors, and a
refused or conflicting read or write is logged as one warning (the counts then start over).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from desched.framework.types import PersistsState
from desched.live.client import AccessDenied, ApiClient, ApiError, Unreachable
from desched.live.logging import get_logger

log = get_logger("desched.state")

KEY = "lownodeload-detectors.json"
DRY_RUN_KEY = "lownodeload-detectors-dry-run.json"


def persistent(plugins: list[tuple[str, str, object]]) -> list[tuple[str, PersistsState]]:
    """The (profile, plugin) pairs whose plugin keeps state between runs (PersistsState)."""
    return [(profile, plugin) for profile, _, plugin in plugins
            if isinstance(plugin, PersistsState)]


class DetectorState:
    """The ConfigMap holding the detectors of every profile's LowNodeLoad, by profile."""

    def __init__(self, client: ApiClient, namespace: str, name: str, dry_run: bool) -> None:
        self.client = client
        self.name = name
        self.key = DRY_RUN_KEY if dry_run else KEY
        self._path = f"/api/v1/namespaces/{namespace}/configmaps/{name}"
        self._collection = f"/api/v1/namespaces/{namespace}/configmaps"
        self.where = f"ConfigMap {namespace}/{name}"
        self._object: dict[str, Any] | None = None  # as read: its other keys are kept
        self._entries: dict[str, Any] = {}

    async def read(self) -> None:
        try:
            _, obj = await self.client.call("GET", self._path, dict[str, Any],
                                            what=f"get {self.where}", allow=(404,))
        except (ApiError, AccessDenied, Unreachable) as err:
            self._warn("cannot be read", err)
            return
        if obj is None:  # not written yet
            return
        try:
            text = (obj.get("data") or {}).get(self.key)
            entries = json.loads(text) if text else {}
            if not isinstance(entries, dict):
                raise ValueError(f"{self.key} is not a JSON object")
        except (ValueError, AttributeError) as err:
            log.warning("detector state is unreadable; LowNodeLoad's detectors start over",
                        configmap=self.where, error=str(err))
            return
        self._object, self._entries = obj, entries

    # Entries are keyed "<profile>/<name the plugin gives them>".
    def restore(self, plugins: list[tuple[str, PersistsState]], now: datetime) -> None:
        for profile, plugin in plugins:
            prefix = f"{profile}/"
            plugin.load_state({key.removeprefix(prefix): value
                               for key, value in self._entries.items()
                               if key.startswith(prefix)}, now)

    async def write(self, plugins: list[tuple[str, PersistsState]], now: datetime) -> None:
        entries = {f"{profile}/{key}": value for profile, plugin in plugins
                   for key, value in plugin.dump_state(now).items()}
        data = dict((self._object or {}).get("data") or {})
        data[self.key] = json.dumps(entries, sort_keys=True, separators=(",", ":"))
        metadata: dict[str, Any] = {"name": self.name, "labels": {
            "app.kubernetes.io/managed-by": "desched"}}
        if self._object is not None:
            metadata = {**self._object.get("metadata", {}), **metadata}
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}
        method, path = ("PUT", self._path) if self._object is not None else \
            ("POST", self._collection)
        try:
            _, self._object = await self.client.call(method, path, dict[str, Any], body=body,
                                                     what=f"write {self.where}")
        except (ApiError, AccessDenied, Unreachable) as err:
            # 409: another run wrote it since it was read (a CronJob's runs overlapping).
            self._warn("cannot be written", err)
            return
        self._entries = entries

    def _warn(self, what: str, err: Exception) -> None:
        log.warning(f"LowNodeLoad's detector state {what}; its anomaly counts start over on "
                    f"the next run (RBAC: get, create and update on this ConfigMap)",
                    configmap=self.where, error=str(err))
