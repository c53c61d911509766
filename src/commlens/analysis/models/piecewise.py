"""The piecewise model of one curve: alpha-beta lines on consecutive runs of sizes, with jumps
allowed between them (see segmentation for how the runs are found)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from commlens.analysis.models.curves import Curve, reduce_curve
from commlens.analysis.models.lines import inverse_slope, relative_residuals
from commlens.analysis.models.segmentation import (Segmentation, breakpoint_intervals, predict_segments, segment_curve,
                                                   segment_lines)


@dataclass(frozen=True)
class Segment:
    """One alpha-beta line over a run of consecutive sizes."""

    first_size_bytes: int
    last_size_bytes: int
    latency_s: float             # intercept of this segment's line at size 0
    bandwidth_Bps: float         # inverse slope (inf for a flat or falling segment)

    def predict(self, sizes) -> np.ndarray:
        return self.latency_s + np.asarray(sizes, float) / self.bandwidth_Bps


@dataclass(frozen=True)
class PiecewiseFit:
    """Alpha-beta lines on consecutive runs of sizes, with jumps allowed between them.

    A breakpoint is the first size of a new segment; its interval (low, high] holds the
    places the data allow it (segmentation.breakpoint_intervals: profile likelihood, never
    narrower than the last size of the previous segment to it, which no grid can beat).
    """

    segments: tuple[Segment, ...]
    breakpoints_bytes: tuple[int, ...]
    breakpoint_intervals_bytes: tuple[tuple[int, int], ...]
    bic: tuple[float, ...]       # BIC for 1, 2, ... segments (see segment_curve for the choice)
    outlier_sizes_bytes: tuple[int, ...]   # sizes the robust fit gave no weight
    max_rel_residual: float
    median_rel_residual: float
    n_sizes: int

    @property
    def n_segments(self) -> int:
        return len(self.segments)

    def predict(self, sizes) -> np.ndarray:
        sizes = np.asarray(sizes, float)
        starts = np.array([s.first_size_bytes for s in self.segments[1:]], float)
        which = np.searchsorted(starts, sizes, side="right")
        return np.array([self.segments[k].predict(s) for k, s in zip(which, sizes)])

    def variables(self) -> dict:
        return {
            "n_segments": ((), self.n_segments),
            "segment_first_size_bytes": (("segment",), np.array([s.first_size_bytes for s in self.segments])),
            "segment_last_size_bytes": (("segment",), np.array([s.last_size_bytes for s in self.segments])),
            "segment_latency_s": (("segment",), np.array([s.latency_s for s in self.segments])),
            "segment_bandwidth_Bps": (("segment",), np.array([s.bandwidth_Bps for s in self.segments])),
            "breakpoint_bytes": (("breakpoint",), np.array(self.breakpoints_bytes, dtype=float)),
            "breakpoint_interval_bytes": (("breakpoint", "bound"),
                                          np.array(self.breakpoint_intervals_bytes, dtype=float).reshape(-1, 2)),
            "max_rel_residual": ((), self.max_rel_residual),
            "median_rel_residual": ((), self.median_rel_residual),
            "n_sizes": ((), self.n_sizes),
        }


def fit_piecewise(sizes, times, max_segments: int = 5, min_segment_sizes: int = 3, counts=None) -> PiecewiseFit:
    """Exact segmented least squares of the per-size medians; the segment count chosen by BIC."""
    return fit_piecewise_to_curve(reduce_curve(sizes, times, counts), max_segments, min_segment_sizes)[0]


def fit_piecewise_to_curve(curve: Curve, max_segments: int,
                           min_segment_sizes: int) -> tuple[PiecewiseFit, Segmentation]:
    """fit_piecewise of a curve already reduced, with the segmentation it chose (fit_regimes
    bootstraps the lines of its first and last runs)."""
    if curve.sizes.size < min_segment_sizes:
        raise ValueError(f"fit_piecewise needs at least {min_segment_sizes} sizes with data, "
                         f"got {curve.sizes.size}")
    x, y = curve.sizes.astype(float), curve.median_s
    seg = segment_curve(x, y, 1 / y ** 2, max_segments, min_segment_sizes)
    runs = seg.best_bounds
    lines = segment_lines(x, y, seg.weights, runs)
    segments = tuple(Segment(int(curve.sizes[first]), int(curve.sizes[last]), a,
                             float(inverse_slope(np.array(b))))
                     for (first, last), (a, b) in zip(runs, lines))
    fitted = predict_segments(x, y, seg.weights, runs)
    max_rel, median_rel = relative_residuals(y, fitted)
    return PiecewiseFit(
        segments=segments,
        breakpoints_bytes=tuple(int(curve.sizes[first]) for first, _ in runs[1:]),
        breakpoint_intervals_bytes=tuple((int(curve.sizes[low]), int(curve.sizes[high]))
                                         for low, high in breakpoint_intervals(x, y, seg.weights, runs)),
        bic=tuple(seg.bic[k] for k in sorted(seg.bic)),
        outlier_sizes_bytes=tuple(int(s) for s in curve.sizes[seg.weights == 0]),
        max_rel_residual=max_rel, median_rel_residual=median_rel, n_sizes=int(x.size)), seg
