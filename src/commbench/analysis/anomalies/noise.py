"""The noise every anomaly test is held against: the relative spread of a curve's per-size medians,
and a spread estimate that heavy tails cannot shrink."""

from __future__ import annotations

import numpy as np

from commbench.analysis.constants import Z_95
from commbench.analysis.models import Curve, quiet_nanmedian, robust_sd

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


def launch_levelled(times) -> np.ndarray:
    """`times` (n_sizes, n_launches, n_samples) with each launch brought to the common level; other
    shapes as they are.

    Launches of one row can differ as a whole (measured between virtual nodes here: 0.73x to 1.36x of
    the others at every size). A launch's level is
    not noise between sizes, but left in, the median across launches takes its value from a different
    launch at each size and zigzags by that spread, hiding a switch every launch shows. Each launch's
    level is the median over sizes of its medians against the sizes' medians across launches, so a
    launch's own anomaly (one slow size) cannot move it; the median level stays 1, so times keep
    their scale.
    """
    times = np.asarray(times, dtype=float)
    if times.ndim != 3 or times.shape[1] < 2:
        return times
    launch_medians = quiet_nanmedian(times, axis=2)
    relative = launch_medians / quiet_nanmedian(launch_medians, axis=1)[:, None]
    level = quiet_nanmedian(relative, axis=0)
    level = level / quiet_nanmedian(level, axis=0)
    level = np.where(np.isfinite(level) & (level > 0), level, 1.0)
    return times / level[None, :, None]
