"""Which release first shows a change: the halving search over releases in version order, and what
counts as a release having the change. Pure functions of recorded outcomes; measuring is the caller's.

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

import math
from dataclasses import dataclass

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
