"""What reading a scheduler configuration finds besides its values: the errors for which
kube-scheduler would refuse the file, warnings, and keys no schema names."""

from __future__ import annotations

from dataclasses import dataclass, field

from desched.decoding.unknown_fields import describe


@dataclass(slots=True)
class Findings:
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # warnings, without the file name
    unknown: list[tuple[str, str | None]] = field(default_factory=list)  # place, nearest name

    def warn(self, place: str, text: str) -> None:
        self.notes.append(f"{place}: {text}" if place else text)

    def warnings(self, source: str) -> list[str]:
        """Every warning as one line naming the file: unknown fields first."""
        return describe(source, self.unknown) + [f"{source}: {n}" for n in self.notes]
