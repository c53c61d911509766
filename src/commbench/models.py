"""Latency-bandwidth models of one curve: time against message size.

Every fit takes `sizes` in bytes (1-D) and `times` in seconds shaped (n_sizes,),
(n_sizes, n_samples) or (n_sizes, n_launches, n_samples), NaN where absent; sizes
without any data are dropped. It fits the per-size median (with a launch axis, the
median of the launches' medians), so the heavy tail of benchmark samples
(preemption, interrupts) cannot move it. Residuals are weighted as relative errors:
a 0.1 us error at 2 us counts as much as a 0.1 ms error at 2 ms, which keeps the
small sizes, where the latency is decided, from being drowned by the large ones.

Results are small frozen dataclasses whose attribute names carry their units;
`variables()` lays them out as (dims, values) pairs for an xarray Dataset, which is
how `ds.commbench.fit(model)` stacks them over a whole campaign.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

# Standard error of a median over that of a mean, for Gaussian data (sqrt(pi/2)).
MEDIAN_EFFICIENCY = 1.2533
# A median absolute deviation times this estimates a Gaussian standard deviation.
MAD_TO_SD = 1.4826
# Points further than this many robust standard deviations from a fit are outliers.
OUTLIER_Z = 5.0
# More segments must lower the BIC by more than this ("very strong evidence" on Kass and
# Raftery's scale): a breakpoint's position is searched over every size, which BIC's
# one parameter for it understates, so a plain minimum overfits noise into breakpoints.
BIC_STRONG_EVIDENCE = 10.0
# Above this many sizes, segments start on a regular subset of them (every 2nd, 3rd...).
MAX_EXACT_SIZES = 1024
# Neighbouring sizes closer than this fraction of the next gap are one location.
CLUSTER_GAP_RATIO = 0.1


def quiet_nanmedian(values, axis):
    """Median ignoring NaN; an all-NaN slice gives NaN without a warning (a failed launch)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="All-NaN slice", category=RuntimeWarning)
        return np.nanmedian(values, axis=axis)


def robust_sd(values, axis=None):
    """Standard deviation estimated from the median absolute deviation, ignoring NaN."""
    center = quiet_nanmedian(values, axis=axis)
    if axis is not None:
        center = np.expand_dims(center, axis)
    return MAD_TO_SD * quiet_nanmedian(np.abs(values - center), axis=axis)


# --------------------------------------------------------------------------- curves

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
    # order statistics of large points (commbench.samples.curve_cube); None: the cube holds them all.
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
                 has_launch_axis=times.ndim == 3, counts=counts)


# --------------------------------------------------------------------------- lines

def weighted_line(x, y, w):
    """Weighted least-squares line y = a + b x; vectorised over the leading dims of y and w.

    Returns (a, b, rss), rss being the weighted residual sum of squares.
    """
    x, y, w = np.asarray(x, float), np.asarray(y, float), np.asarray(w, float)
    sw = w.sum(axis=-1)
    x_mean = (w * x).sum(axis=-1) / sw
    y_mean = (w * y).sum(axis=-1) / sw
    dx = x - x_mean[..., None]
    dy = y - y_mean[..., None]
    sxx = (w * dx * dx).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        b = np.where(sxx > 0, (w * dx * dy).sum(axis=-1) / sxx, 0.0)
    a = y_mean - b * x_mean
    rss = (w * (dy - b[..., None] * dx) ** 2).sum(axis=-1)
    return a, b, rss


def _relative_line(x, y, multiplicity=None, iterations=3):
    """Line through (x, y) minimising relative errors: weights 1/fitted^2, refined a few times.

    Weighting by the data itself (1/y^2) would favour points that happen to be high;
    re-weighting by the fitted value removes that bias after a couple of rounds.
    """
    m = 1.0 if multiplicity is None else multiplicity
    # A size a resample happened to leave without data (all its launches missed it) drops out.
    m = np.where(np.isfinite(y), m, 0.0)
    y = np.where(np.isfinite(y), y, 1.0)
    w = m / y ** 2
    for _ in range(iterations):
        a, b, _ = weighted_line(x, y, w)
        fitted = a[..., None] + b[..., None] * x
        w = m / np.where(fitted > 0, fitted, y) ** 2
    return a, b


def _relative_residuals(y, fitted):
    rel = np.abs(y / fitted - 1)
    return float(np.max(rel)), float(np.median(rel))


def _inverse_slope(b):
    """Bandwidth from a slope in s/B: a flat or falling line has no finite bandwidth."""
    with np.errstate(divide="ignore"):
        return np.where(b > 0, 1.0 / np.where(b > 0, b, 1.0), np.inf)


# --------------------------------------------------------------------------- Hockney

@dataclass(frozen=True)
class HockneyFit:
    """T = latency + size / bandwidth, fitted to per-size medians with relative-error weights.

    Intervals are percentile bootstrap intervals at `confidence`; `resampled` says
    what was resampled: "launches and samples", "samples", or "sizes" (when each
    point is a single value, the sizes themselves).
    """

    latency_s: float
    bandwidth_Bps: float
    n_half_bytes: float          # size reaching half the asymptotic bandwidth: latency * bandwidth
    latency_interval_s: tuple[float, float]
    bandwidth_interval_Bps: tuple[float, float]
    n_half_interval_bytes: tuple[float, float]
    max_rel_residual: float
    median_rel_residual: float
    n_sizes: int
    confidence: float
    resampled: str

    def predict(self, sizes) -> np.ndarray:
        return self.latency_s + np.asarray(sizes, float) / self.bandwidth_Bps

    def variables(self) -> dict:
        scalars = ("latency_s", "bandwidth_Bps", "n_half_bytes", "max_rel_residual",
                   "median_rel_residual", "n_sizes")
        intervals = ("latency_interval_s", "bandwidth_interval_Bps", "n_half_interval_bytes")
        out = {name: ((), getattr(self, name)) for name in scalars}
        out.update({name: (("bound",), np.array(getattr(self, name))) for name in intervals})
        return out


def _bootstrap_medians(curve: Curve, n_boot: int, rng: np.random.Generator) -> np.ndarray:
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


def fit_hockney(sizes, times, confidence: float = 0.95, n_boot: int = 400, seed: int = 0,
                counts=None) -> HockneyFit:
    """Latency and bandwidth of T = latency + size / bandwidth, with bootstrap intervals.

    With a launch axis, launches are resampled as well as samples, because the
    variation between launches is often larger than within one. A bootstrap over
    very few launches is too narrow: on synthetic curves whose launches shift by
    0.3%, 95% intervals held the true latency 82% of the time with 3 launches and
    92% with 5 (with no launch shifts, all the time).
    """
    return _hockney(reduce_curve(sizes, times, counts), confidence, n_boot, seed)


def _percentile_interval(values, confidence: float) -> tuple[float, float]:
    """The (low, high) percentile interval at `confidence` of bootstrap replicates."""
    tail = (1 - confidence) / 2
    low, high = np.quantile(values, [tail, 1 - tail], method="inverted_cdf")
    return float(low), float(high)


def _hockney(curve: Curve, confidence: float, n_boot: int, seed: int) -> HockneyFit:
    if curve.sizes.size < 3:
        raise ValueError(f"fit_hockney needs at least 3 sizes with data, got {curve.sizes.size}")
    x, y = curve.sizes.astype(float), curve.median_s
    a, b = _relative_line(x, y[None])
    a, b = float(a[0]), float(b[0])

    rng = np.random.default_rng(seed)
    if curve.sample_counts.max() > 1 or curve.n_launches > 1:
        resampled = "launches and samples" if curve.n_launches > 1 else "samples"
        a_boot, b_boot = _relative_line(x, _bootstrap_medians(curve, n_boot, rng))
    else:
        resampled = "sizes"
        picks = rng.integers(0, x.size, size=(n_boot, x.size))
        multiplicity = np.stack([np.bincount(p, minlength=x.size) for p in picks]).astype(float)
        a_boot, b_boot = _relative_line(x, np.broadcast_to(y, multiplicity.shape), multiplicity)

    b_low, b_high = _percentile_interval(b_boot, confidence)
    bandwidth = float(_inverse_slope(np.array(b)))
    n_half_boot = a_boot * _inverse_slope(b_boot)
    max_rel, median_rel = _relative_residuals(y, a + b * x)
    return HockneyFit(latency_s=a, bandwidth_Bps=bandwidth, n_half_bytes=a * bandwidth,
                      latency_interval_s=_percentile_interval(a_boot, confidence),
                      bandwidth_interval_Bps=(float(_inverse_slope(np.array(b_high))),
                                              float(_inverse_slope(np.array(b_low)))),
                      n_half_interval_bytes=_percentile_interval(n_half_boot, confidence),
                      max_rel_residual=max_rel, median_rel_residual=median_rel,
                      n_sizes=int(x.size), confidence=confidence, resampled=resampled)


# --------------------------------------------------------------------------- piecewise

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
class Segmentation:
    """The exact least-squares segmentation of one curve, as index ranges, for every segment count."""

    bounds: dict[int, list[tuple[int, int]]]   # n_segments -> [(first index, last index), ...]
    rss: dict[int, float]                      # n_segments -> weighted residual sum of squares
    bic: dict[int, float]                      # n_segments -> Bayesian information criterion
    best: int                                  # the segment count chosen (see segment_curve)
    weights: np.ndarray                        # the weights used (outliers at zero)

    @property
    def best_bounds(self) -> list[tuple[int, int]]:
        return self.bounds[self.best]


def size_locations(x) -> np.ndarray:
    """Index of the location each size belongs to: sizes much closer to each other than to their
    other neighbours (NetPIPE's s-3, s, s+3) are one location; on a regular grid every size is one."""
    gaps = np.diff(np.asarray(x, float))
    if gaps.size < 2:
        return np.arange(gaps.size + 1)
    neighbour_gap = np.maximum(np.concatenate([[0.0], gaps[:-1]]), np.concatenate([gaps[1:], [0.0]]))
    return np.concatenate([[0], np.cumsum(gaps >= CLUSTER_GAP_RATIO * neighbour_gap)])


def _segment_costs(x, y, w, min_sizes: int, starts: np.ndarray) -> np.ndarray:
    """cost[a, b]: weighted RSS of the best line from starts[a] to the end of block b (the size
    before starts[b + 1], or the last); inf where not allowed.

    A segment needs `min_sizes` weighted points at as many distinct locations (see
    size_locations): a cluster plus one far outlier would otherwise fit exactly and
    hide the outlier inside a segment of its own making. Sums restart at every
    start in coordinates shifted to it, so a short segment of large sizes is never
    the small difference of two large prefix sums.
    """
    n, m = x.size, starts.size
    ends = np.append(starts[1:] - 1, n - 1)
    location = size_locations(x)
    cost = np.full((m, m), np.inf)
    for a, i in enumerate(starts):
        ws, xs, ys = w[i:], x[i:] - x[i], y[i:] - y[i]
        s = np.cumsum(ws)
        sx, sy = np.cumsum(ws * xs), np.cumsum(ws * ys)
        sxx, sxy, syy = np.cumsum(ws * xs * xs), np.cumsum(ws * xs * ys), np.cumsum(ws * ys * ys)
        supported = (np.cumsum(ws > 0) >= min_sizes) & (location[i:] - location[i] + 1 >= min_sizes)
        with np.errstate(invalid="ignore", divide="ignore"):
            var_x = sxx - sx * sx / s
            cov = sxy - sx * sy / s
            var_y = syy - sy * sy / s
            rss = np.where(var_x > 0, var_y - cov * cov / var_x, var_y)
        rss = np.where(supported, np.maximum(rss, 0.0), np.inf)
        cost[a, a:] = rss[ends[a:] - i]
    return cost


def _dynamic_programme(cost: np.ndarray, max_segments: int):
    """Optimal segmentations of blocks 0..m-1 into 1..max_segments contiguous runs of blocks."""
    m = cost.shape[0]
    total = {1: cost[0].copy()}
    starts = {}
    for k in range(2, max_segments + 1):
        # A k-th segment starting at block a follows the best (k-1)-segmentation of blocks 0..a-1.
        candidates = total[k - 1][:-1, None] + cost[1:, :]
        starts[k] = np.argmin(candidates, axis=0) + 1
        total[k] = candidates[starts[k] - 1, np.arange(m)]
    bounds, rss = {}, {}
    for k in range(1, max_segments + 1):
        if not np.isfinite(total[k][-1]):
            continue
        end, runs = m - 1, []
        for level in range(k, 1, -1):
            start = int(starts[level][end])
            runs.append((start, end))
            end = start - 1
        runs.append((0, end))
        bounds[k], rss[k] = runs[::-1], float(total[k][-1])
    return bounds, rss


def _segmentations(x, y, w, max_segments: int, min_sizes: int):
    """Best segmentations into 1..max_segments runs: {k: runs} and {k: weighted RSS}.

    Exact up to MAX_EXACT_SIZES sizes. Past that (n^2 memory and time), segments
    may only start on a regular subset of sizes, and each breakpoint found is then
    moved to its best size within one block, the segments either side held.
    """
    n = x.size
    block = max(1, int(np.ceil(n / MAX_EXACT_SIZES)))
    starts = np.arange(0, n, block)
    ends = np.append(starts[1:] - 1, n - 1)
    block_runs, _ = _dynamic_programme(_segment_costs(x, y, w, min_sizes, starts), max_segments)
    bounds, rss = {}, {}
    for k, runs in block_runs.items():
        runs = [(int(starts[a]), int(ends[b])) for a, b in runs]
        for i in range(1, len(runs) if block > 1 else 1):
            (first, _), (start, last) = runs[i - 1], runs[i]
            candidates = range(max(first + min_sizes, start - block), min(last - min_sizes + 1, start + block) + 1)
            start = min(candidates, key=lambda c: _run_cost(x, y, w, first, c - 1) + _run_cost(x, y, w, c, last))
            runs[i - 1], runs[i] = (first, start - 1), (start, last)
        bounds[k], rss[k] = runs, sum(_run_cost(x, y, w, first, last) for first, last in runs)
    return bounds, rss


def _run_cost(x, y, w, first: int, last: int) -> float:
    """Weighted RSS of the line through points first..last."""
    return float(weighted_line(x[first:last + 1], y[first:last + 1], w[first:last + 1])[2])


def segment_curve(x, y, w, max_segments: int = 5, min_segment_sizes: int = 3,
                  outlier_z: float = OUTLIER_Z, rounds: int = 3) -> Segmentation:
    """Segmented least squares of y against x with weights w, segment count by BIC.

    Exact for a given weighting (dynamic programming over all segmentations, see
    _segmentations for long curves); made robust by giving zero weight to points
    more than `outlier_z` robust standard deviations off the chosen fit and fitting
    again, so an isolated outlier cannot buy itself a segment. A segment may jump:
    each has its own intercept and slope. BIC counts three parameters per extra
    segment (intercept, slope, breakpoint), and a segment more is taken only on
    very strong evidence (see BIC_STRONG_EVIDENCE).
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    base = np.asarray(w, float)
    keep = np.ones(x.size, bool)
    for _ in range(rounds):
        weights = np.where(keep, base, 0.0)
        n_eff = int(keep.sum())
        limit = max(1, min(max_segments, n_eff // min_segment_sizes))
        bounds, rss = _segmentations(x, y, weights, limit, min_segment_sizes)
        if not bounds:  # too few distinct locations to split: one line over everything
            bounds, rss = {1: [(0, x.size - 1)]}, {1: float(weighted_line(x, y, weights)[2])}
        floor = np.finfo(float).tiny
        bic = {k: n_eff * np.log(max(r, floor) / n_eff) + (3 * k - 1) * np.log(n_eff) for k, r in rss.items()}
        lowest = min(bic.values())
        best = min(k for k, value in bic.items() if value <= lowest + BIC_STRONG_EVIDENCE)
        fitted = predict_segments(x, y, weights, bounds[best])
        z = (y - fitted) * np.sqrt(base)
        scale = robust_sd(z[keep])
        new_keep = np.abs(z - np.median(z[keep])) <= outlier_z * scale if scale > 0 else keep
        if np.array_equal(new_keep, keep) or new_keep.sum() < 2 * min_segment_sizes:
            break
        keep = new_keep
    return Segmentation(bounds=bounds, rss=rss, bic=bic, best=best, weights=weights)


def segment_lines(x, y, w, runs) -> list[tuple[float, float]]:
    """(intercept, slope) of the weighted line of every run of points."""
    lines = []
    for first, last in runs:
        a, b, _ = weighted_line(x[first:last + 1], y[first:last + 1], w[first:last + 1])
        lines.append((float(a), float(b)))
    return lines


def predict_segments(x, y, w, runs) -> np.ndarray:
    """The fitted value at every point: each run's weighted line."""
    fitted = np.empty(x.size)
    for (first, last), (a, b) in zip(runs, segment_lines(x, y, w, runs)):
        fitted[first:last + 1] = a + b * x[first:last + 1]
    return fitted


@dataclass(frozen=True)
class PiecewiseFit:
    """Alpha-beta lines on consecutive runs of sizes, with jumps allowed between them.

    A breakpoint is the first size of a new segment; its interval runs from the
    last size of the previous segment to it: the switch happened somewhere in
    (low, high], and no grid can say more.
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
    return _piecewise(reduce_curve(sizes, times, counts), max_segments, min_segment_sizes)[0]


def _piecewise(curve: Curve, max_segments: int, min_segment_sizes: int) -> tuple[PiecewiseFit, Segmentation]:
    if curve.sizes.size < min_segment_sizes:
        raise ValueError(f"fit_piecewise needs at least {min_segment_sizes} sizes with data, "
                         f"got {curve.sizes.size}")
    x, y = curve.sizes.astype(float), curve.median_s
    seg = segment_curve(x, y, 1 / y ** 2, max_segments, min_segment_sizes)
    runs = seg.best_bounds
    lines = segment_lines(x, y, seg.weights, runs)
    segments = tuple(Segment(int(curve.sizes[first]), int(curve.sizes[last]), a,
                             float(_inverse_slope(np.array(b))))
                     for (first, last), (a, b) in zip(runs, lines))
    fitted = predict_segments(x, y, seg.weights, runs)
    max_rel, median_rel = _relative_residuals(y, fitted)
    return PiecewiseFit(
        segments=segments,
        breakpoints_bytes=tuple(int(curve.sizes[first]) for first, _ in runs[1:]),
        breakpoint_intervals_bytes=tuple((int(curve.sizes[first - 1]), int(curve.sizes[first]))
                                         for first, _ in runs[1:]),
        bic=tuple(seg.bic[k] for k in sorted(seg.bic)),
        outlier_sizes_bytes=tuple(int(s) for s in curve.sizes[seg.weights == 0]),
        max_rel_residual=max_rel, median_rel_residual=median_rel, n_sizes=int(x.size)), seg


# --------------------------------------------------------------------------- regimes

# A size's Hockney residual is beyond noise past this many standard errors of its median.
NOISE_Z = 3.0
# One Hockney line fits a curve where at most this fraction of its sizes lie beyond noise: a spike
# or two (anomalies() reports them) must not condemn it, while a regime it misses leaves many more.
MISFIT_FRACTION = 0.1


def median_noise(curve: Curve) -> np.ndarray:
    """Relative standard error of each size's median (curve.median_s), from the data's own spread.

    Within launches, the samples' robust spread (curve.median_rel_se); between launches, the
    spread of the launches' medians (MEDIAN_EFFICIENCY sd / sqrt(launches), since their median is
    what is fitted). The larger of the two: with two or three launches the spread between them
    can come out small by chance, and one launch shows none.
    """
    launches = np.isfinite(curve.launch_median_s).sum(axis=1)
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.filterwarnings("ignore", message="Degrees of freedom", category=RuntimeWarning)
        spread = np.nanstd(curve.launch_median_s, axis=1, ddof=1)
        between = np.where(launches >= 2, MEDIAN_EFFICIENCY * spread / np.sqrt(launches) / curve.median_s, 0.0)
    return np.fmax(curve.median_rel_se, between)


@dataclass(frozen=True)
class RegimeFit:
    """What a table of one curve's parameters can truthfully say: the first regime's latency, the
    last regime's asymptotic bandwidth and each size where a new regime starts (from fit_piecewise),
    and whether one Hockney line describes the whole curve.

    On a curve with protocol switches a single line is pulled between regimes and gives a latency
    and a bandwidth that no regime has (e.g. 9.1 us where the 1 B point is 6.2 us). Its relative
    residual at each size is held against that size's noise (median_noise: the standard error of
    its median, from the spread of its samples and launches): `beyond_noise` sizes are off by more
    than NOISE_Z of them, and `hockney_fits` where at most MISFIT_FRACTION of the sizes are.

    Intervals are percentile bootstrap intervals at `confidence`, resampling launches and samples
    as fit_hockney does and refitting the first and last segments' lines with the segmentation
    held as found (NaN with a single value per size: nothing to resample). A switch is at the first
    size of its regime; its interval says it happened in (low, high], between two measured sizes.
    """

    latency_s: float
    latency_interval_s: tuple[float, float]
    bandwidth_Bps: float
    bandwidth_interval_Bps: tuple[float, float]
    switches_bytes: tuple[int, ...]
    switch_intervals_bytes: tuple[tuple[int, int], ...]
    hockney: HockneyFit
    hockney_fits: bool
    beyond_noise: int
    median_noise_rel: float      # the median over sizes of median_noise
    n_sizes: int
    confidence: float

    @property
    def n_regimes(self) -> int:
        return len(self.switches_bytes) + 1

    def variables(self) -> dict:
        out = {
            "latency_s": ((), self.latency_s),
            "latency_interval_s": (("bound",), np.array(self.latency_interval_s)),
            "bandwidth_Bps": ((), self.bandwidth_Bps),
            "bandwidth_interval_Bps": (("bound",), np.array(self.bandwidth_interval_Bps)),
            "n_regimes": ((), self.n_regimes),
            "switch_bytes": (("switch",), np.array(self.switches_bytes, dtype=float)),
            "switch_interval_bytes": (("switch", "bound"),
                                      np.array(self.switch_intervals_bytes, dtype=float).reshape(-1, 2)),
            "hockney_fits": ((), float(self.hockney_fits)),
            "beyond_noise": ((), self.beyond_noise),
            "median_noise_rel": ((), self.median_noise_rel),
            "n_sizes": ((), self.n_sizes),
        }
        out.update({f"hockney_{name}": value for name, value in self.hockney.variables().items()
                    if name != "n_sizes"})
        return out


def _run_lines(x, y, w, run) -> tuple[np.ndarray, np.ndarray]:
    """(intercepts, slopes) of one run's weighted line through each row of y (bootstrap medians); a
    size a replicate left without data drops out of that replicate."""
    first, last = run
    y = y[..., first:last + 1]
    w = np.where(np.isfinite(y), w[first:last + 1], 0.0)
    a, b, _ = weighted_line(x[first:last + 1], np.where(np.isfinite(y), y, 0.0), w)
    return a, b


def fit_regimes(sizes, times, confidence: float = 0.95, n_boot: int = 400, seed: int = 0,
                max_segments: int = 5, min_segment_sizes: int = 3, counts=None) -> RegimeFit:
    """Per-regime parameters of one curve and whether a single Hockney line fits it (see RegimeFit)."""
    curve = reduce_curve(sizes, times, counts)
    hockney = _hockney(curve, confidence, n_boot, seed)
    pieces, segmentation = _piecewise(curve, max_segments, min_segment_sizes)
    x, y = curve.sizes.astype(float), curve.median_s
    noise = median_noise(curve)
    off = np.abs(y / hockney.predict(x) - 1)
    beyond = int(np.sum(off > NOISE_Z * noise))
    runs = segmentation.best_bounds
    latency_interval = bandwidth_interval = (np.nan, np.nan)
    if curve.sample_counts.max() > 1 or curve.n_launches > 1:
        medians = _bootstrap_medians(curve, n_boot, np.random.default_rng(seed))
        latency_interval = _percentile_interval(_run_lines(x, medians, segmentation.weights, runs[0])[0], confidence)
        low, high = _percentile_interval(_run_lines(x, medians, segmentation.weights, runs[-1])[1], confidence)
        bandwidth_interval = (float(_inverse_slope(np.array(high))), float(_inverse_slope(np.array(low))))
    return RegimeFit(latency_s=pieces.segments[0].latency_s, latency_interval_s=latency_interval,
                     bandwidth_Bps=pieces.segments[-1].bandwidth_Bps, bandwidth_interval_Bps=bandwidth_interval,
                     switches_bytes=pieces.breakpoints_bytes, switch_intervals_bytes=pieces.breakpoint_intervals_bytes,
                     hockney=hockney, hockney_fits=beyond <= MISFIT_FRACTION * x.size, beyond_noise=beyond,
                     median_noise_rel=float(np.nanmedian(noise)), n_sizes=int(x.size), confidence=confidence)


# --------------------------------------------------------------------------- packets

def packet_counts(sizes, payload, header=0) -> np.ndarray:
    """Packets a message needs when `header` bytes of protocol ride in it: ceil((size + header) / payload)."""
    return np.ceil((np.asarray(sizes, float) + header) / payload)


@dataclass(frozen=True)
class PacketFit:
    """T = latency + (size + overhead * ceil((size + header) / payload)) / bandwidth.

    `header_bytes` is what the protocol above adds to every message inside the
    packets (an MPI library's match header over TCP): it moves the steps to
    k * payload - header without changing their period. Every payload in
    `payload_interval_bytes` can give every measured size the same packet count
    (with some header), so on these sizes they fit equally well; `payload_bytes` is
    the middle of that interval. A dense grid over many packets narrows it to one.
    """

    latency_s: float
    bandwidth_Bps: float
    payload_bytes: int
    payload_interval_bytes: tuple[int, int]
    header_bytes: int
    overhead_bytes: float        # per packet, at the bandwidth
    step_s: float                # the time one more packet adds: overhead / bandwidth
    max_rel_residual: float
    median_rel_residual: float
    n_sizes: int

    def predict(self, sizes) -> np.ndarray:
        sizes = np.asarray(sizes, float)
        return (self.latency_s + sizes / self.bandwidth_Bps
                + self.step_s * packet_counts(sizes, self.payload_bytes, self.header_bytes))

    def variables(self) -> dict:
        scalars = ("latency_s", "bandwidth_Bps", "payload_bytes", "header_bytes", "overhead_bytes", "step_s",
                   "max_rel_residual", "median_rel_residual", "n_sizes")
        out = {name: ((), getattr(self, name)) for name in scalars}
        out["payload_interval_bytes"] = (("bound",), np.array(self.payload_interval_bytes))
        return out


def payload_candidates(sizes, max_candidates: int = 2000) -> np.ndarray:
    """Integer payloads worth trying: two sizes on either side of every boundary within half a
    payload (four size-steps a packet), and at least three packet boundaries.

    Every integer when there are few enough; otherwise a geometric grid fine
    enough that, across the whole size range, a neighbouring candidate moves no
    packet boundary by more than about one grid step (refined to integers later).
    """
    sizes = np.asarray(sizes, float)
    step = np.median(np.diff(sizes)) if sizes.size > 1 else 1.0
    low = max(4.0, 4 * step)
    high = (sizes[-1] - sizes[0]) / 3
    if high < low:
        return np.array([], dtype=np.int64)
    if high - low + 1 <= max_candidates:
        return np.arange(int(np.ceil(low)), int(high) + 1)
    relative = max(step / sizes[-1], np.log(high / low) / max_candidates)
    return np.unique(np.rint(np.exp(np.arange(np.log(low), np.log(high), relative))).astype(np.int64))


def line_design(x) -> np.ndarray:
    """Columns of one straight line over all sizes (intercept, scaled size)."""
    x = np.asarray(x, float)
    return np.stack([np.ones(x.size), x / x[-1]], axis=1)


def runs_design(x, runs) -> np.ndarray:
    """Columns of one straight line per run of sizes: each segment its own intercept and slope."""
    x = np.asarray(x, float)
    design = np.zeros((x.size, 2 * len(runs)))
    for k, (first, last) in enumerate(runs):
        design[first:last + 1, 2 * k] = 1
        design[first:last + 1, 2 * k + 1] = x[first:last + 1] / x[-1]
    return design


def _packet_rss(x, y, w, payloads, headers, baseline=None, chunk: int = 1024):
    """Weighted RSS, and step height c, of y = baseline + c * packet_counts(x, P, h) for every (P, h).

    `baseline` holds the columns of the rest of the model (default: one line).
    Both y and the packet counts are first projected off the baseline, so for each
    pair only one coefficient is left to solve and no sum grows large enough to
    cancel (Frisch-Waugh-Lovell).
    """
    baseline = line_design(x) if baseline is None else baseline
    root_w = np.sqrt(w)
    basis, _ = np.linalg.qr(baseline * root_w[:, None])
    yw = y * root_w
    resid = yw - basis @ (basis.T @ yw)
    payloads, headers = np.asarray(payloads, float), np.asarray(headers, float)
    rss = np.empty(payloads.size)
    step = np.empty(payloads.size)
    for start in range(0, payloads.size, chunk):
        part = slice(start, start + chunk)
        counts = np.ceil((x[None, :] + headers[part, None]) / payloads[part, None]) * root_w
        counts -= (counts @ basis) @ basis.T
        norm = np.einsum("pn,pn->p", counts, counts)
        c = np.where(norm > 0, (counts @ resid) / np.where(norm > 0, norm, 1.0), 0.0)
        rss[part] = resid @ resid - c * c * norm
        step[part] = c
    return rss, step


def _best_pair(x, y, w, payloads, headers, baseline):
    rss, _ = _packet_rss(x, y, w, payloads, headers, baseline)
    best = int(np.argmin(rss))
    return int(payloads[best]), int(headers[best])


def _header_range(sizes, counts, payloads):
    """For each payload P, the headers h that give every size its count q: lowest < h <= highest,
    from (q - 1) P < size + h <= q P."""
    payloads = np.asarray(payloads, float)[:, None]
    lowest = np.max((counts[None, :] - 1) * payloads - sizes[None, :], axis=1)
    highest = np.min(counts[None, :] * payloads - sizes[None, :], axis=1)
    return lowest, highest


def equivalent_payloads(sizes, payload: int, header: int) -> tuple[int, int]:
    """The integer payloads that, with some header, give every size the packet count that
    (payload, header) gives: on these sizes nothing can tell them apart.

    They form one interval (the projection of a convex set of (payload, header)),
    whose ends are found by doubling steps and then bisection.
    """
    sizes = np.asarray(sizes, float)
    counts = packet_counts(sizes, payload, header)

    def feasible(trial: int) -> bool:
        lowest, highest = _header_range(sizes, counts, [trial])
        return trial >= 1 and bool(np.floor(highest[0]) > lowest[0])

    def edge(direction: int) -> int:
        inside, step = payload, 1
        while feasible(inside + direction * step):
            inside, step = inside + direction * step, 2 * step
        outside = inside + direction * step
        while abs(outside - inside) > 1:
            middle = (inside + outside) // 2
            inside, outside = (middle, outside) if feasible(middle) else (inside, middle)
        return inside

    return edge(-1), edge(+1)


def smallest_header(sizes, payload: int, header: int, other_payload: int) -> int:
    """The smallest header >= 0 with which `other_payload` counts packets as (payload, header) does,
    up to one packet more or less everywhere: of the headers the sizes cannot tell apart, the
    one that assumes the least protocol inside the packets."""
    sizes = np.asarray(sizes, float)
    lowest, highest = _header_range(sizes, packet_counts(sizes, payload, header), [other_payload])
    first, last = np.floor(lowest[0]) + 1, np.floor(highest[0])
    shift = np.ceil(-last / other_payload) * other_payload     # a whole packet: the same steps
    return int(max(0, first + shift))


def best_packets(x, y, w, baseline=None, max_candidates: int = 2000, max_pairs: int = 8000):
    """(payload, header) of the packet model with the smallest weighted RSS over `baseline`.

    A grid of payloads, each with the header at 0, 1/4, 1/2 and 3/4 of it (the
    header moves every step alike, so a coarse phase finds the payload's
    neighbourhood); then the integer payloads near the best with headers on a grid
    (about one size-step apart, coarser if that would exceed `max_pairs`); then
    the pairs within a few bytes of the best payload, zooming in on the header. None when the sizes cannot show
    three packet boundaries.
    """
    candidates = payload_candidates(x, max_candidates)
    if candidates.size == 0:
        return None
    phases = np.array([0, 0.25, 0.5, 0.75])
    payloads = np.repeat(candidates, phases.size)
    payload, header = _best_pair(x, y, w, payloads, np.floor(payloads * np.tile(phases, candidates.size)),
                                 baseline)
    spacing = int(np.max(np.diff(candidates))) if candidates.size > 1 else 1
    reach = max(spacing, int(np.ceil(0.02 * payload)), 2)
    near = np.unique(np.rint(np.linspace(max(candidates[0], payload - reach),
                                         min(candidates[-1], payload + reach), 129)).astype(np.int64))
    grid_step = max(1, int(np.median(np.diff(x))))
    header_step = max(grid_step, int(np.ceil(near.size * near.max() / max_pairs)))
    payloads = np.concatenate([np.full(len(range(0, p, header_step)), p) for p in near])
    headers = np.concatenate([np.arange(0, p, header_step) for p in near])
    payload, header = _best_pair(x, y, w, payloads, headers, baseline)
    # The header grid may have favoured a neighbouring payload: the pairs close by, the header
    # zoomed in to the byte (a boundary that falls on a size needs it).
    span = header_step
    while True:
        fine_step = max(1, span // 16)
        payloads, headers = np.meshgrid(np.arange(max(1, payload - 3), payload + 4),
                                        np.arange(header - span, header + span + 1, fine_step))
        payload, header = _best_pair(x, y, w, payloads.ravel(), headers.ravel() % payloads.ravel(), baseline)
        if fine_step == 1:
            return payload, header
        span = fine_step


def fit_packet(sizes, times, max_candidates: int = 2000, counts=None) -> PacketFit:
    """Packet payload, header, per-packet overhead, latency and bandwidth of the packet model.

    The payload is searched over integers (all of them, or a fine geometric grid
    refined to integers when the range is wide), with the header; for each pair
    the rest of the model is linear and solved exactly, so the search is global.
    """
    curve = reduce_curve(sizes, times, counts)
    x, y = curve.sizes.astype(float), curve.median_s
    w = 1 / y ** 2
    found = best_packets(x, y, w, max_candidates=max_candidates) if x.size >= 6 else None
    if found is None:
        raise ValueError("fit_packet needs sizes spanning at least three packets of at least two sizes each")
    low, high = equivalent_payloads(x, *found)
    payload = (low + high) // 2
    header = smallest_header(x, *found, payload)
    counts = packet_counts(x, payload, header)
    design = np.stack([np.ones(x.size), x / x[-1], counts], axis=1)
    root_w = np.sqrt(w)
    a, b, c = np.linalg.lstsq(design * root_w[:, None], y * root_w, rcond=None)[0] / [1, x[-1], 1]
    bandwidth = float(_inverse_slope(np.array(b)))
    max_rel, median_rel = _relative_residuals(y, a + b * x + c * counts)
    return PacketFit(latency_s=float(a), bandwidth_Bps=bandwidth, payload_bytes=payload,
                     payload_interval_bytes=(low, high), header_bytes=header,
                     overhead_bytes=float(c * bandwidth), step_s=float(c), max_rel_residual=max_rel,
                     median_rel_residual=median_rel, n_sizes=int(x.size))


FITS = {"hockney": fit_hockney, "piecewise": fit_piecewise, "packet": fit_packet, "regimes": fit_regimes}
