"""`desched tune`'s outputs by name: the summary, the policy file and json (tune/output.py), the
page (tune/html.py, which builds on output's pieces)."""

from __future__ import annotations

import json
from collections.abc import Mapping

from desched.tune.html import render_html
from desched.tune.output import render_policy, render_text, to_json_obj
from desched.tune.tuner import Report, TuneResult


def render(result: TuneResult, output: str, reports: Mapping[Report, str] | None = None) -> str:
    """`reports`: for html, the simulate reports the page embeds (Tuner.reports)."""
    if output == "html":
        return render_html(result, reports or {})
    if output == "yaml":
        return render_policy(result)
    if output == "json":
        return json.dumps(to_json_obj(result), indent=2, default=str) + "\n"
    return render_text(result)
