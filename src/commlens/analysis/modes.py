"""Launches that ran in two modes: a curve whose launches fall into two groups, one running every size a
given factor slower than the other.

Open MPI's on-node launches on a shared host settle at one of two speeds for a whole launch (the slow
one 1.6-1.7 times slower here, in about half the launches); a slow node or a noisy neighbour does the
same to the odd launch. Such a launch moves all its sizes alike, so its *level* (the median over sizes
of how far its values lie from the curve's per-size median, on the log scale) stands apart from the
others' while its shape does not. A curve is in two modes where its launches' levels split into two
groups whose gap is at least MODE_FACTOR and at least MODE_SEPARATION times the spread within the
groups: a shift that large and that clean is not launch-to-launch noise.

Comparisons say so (commlens.analysis.compare: `baseline_modes`, `candidate_modes`). Where each mode
holds two launches or more, a comparison leaves the slow mode's launches out and compares in the fast
mode (always the fast one, so that both rows are compared in the same mode): Open MPI's launches with a
raised eager limit ran 3.5 times slower in 2 of 8 launches, their eager copies slower than the default's
rendezvous, and with them in, a 3-4 fold change at 5-15 KiB was called at 4 of 11 sizes. Leaving out is
not shifting: bringing one row's slow launches to its fast level while the other row kept whatever its
launches were made the rows differ by the mode's factor, and a quarter of no-change comparisons of
two-mode kernels called a change (benchmarks/compare_validation.py). A lone launch far from the others
is said but kept: three launches cannot tell a second mode from a kernel whose launches vary by 25%; it
is launch-to-launch variation, which the launch-level test counts, and launches until decided runs more
rounds while a curve's launches disagree so.
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
# What leaving a mode out asks beyond that (`replicated`): two launches in each mode, a gap this large and
# this many times the spread within the modes. Five launches of a kernel that varies by 25% split into two
# groups 6 spreads apart by chance in about a tenth of curves, and leaving the smaller out moves the row by
# their gap; the host's real modes lie 1.6-3.5 times apart, each mode's launches within a few percent.
REPLICATED_FACTOR = 1.5
REPLICATED_SEPARATION = 12.0
@dataclass(frozen=True)
class Modes:
    """What `find_modes` found for one curve: the slow launches (indices), and the factor they ran slower."""

    slow: tuple[int, ...]
    factor: float
    replicated: bool      # each mode holds two launches or more, far apart: a second mode, not noise

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
    clear = gap >= np.log(REPLICATED_FACTOR) and gap >= REPLICATED_SEPARATION * spread
    return Modes(slow=tuple(sorted(int(i) for i in order[split:])), factor=float(np.exp(gap)),
                 replicated=min(fast.size, slow.size) >= 2 and clear)
