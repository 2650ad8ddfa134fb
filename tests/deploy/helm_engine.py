"""Helm itself, for the chart tests: helm-python-sdk (a test dependency) is Helm's Go SDK
(helm.sh/helm/v4) built into a library, so a chart renders here exactly as `helm template` renders
it, on every machine the suite runs on, with nothing to download at test time.

`render` gives what `helm template RELEASE CHART --namespace NAMESPACE -f values.yaml` prints, as
objects: the user's values coalesced over the chart's values.yaml, every template rendered, the
empty documents and NOTES.txt left out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from helm_python.chart import Chart
from helm_python.chart import lint as sdk_lint
from helm_python.errors import HelmError

__all__ = ["HelmError", "crds", "lint", "notes", "render", "render_error"]


def _manifests(chart: Path, values: dict[str, Any], release: str,
               namespace: str) -> dict[str, str]:
    with Chart.load(str(chart)) as loaded:
        return loaded.render(values=values, name=release, namespace=namespace, is_install=True)


def render(chart: Path, values: dict[str, Any], *, release: str = "desched",
           namespace: str = "kube-system") -> list[dict[str, Any]]:
    """The chart's objects for these values, in the templates' order."""
    out = _manifests(chart, values, release, namespace)
    text = "\n---\n".join(body for path, body in sorted(out.items())
                          if not path.endswith("NOTES.txt"))
    return [doc for doc in yaml.safe_load_all(text) if doc]


def render_error(chart: Path, values: dict[str, Any], *, release: str = "desched",
                 namespace: str = "kube-system") -> str:
    """The message a render that must fail fails with (a `fail` or `required` of the chart)."""
    try:
        _manifests(chart, values, release, namespace)
    except HelmError as err:
        return str(err)
    raise AssertionError(f"{chart.name} rendered without an error: {values}")


def notes(chart: Path, values: dict[str, Any], *, release: str = "desched",
          namespace: str = "kube-system") -> str:
    """NOTES.txt as `helm install` prints it."""
    out = _manifests(chart, values, release, namespace)
    return next(body for path, body in out.items() if path.endswith("NOTES.txt"))


def crds(chart: Path) -> list[str]:
    """The chart's crds/ files as Helm loads them (what `helm install` applies first)."""
    with Chart.load(str(chart)) as loaded:
        return [crd["data"] for crd in loaded.crds]


def lint(chart: Path, values: dict[str, Any]) -> dict[str, Any]:
    """`helm lint --strict`: {"errors": [...], "messages": [{"severity": ..., ...}]}."""
    return sdk_lint(str(chart), values, strict=True)
