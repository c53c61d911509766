"""Which release first shows a change: the halving search over releases in version order, what
counts as a release having the change, and what a bisection records (BisectionRecord: bisect.json, a
campaign's bisections.json, read back by the report). Pure functions of recorded outcomes; measuring
is the caller's (commlens.orchestrate.bisection_steps).

The releases are ordered oldest first: index 0 is the baseline (without the change, by definition),
the last is the candidate (with it, once its own step confirms it against the baseline). Each step
measures one release against the baseline and records one outcome:

    changed     the release shows the change
    unchanged   the release does not show it
    undecided   the measurement cannot tell (more launches would)
    failed      the release could not be built or launched

As `git bisect skip` does, an undecided or failed release is stepped over: the search continues on
the remaining releases of the range, and where such a release sits between the last release without
the change and the first with it, the answer names every release the change may have come with.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from commlens.io.atomic import write_text
from commlens.units import format_duration, format_number, format_size

CHANGED, UNCHANGED, UNDECIDED, FAILED = "changed", "unchanged", "undecided", "failed"
OUTCOMES = (CHANGED, UNCHANGED, UNDECIDED, FAILED)
DIRECTIONS = ("regressed", "improved")


def next_release(outcomes: list[str | None]) -> int | None:
    """The index of the release to measure next, or None when the search is over. `outcomes` has one
    entry per release, oldest first, None where not measured yet; the baseline's entry (index 0) is
    ignored: it is the reference every step is measured against. The candidate is measured first, to
    confirm the change; then the release nearest the middle of the range still open."""
    _check(outcomes)
    last = len(outcomes) - 1
    if outcomes[last] is None:
        return last
    if outcomes[last] != CHANGED:
        return None
    low, high = _bounds(outcomes)
    open_releases = [i for i in range(low + 1, high) if outcomes[i] is None]
    if not open_releases:
        return None
    middle = (low + high) / 2
    return min(open_releases, key=lambda i: (abs(i - middle), i))


@dataclass(frozen=True)
class Conclusion:
    """What the search found. `first`: the index of the first release with the change when it is
    known exactly; `suspects`: the releases it may have come with (one: `first`; several where
    releases between could not be decided or built); `last_without`: the newest release measured
    without it (0: the baseline); `confirmed`: whether the candidate showed the change at all."""

    confirmed: bool
    first: int | None
    suspects: tuple[int, ...]
    last_without: int


def conclude(outcomes: list[str | None]) -> Conclusion:
    """The answer of a finished (or stopped) search over `outcomes` (as for next_release)."""
    _check(outcomes)
    if outcomes[-1] != CHANGED:
        return Conclusion(confirmed=False, first=None, suspects=(), last_without=0)
    low, high = _bounds(outcomes)
    suspects = tuple(i for i in range(low + 1, high + 1) if outcomes[i] != UNCHANGED)
    return Conclusion(confirmed=True, first=high if suspects == (high,) else None, suspects=suspects,
                      last_without=low)


def _bounds(outcomes: list[str | None]) -> tuple[int, int]:
    """(newest release without the change below the first with it, first release with it)."""
    high = next(i for i in range(1, len(outcomes)) if outcomes[i] == CHANGED)
    low = max([0] + [i for i in range(1, high) if outcomes[i] == UNCHANGED])
    return low, high


def _check(outcomes: list[str | None]) -> None:
    if len(outcomes) < 2:
        raise ValueError(f"a bisection needs a baseline and a candidate release; got {len(outcomes)} release(s)")
    unknown = sorted({str(o) for o in outcomes[1:] if o is not None and o not in OUTCOMES})
    if unknown:
        raise ValueError(f"unknown outcome(s) {', '.join(unknown)}; allowed: {', '.join(OUTCOMES)}")


# ----------------------------------------------------------------------------- one cell's outcome

def cell_outcome(verdict: str, ratio_low: float, ratio_high: float, reference_ratio: float) -> str:
    """Whether one cell of a release-against-baseline comparison shows the change the candidate
    showed (`reference_ratio`: the candidate's ratio to the baseline in that cell).

    The dividing line is the geometric midpoint between no change and the candidate's change
    (sqrt(reference_ratio)): `changed` where compare calls the cell in the candidate's direction and
    the whole interval lies past the line, `unchanged` where the whole interval lies short of it,
    `undecided` otherwise. The line, not compare's "unchanged", is what a release is held to: a 15%
    wobble between releases is no sign of a 5-fold regression, and a release that carries most of
    the change is where it came."""
    if not (reference_ratio > 0 and math.isfinite(reference_ratio)) or reference_ratio == 1:
        raise ValueError(f"the candidate's ratio must be a positive change, not {reference_ratio!r}")
    if not (math.isfinite(ratio_low) and math.isfinite(ratio_high)):
        return UNDECIDED
    line = math.sqrt(reference_ratio)
    slower = reference_ratio > 1
    past = ratio_low > line if slower else ratio_high < line
    short = ratio_high < line if slower else ratio_low > line
    if past and verdict == ("regressed" if slower else "improved"):
        return CHANGED
    if short:
        return UNCHANGED
    return UNDECIDED


def release_outcome(cell_outcomes: list[str]) -> str:
    """A release's outcome from its watched cells': changed or unchanged where all of them agree,
    undecided where they do not (or none was measured)."""
    distinct = set(cell_outcomes)
    if distinct == {CHANGED}:
        return CHANGED
    if distinct == {UNCHANGED}:
        return UNCHANGED
    return UNDECIDED


# ----------------------------------------------------------------------------- what a bisection records

@dataclass(frozen=True)
class WatchedCell:
    """One (kernel, placement, size) cell a bisection watches."""

    kernel: str
    placement: str
    size: int

    def describe(self) -> str:
        """'pingpong.send 1N2P 8 B': how the record and its table name the cell."""
        return f"{self.kernel} {self.placement} {format_size(self.size)}"

    @property
    def key(self) -> tuple[str, str, int]:
        return self.kernel, self.placement, self.size


@dataclass(frozen=True)
class StepCell(WatchedCell):
    """One watched cell as a step measured it: compare's verdict and ratio (the release's time over the
    baseline's) with its interval; where the step measured the candidate too, the candidate's verdict and
    ratio in that cell (`reference_*`: the change the release is held to); `outcome` once judged."""

    verdict: str
    ratio: float | None
    ratio_low: float | None
    ratio_high: float | None
    q_value: float | None
    reference_verdict: str | None = None
    reference_ratio: float | None = None
    outcome: str | None = None

    def to_json(self) -> dict:
        entry = {"kernel": self.kernel, "placement": self.placement, "size": self.size, "verdict": self.verdict,
                 "ratio": self.ratio, "ratio_low": self.ratio_low, "ratio_high": self.ratio_high,
                 "q_value": self.q_value}
        if self.reference_verdict is not None:    # the step measured the candidate beside the release
            entry.update(reference_verdict=self.reference_verdict, reference_ratio=self.reference_ratio)
        return _with_optional(entry, outcome=self.outcome)

    @classmethod
    def from_json(cls, entry: dict) -> StepCell:
        return cls(kernel=entry["kernel"], placement=entry["placement"], size=int(entry["size"]),
                   verdict=entry["verdict"], ratio=entry.get("ratio"), ratio_low=entry.get("ratio_low"),
                   ratio_high=entry.get("ratio_high"), q_value=entry.get("q_value"),
                   reference_verdict=entry.get("reference_verdict"), reference_ratio=entry.get("reference_ratio"),
                   outcome=entry.get("outcome"))


@dataclass(frozen=True)
class BisectionStep:
    """One step: a small campaign of `release` against the baseline (and, after the first step, beside
    the candidate), `launches` a side, with its outcome (OUTCOMES) and, where it could not be judged or
    measured, why. `launches` is None in records from before an undecided step could grow."""

    step: int
    release: str
    version: str
    campaign: str                  # the step's campaign file
    launches: int | None
    cells: tuple[StepCell, ...]
    outcome: str | None = None     # None until the step is judged
    reason: str | None = None
    wall_s: float = 0.0
    dataset: str | None = None
    method: str | None = None      # compare's method, where the step came to a comparison

    def to_json(self) -> dict:
        entry = _with_optional({"release": self.release, "version": self.version, "campaign": self.campaign},
                               launches=self.launches)
        entry["cells"] = [cell.to_json() for cell in self.cells]
        entry = _with_optional(entry, dataset=self.dataset, method=self.method)
        entry.update(step=self.step, wall_s=self.wall_s, outcome=self.outcome)
        return _with_optional(entry, reason=self.reason)

    @classmethod
    def from_json(cls, entry: dict) -> BisectionStep:
        return cls(step=int(entry["step"]), release=entry["release"], version=entry["version"],
                   campaign=entry["campaign"], launches=entry.get("launches"),
                   cells=tuple(StepCell.from_json(cell) for cell in entry.get("cells", [])),
                   outcome=entry["outcome"], reason=entry.get("reason"), wall_s=entry["wall_s"],
                   dataset=entry.get("dataset"), method=entry.get("method"))


@dataclass(frozen=True)
class RecordedConclusion:
    """A Conclusion with the releases named instead of indexed."""

    confirmed: bool
    first: str | None
    suspects: tuple[str, ...]
    last_without: str

    @classmethod
    def naming(cls, conclusion: Conclusion, releases: list[str]) -> RecordedConclusion:
        """`conclusion` over `releases` (their names, in the search's order)."""
        return cls(confirmed=conclusion.confirmed,
                   first=None if conclusion.first is None else releases[conclusion.first],
                   suspects=tuple(releases[i] for i in conclusion.suspects),
                   last_without=releases[conclusion.last_without])

    def to_json(self) -> dict:
        return {"confirmed": self.confirmed, "first": self.first, "suspects": list(self.suspects),
                "last_without": self.last_without}

    @classmethod
    def from_json(cls, entry: dict) -> RecordedConclusion:
        return cls(confirmed=bool(entry["confirmed"]), first=entry.get("first"),
                   suspects=tuple(entry.get("suspects", ())), last_without=entry["last_without"])


@dataclass(frozen=True)
class BisectionRecord:
    """What a bisection found (a bisection's bisect.json, an entry of a campaign's bisections.json):
    the two ends, the family and its releases searched in order, the specs left out and why, the cells
    watched, how each step compared (`min_effect`, `confidence`, `launches` a side growing up to
    `max_launches`: None in records from before steps could grow), the steps, and the answer."""

    baseline: str
    candidate: str
    family: str
    releases: tuple[str, ...]
    left_out: tuple[str, ...]
    cells: tuple[str, ...]         # WatchedCell.describe() of each cell watched to the end
    min_effect: float
    confidence: float
    launches: int
    max_launches: int | None
    steps: tuple[BisectionStep, ...]
    conclusion: RecordedConclusion
    summary: str
    # The control variables whose defaults differ between the two releases it ends between, and whether a
    # size-valued one lies at the watched sizes (analysis.configuration); empty in records from before.
    settings: tuple[str, ...] = ()

    def to_json(self) -> dict:
        entry = {"baseline": self.baseline, "candidate": self.candidate, "family": self.family,
                 "releases": list(self.releases), "left_out": list(self.left_out), "cells": list(self.cells),
                 "min_effect": self.min_effect, "confidence": self.confidence, "launches": self.launches}
        entry = _with_optional(entry, max_launches=self.max_launches)
        entry.update(steps=[step.to_json() for step in self.steps], conclusion=self.conclusion.to_json(),
                     summary=self.summary)
        return _with_optional(entry, settings=list(self.settings) or None)

    @classmethod
    def from_json(cls, entry: dict) -> BisectionRecord:
        return cls(baseline=entry["baseline"], candidate=entry["candidate"], family=entry["family"],
                   releases=tuple(entry["releases"]), left_out=tuple(entry.get("left_out", ())),
                   cells=tuple(entry["cells"]), min_effect=entry["min_effect"], confidence=entry["confidence"],
                   launches=int(entry["launches"]), max_launches=entry.get("max_launches"),
                   steps=tuple(BisectionStep.from_json(step) for step in entry["steps"]),
                   conclusion=RecordedConclusion.from_json(entry["conclusion"]), summary=entry["summary"],
                   settings=tuple(entry.get("settings", ())))


@dataclass(frozen=True)
class FailedBisection:
    """A campaign's bisection that could not run (a spec missing, a step's workflow failing)."""

    baseline: str
    candidate: str
    error: str

    def to_json(self) -> dict:
        return {"baseline": self.baseline, "candidate": self.candidate, "error": self.error}

    @classmethod
    def from_json(cls, entry: dict) -> FailedBisection:
        return cls(baseline=entry["baseline"], candidate=entry["candidate"], error=entry["error"])


Bisection = BisectionRecord | FailedBisection

# Where a campaign keeps what its bisections found (results/<campaign>/<this>), which the collection puts
# in the dataset's attrs["bisections"] as it is.
BISECTIONS_FILE = "bisections.json"
# Where a bisection keeps its record, in its own folder beside its steps' campaign files.
BISECTION_FILE = "bisect.json"


def bisection_from_json(entry: dict) -> Bisection:
    """A record as bisect.json or an entry of bisections.json holds it: the error form where it has one."""
    return FailedBisection.from_json(entry) if "error" in entry else BisectionRecord.from_json(entry)


def read_bisections(text: str) -> list[Bisection]:
    """The records of a campaign's bisections.json (or of a dataset's attrs["bisections"])."""
    return [bisection_from_json(entry) for entry in json.loads(text)]


def bisection_text(record: Bisection) -> str:
    """The JSON of one record, as bisect.json and `commlens bisect --json` hold it."""
    return json.dumps(record.to_json(), indent=1) + "\n"


def write_bisection(path, record: Bisection) -> None:
    write_text(path, bisection_text(record))


def write_bisections(path, records: list[Bisection]) -> None:
    write_text(path, json.dumps([record.to_json() for record in records], indent=1) + "\n")


def _with_optional(entry: dict, **optional) -> dict:
    """`entry` with each of `optional` that is not None: keys older records (or failed steps) lack."""
    return {**entry, **{key: value for key, value in optional.items() if value is not None}}


def table_lines(record: BisectionRecord) -> list[str]:
    """The record as `commlens bisect` prints it: how steps compared, a row per step (per watched cell,
    where several), the answer."""
    many = len(record.cells) > 1
    lines = [f"bisect {record.baseline} -> {record.candidate}: {record.launches} launches a side per step, an "
             f"undecided step measured again with twice as many up to {record.max_launches}; rows compared paired "
             f"by round; changes below {record.min_effect:.0%} not reported, {record.confidence:.0%} intervals"]
    if not many:
        lines.append(f"cell: {record.cells[0] if record.cells else 'none left to watch'}")
    lines.append(f"ratio: the release's time / the baseline's; candidate's: {record.candidate}'s / the baseline's "
                 "in the same step (the change the release is held to)")
    header = ["step", "release", "launches", *(["cell"] if many else []), "verdict", "ratio", "interval",
              "candidate's", "outcome", "wall"]
    rows: list[list] = []    # text, and a step's outcome (str | None, judged by the time it is printed)
    for step in record.steps:
        for i, cell in enumerate(step.cells or [None]):
            first = i == 0
            launches = step.launches if step.launches is not None else record.launches
            rows.append([str(step.step) if first else "", step.release if first else "",
                         str(launches) if first else "",
                         *([cell.describe() if cell else ""] if many else []),
                         cell.verdict if cell else "", _number(cell.ratio if cell else None),
                         f"[{_number(cell.ratio_low)}, {_number(cell.ratio_high)}]" if cell else "",
                         _number(cell.reference_ratio if cell else None),
                         ((cell.outcome or step.outcome) if many else step.outcome) if cell
                         else f"{step.outcome}: {step.reason or ''}",
                         format_duration(step.wall_s) if first else ""])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        lines.append("  ".join(text.ljust(width) for text, width in zip(row, widths)).rstrip())
    lines.append(record.summary)
    return lines + list(record.settings)


def _number(value) -> str:
    return "" if value is None else format_number(value, 3)
