"""The `moves` block: desched's policy-level extension that turns evictions into two-phase moves
(docs/moves.md). Accepted at the top level of a v1alpha2 DeschedulerPolicy and of a Koordinator
DeschedulerConfiguration; absent, every eviction is the plain one upstream makes.

```yaml
moves:
  surgeFirst: true               # restart a Deployment that can surge, not evict its last pods
  maxUnavailablePerWorkload: 1   # at most N pods of one workload unavailable because of desched
  minDelayBetweenMoves: 10s      # the next move of a workload waits this long after its last
  replacementTimeout: 10m        # stop waiting for a replacement to be Ready, and say so
```

Decoded strictly (an unknown key is an error, as in plugin args: a misspelt switch must not
silently leave evictions plain); the durations are Go durations, parsed by the policy decoder.
"""

from __future__ import annotations

import msgspec

from desched.util.duration import Duration, format_duration, parse_duration

KEY = "moves"


class MovesArgs(msgspec.Struct, rename="camel", forbid_unknown_fields=True, omit_defaults=True,
                frozen=True):
    surge_first: bool = False
    # None: no pacing. Kept a plain int: the validator names a negative or zero one.
    max_unavailable_per_workload: int | None = None
    min_delay_between_moves: Duration | None = None
    replacement_timeout: Duration | None = None

    @property
    def active(self) -> bool:
        """Whether any move is other than a plain eviction: only then are evictions planned."""
        return bool(self.surge_first or self.max_unavailable_per_workload is not None
                    or self.min_delay)

    @property
    def min_delay(self) -> float:
        """Seconds; 0 without a delay."""
        text = self.min_delay_between_moves
        return parse_duration(text) if text else 0.0

    @property
    def timeout(self) -> float | None:
        """Seconds a workload waits for one replacement before desched stops waiting; None:
        as long as it takes."""
        text = self.replacement_timeout
        return parse_duration(text) if text else None

    def describe(self) -> str:
        """The settings in a few words, for logs and reports."""
        parts = []
        if self.surge_first:
            parts.append("surge-first restarts")
        if self.max_unavailable_per_workload is not None:
            parts.append(f"at most {self.max_unavailable_per_workload} unavailable pod(s) per "
                         f"workload")
        if self.min_delay:
            parts.append(f"{format_duration(self.min_delay)} between a workload's moves")
        timeout = self.timeout
        if timeout is not None:
            parts.append(f"replacements waited for {format_duration(timeout)} at most")
        return ", ".join(parts) or "plain evictions"


def validate(args: MovesArgs) -> list[str]:
    """One message per problem, each naming its key (the loaders aggregate them)."""
    errs = []
    n = args.max_unavailable_per_workload
    if n is not None and n < 1:
        errs.append(f"{KEY}.maxUnavailablePerWorkload: Invalid value: {n}: must be at least 1 "
                    f"(leave it out for no pacing)")
    for key, text in (("minDelayBetweenMoves", args.min_delay_between_moves),
                      ("replacementTimeout", args.replacement_timeout)):
        if text is not None and parse_duration(text) < 0:
            errs.append(f'{KEY}.{key}: Invalid value: "{text}": must not be negative')
    return errs


def warnings(args: MovesArgs) -> list[str]:
    """Settings that are valid but do nothing, one line each (the loaders name the file)."""
    found = []
    if not args.active:
        found.append(f"{KEY}: neither surgeFirst, maxUnavailablePerWorkload nor "
                     f"minDelayBetweenMoves is set, so every move stays a plain eviction")
    if args.replacement_timeout is not None and args.max_unavailable_per_workload is None:
        found.append(f"{KEY}.replacementTimeout: nothing waits for a replacement without "
                     f"maxUnavailablePerWorkload; it has no effect")
    return found
