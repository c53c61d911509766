"""Bootstrap of a curve's per-size medians, and percentile intervals of the replicates."""

from __future__ import annotations

import numpy as np

from commlens.analysis.models.curves import Curve, quiet_nanmedian


def bootstrap_medians(curve: Curve, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, n_sizes) per-size medians of resampled data: whole launches, then samples in them.

    Launches are drawn once per replicate for every size, because what a launch
    shifts (placement of ranks, clock, neighbours) it shifts for all sizes alike.
    The median of a resample of n sorted values is the J-th of them, with J about
    normal around (n-1)/2 with standard deviation sqrt(n)/2 (the count of resampled
    values under any one of them is binomial), so J is drawn directly: O(1), not
    O(n), per replicate and point.
    """
    n_sizes, n_launches, _ = curve.sorted_samples_s.shape
    if n_launches > 1:
        launches = rng.integers(0, n_launches, size=(n_boot, n_launches))
    else:
        launches = np.zeros((n_boot, 1), dtype=int)
    counts = curve.sample_counts[:, launches]                       # (n_sizes, n_boot, n_launches)
    z = rng.standard_normal(counts.shape)
    j = np.clip(np.rint((counts - 1) / 2 + np.sqrt(counts) / 2 * z), 0, np.maximum(counts - 1, 0))
    # Where the cube keeps fewer order statistics than the point had, the j-th of n is the one at
    # the same rank fraction among those kept.
    stored = curve.stored_counts[:, launches]
    j = np.where(stored < counts, np.rint(j * (stored - 1) / np.maximum(counts - 1, 1)), j)
    size_index = np.arange(n_sizes)[:, None, None]
    medians = curve.sorted_samples_s[size_index, launches[None], j.astype(int)]
    medians = np.where(counts > 0, medians, np.nan)
    return quiet_nanmedian(medians, axis=2).T


def percentile_interval(values, confidence: float) -> tuple[float, float]:
    """The (low, high) percentile interval at `confidence` of bootstrap replicates."""
    tail = (1 - confidence) / 2
    low, high = np.quantile(values, [tail, 1 - tail], method="inverted_cdf")
    return float(low), float(high)
