"""The noise every anomaly test is held against: the relative spread of a curve's per-size medians,
and a spread estimate that heavy tails cannot shrink."""

from __future__ import annotations

import numpy as np

from commlens.analysis.constants import Z_95
from commlens.analysis.models import Curve, quiet_nanmedian, robust_sd

# No clock or timer pins a median down better than this (relative); it keeps a
# noiseless curve from making every rounding error significant.
RELATIVE_NOISE_FLOOR = 1e-4


def tail_aware_spread(values) -> float:
    """Standard deviation judged by the MAD or by the central 95%, whichever is wider.

    Medians of a few heavy-tailed samples have heavier tails than a Gaussian; the
    central 95% then says more about the extremes a test has to survive.
    """
    values = np.asarray(values, float)
    low, high = np.percentile(values, [2.5, 97.5])
    return max(robust_sd(values), (high - low) / (2 * Z_95))


def relative_noise(curve: Curve, fit_s) -> np.ndarray:
    """Per size, the relative standard deviation of its median, as seen between sizes.

    Two estimates, each robust to what fools the other, and the smaller is kept:
    the spread of the medians around `fit_s` (a robust structural fit), which
    dense periodic effects (a slow size in every four) cannot inflate; and the
    spread of each median around the straight line through its two neighbours
    (exact for any alpha-beta curve, scaled by what the comparison adds), which a
    staircase the fit does not yet know of cannot inflate. Sizes whose own samples
    are noisier keep their own standard error. An underestimate is caught later:
    every test scales with how much the final model leaves (see detect).
    """
    x, y = curve.sizes.astype(float), curve.median_s
    left, right = x[1:-1] - x[:-2], x[2:] - x[1:-1]
    w_left, w_right = right / (left + right), left / (left + right)
    between = (y[1:-1] - (w_left * y[:-2] + w_right * y[2:])) / y[1:-1] / np.sqrt(1 + w_left ** 2 + w_right ** 2)
    around_fit = y / fit_s - 1
    level = max(min(robust_sd(between), robust_sd(around_fit)), RELATIVE_NOISE_FLOOR)
    own = np.nan_to_num(curve.median_rel_se, nan=0.0)
    return np.maximum(level, own)


# A launch's host can change speed part-way through it. Between two virtual nodes here, 6 of 104 launches
# of an Open MPI ping-pong ran their first 2 to 18 of 29 points at 0.6 times the time of the rest, the
# change at one point of the measurement order, and 19 ran wholly at the faster speed. Sizes are
# shuffled per launch, so such a spell falls on scattered sizes, and the medians across launches mix the
# two speeds size by size. Each launch is given two levels, before and after the one place in its order that best
# splits it, each run this many points at least: one point off is a size's own anomaly. (With three,
# a two-point spell at a launch's start was left in, and one of 60 synthetic curves without a switch
# gave one, score 6.1.)
MIN_SPELL = 2
# The levels and the sizes' medians they are measured against are found in turn, until no level moves
# by more than this (log scale: 0.1%, a tenth of the noise of the best-measured curves here), or for
# so many passes. They settle in 5-10 passes; at 1e-9 they crept on for all 20.
SPELL_TOLERANCE = 1e-3
MAX_SPELL_PASSES = 20
# A launch of more sizes than this is split only at this many places, evenly spaced in its order: the
# search costs a median per place, per launch and pass.
MAX_SPELL_SPLITS = 256


def launch_levelled(times, positions=None) -> np.ndarray:
    """`times` (n_sizes, n_launches, n_samples) with each launch brought to the common level; other
    shapes as they are.

    Launches of one row can differ as a whole (measured between virtual nodes here: 0.73x to 1.36x of
    the others at every size). A launch's level is
    not noise between sizes, but left in, the median across launches takes its value from a different
    launch at each size and zigzags by that spread, hiding a switch every launch shows. Each launch's
    level is the median over sizes of its medians against the sizes' medians across launches, so a
    launch's own anomaly (one slow size) cannot move it; the median level stays 1, so times keep
    their scale.

    `positions` (n_sizes, n_launches): where in its launch each point was measured (0: first; negative:
    not known), as the dataset's `position`. With them each launch is levelled along its measurement
    order as well: two levels, before and after the point where its host changed speed (MIN_SPELL).
    """
    times = np.asarray(times, dtype=float)
    if times.ndim != 3 or times.shape[1] < 2:
        return times
    levelled = times / _launch_levels(quiet_nanmedian(times, axis=2))[None, :, None]
    if positions is None:
        return levelled
    positions = np.asarray(positions)
    if positions.shape != times.shape[:2]:
        raise ValueError(f"positions must be (n_sizes, n_launches) {times.shape[:2]}, got {positions.shape}")
    orders = [_measured_order(positions[:, launch], levelled[:, launch]) for launch in range(times.shape[1])]
    known = np.zeros(positions.shape, bool)
    for launch, order in enumerate(orders):
        known[order, launch] = True
    if not known.any():
        return levelled
    log_medians = np.log(quiet_nanmedian(levelled, axis=2))
    levels = np.zeros(log_medians.shape)
    for _ in range(MAX_SPELL_PASSES):
        against = quiet_nanmedian(log_medians - levels, axis=1)
        updated = np.zeros(log_medians.shape)
        for launch, order in enumerate(orders):
            updated[order, launch] = _two_levels(log_medians[order, launch] - against[order])
        updated[known] -= np.median(updated[known])     # the median level stays 1
        settled = np.abs(updated - levels).max() <= SPELL_TOLERANCE
        levels = updated
        if settled:
            break
    return levelled / np.exp(levels)[:, :, None]


def _launch_levels(launch_medians: np.ndarray) -> np.ndarray:
    """(n_launches,) each launch's level, its median over sizes against the sizes' medians; median 1."""
    relative = launch_medians / quiet_nanmedian(launch_medians, axis=1)[:, None]
    level = quiet_nanmedian(relative, axis=0)
    level = level / quiet_nanmedian(level, axis=0)
    return np.where(np.isfinite(level) & (level > 0), level, 1.0)


def _measured_order(positions: np.ndarray, times: np.ndarray) -> np.ndarray:
    """One launch's sizes (indices) with a known position and time, in the order they were measured."""
    known = np.flatnonzero((positions >= 0) & np.isfinite(quiet_nanmedian(times, axis=1)))
    return known[np.argsort(positions[known], kind="stable")]


def _two_levels(values: np.ndarray) -> np.ndarray:
    """`values` (one launch's, in measured order) as two runs, each at its median: split where the
    absolute deviations from the two medians are least, each run MIN_SPELL values at least; one run
    where no split does better or the launch is too short to split."""
    whole = np.full(values.size, np.median(values)) if values.size else values
    places = np.arange(MIN_SPELL, values.size - MIN_SPELL + 1)
    if places.size == 0:
        return whole
    if places.size > MAX_SPELL_SPLITS:
        places = np.unique(np.linspace(places[0], places[-1], MAX_SPELL_SPLITS).round().astype(int))
    # One row per place: the values before it, NaN after (and the other way round).
    first = np.arange(values.size)[None, :] < places[:, None]
    before, after = np.where(first, values, np.nan), np.where(first, np.nan, values)
    level_before, level_after = np.nanmedian(before, axis=1), np.nanmedian(after, axis=1)
    costs = (np.nansum(np.abs(before - level_before[:, None]), axis=1)
             + np.nansum(np.abs(after - level_after[:, None]), axis=1))
    best = int(np.argmin(costs))
    if costs[best] >= np.abs(values - whole).sum():
        return whole
    return np.where(first[best], level_before[best], level_after[best])
