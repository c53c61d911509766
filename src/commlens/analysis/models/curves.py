"""One curve reduced to what the fits need: sorted sizes, per-size medians and their uncertainty.

A curve is `sizes` in bytes (1-D) and `times` in seconds shaped (n_sizes,), (n_sizes, n_samples)
or (n_sizes, n_launches, n_samples), NaN where absent; sizes without any data are dropped. The
fits use the per-size median (with a launch axis, the median of the launches' medians), so the
heavy tail of benchmark samples (preemption, interrupts) cannot move it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from commlens.analysis.constants import MAD_TO_SD, MEDIAN_EFFICIENCY
from commlens.data.samples import quiet_nanmedian


def robust_sd(values, axis=None):
    """Standard deviation estimated from the median absolute deviation, ignoring NaN."""
    center = quiet_nanmedian(values, axis=axis)
    if axis is not None:
        center = np.expand_dims(center, axis)
    return MAD_TO_SD * quiet_nanmedian(np.abs(values - center), axis=axis)


@dataclass(frozen=True)
class Curve:
    """One curve reduced to what the fits need: sorted by size, sizes without data dropped."""

    sizes: np.ndarray            # bytes, ascending, int64
    median_s: np.ndarray         # per size: median of the launches' medians
    launch_median_s: np.ndarray  # (n_sizes, n_launches), NaN where a launch has no sample
    sorted_samples_s: np.ndarray # (n_sizes, n_launches, n_samples), ascending, NaN last
    median_rel_se: np.ndarray    # relative standard error of median_s, from the spread of the samples
    has_launch_axis: bool
    # (n_sizes, n_launches): samples each point really had, where the cube keeps only evenly spaced
    # order statistics of large points (commlens.data.samples.curve_cube); None: the cube holds them all.
    counts: np.ndarray | None = None

    @property
    def n_launches(self) -> int:
        return self.launch_median_s.shape[1]

    @property
    def stored_counts(self) -> np.ndarray:
        return np.isfinite(self.sorted_samples_s).sum(axis=2)

    @property
    def sample_counts(self) -> np.ndarray:
        return self.stored_counts if self.counts is None else self.counts


def reduce_curve(sizes, times, counts=None) -> Curve:
    """Per-size medians (and what their uncertainty needs) of one curve; see the module doc for shapes.
    `counts` (n_sizes, n_launches), with a 3-D `times`: how many samples each point really had, where
    `times` holds only evenly spaced order statistics of some points (uncertainties follow the counts)."""
    sizes = np.asarray(sizes)
    times = np.asarray(times, dtype=float)
    if sizes.ndim != 1:
        raise ValueError(f"sizes must be 1-D (bytes), got shape {sizes.shape}")
    if times.shape[:1] != sizes.shape:
        raise ValueError(f"times must have n_sizes={sizes.size} rows, got shape {times.shape}")
    if times.ndim == 1:
        cube = times[:, None, None]
    elif times.ndim == 2:
        cube = times[:, None, :]
    elif times.ndim == 3:
        cube = times
    else:
        raise ValueError(f"times must be (n_sizes,), (n_sizes, n_samples) or "
                         f"(n_sizes, n_launches, n_samples), got shape {times.shape}")
    with_data = np.isfinite(cube).any(axis=(1, 2))
    order = np.argsort(sizes[with_data], kind="stable")
    kept_sizes = sizes[with_data][order].astype(np.int64)
    if np.any(np.diff(kept_sizes) == 0):
        raise ValueError("sizes must be distinct")
    cube = cube[with_data][order]
    if counts is not None:
        counts = np.asarray(counts, dtype=np.int64).reshape(times.shape[:2])[with_data][order]
    launch_median = quiet_nanmedian(cube, axis=2)
    median = quiet_nanmedian(launch_median, axis=1)
    pooled = cube.reshape(cube.shape[0], -1)
    n_pooled = np.isfinite(pooled).sum(axis=1) if counts is None else counts.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rel_se = MEDIAN_EFFICIENCY * robust_sd(pooled, axis=1) / np.sqrt(n_pooled) / median
    return Curve(sizes=kept_sizes, median_s=median, launch_median_s=launch_median,
                 sorted_samples_s=np.sort(cube, axis=2), median_rel_se=rel_se,
                 has_launch_axis=times.ndim == 3 and times.shape[1] > 1, counts=counts)
