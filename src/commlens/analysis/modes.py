"""Launches that ran in two modes: a curve whose launches fall into two groups, one running every size a
given factor slower than the other.

Open MPI's on-node launches on a shared host settle at one of two speeds for a whole launch (the slow
one 1.6-1.7 times slower here, in about half the launches); a slow node or a noisy neighbour does the
same to the odd launch. Such a launch moves all its sizes alike, so its *level* (the median over sizes
of how far its values lie from the curve's per-size median, on the log scale) stands apart from the
others' while its shape does not. A curve is in two modes where its launches' levels split into two
groups whose gap is at least MODE_FACTOR and at least MODE_SEPARATION times the spread within the
groups: a shift that large and that clean is not launch-to-launch noise.

Comparisons say so (commlens.analysis.compare: `baseline_modes`, `candidate_modes`) but do not block
on the mode: three launches cannot tell a second mode from a kernel whose launches vary by 25%, and
bringing one row's slow launches to its fast level while the other row keeps its own (where its modes
are less clear) made the rows differ by the mode's factor: a quarter of such no-change comparisons
called a change in the validation (benchmarks/compare_validation.py). A mode left in is launch-to-launch
variation, which the launch-level test counts; launches until decided runs more rounds where it leaves a
cell undecided.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

# The smallest gap between the two groups' levels that is called two modes (1.3 times slower), and how many
# times the spread within the groups it must be.
MODE_FACTOR = 1.3
MODE_SEPARATION = 6.0
# Launches a curve needs before its levels can be told apart from noise: one group must hold two, to show
# how far launches of one mode lie apart.
MIN_LAUNCHES = 3
@dataclass(frozen=True)
class Modes:
    """What `find_modes` found for one curve: the slow launches (indices), and the factor they ran slower."""

    slow: tuple[int, ...]
    factor: float
    replicated: bool      # each mode holds two launches or more: a second mode, not one slow launch

    def describe(self, labels=None) -> str:
        names = [str(labels[i]) if labels is not None else str(i) for i in self.slow]
        which = "launch" if len(names) == 1 else "launches"
        text = f"{which} {', '.join(names)} {self.factor:.2g}x slower at every size"
        return text if self.replicated else text + " (a second mode or one slow launch: too few launches to tell)"


def launch_levels(log_values: np.ndarray) -> np.ndarray:
    """Each launch's level (sizes, launches -> launches): the median over sizes of its log value less the
    curve's median at that size; NaN for a launch that measured nothing."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        centre = np.nanmedian(log_values, axis=-1, keepdims=True)
        return np.nanmedian(log_values - centre, axis=0)


def find_modes(log_values: np.ndarray) -> Modes | None:
    """The two modes of one curve's launches (log values, sizes x launches), or None where it has one."""
    levels = launch_levels(log_values)
    measured = np.flatnonzero(np.isfinite(levels))
    if measured.size < MIN_LAUNCHES:
        return None
    order = measured[np.argsort(levels[measured])]
    sorted_levels = levels[order]
    gaps = np.diff(sorted_levels)
    split = int(np.argmax(gaps)) + 1
    fast, slow = sorted_levels[:split], sorted_levels[split:]
    gap = slow.mean() - fast.mean()
    residual = np.concatenate([fast - fast.mean(), slow - slow.mean()])
    dof = residual.size - 2
    spread = np.sqrt(np.sum(residual ** 2) / dof) if dof > 0 else np.inf
    if gap < np.log(MODE_FACTOR) or gap < MODE_SEPARATION * spread:
        return None
    return Modes(slow=tuple(sorted(int(i) for i in order[split:])), factor=float(np.exp(gap)),
                 replicated=min(fast.size, slow.size) >= 2)
