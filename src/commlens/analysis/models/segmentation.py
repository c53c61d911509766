"""Segmented least squares: the exact best split of a curve's points into runs of consecutive
sizes, one weighted line each, the segment count chosen by BIC and made robust to outliers."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from commlens.analysis.models.curves import robust_sd
from commlens.analysis.models.lines import weighted_line

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
    bounds = {k: _settled(x, y, weights, runs) for k, runs in bounds.items()}
    return Segmentation(bounds=bounds, rss=rss, bic=bic, best=best, weights=weights)


def _settled(x, y, w, runs) -> list[tuple[int, int]]:
    """`runs` with each breakpoint placed among the sizes left out (zero weight) between the last
    weighted size of one run and the first of the next, where those sizes fit their nearer line.

    Left out, they cost nothing wherever the breakpoint falls among them, and the dynamic programme
    takes the first place: the three sizes before Open MPI's 32 KiB switch, a little above the line
    they continue (it curves up as the eager limit nears), were left out and the switch was reported
    three sizes early. The runs' lines and costs are unchanged: only weighted sizes make them."""
    runs = list(runs)
    lines = segment_lines(x, y, w, runs)
    for i in range(1, len(runs)):
        (first, _), (start, last) = runs[i - 1], runs[i]
        low = first + int(np.flatnonzero(w[first:start] > 0)[-1]) + 1
        high = start + int(np.flatnonzero(w[start:last + 1] > 0)[0])
        if low == high:
            continue
        (a_before, b_before), (a_after, b_after) = lines[i - 1], lines[i]
        between = np.arange(low, high)
        before = np.abs(y[between] - (a_before + b_before * x[between]))
        after = np.abs(y[between] - (a_after + b_after * x[between]))
        # Starting the next run at low + k: the first k sizes on the line before, the rest on the one after.
        costs = [before[:k].sum() + after[k:].sum() for k in range(between.size + 1)]
        start = low + int(np.argmin(costs))
        runs[i - 1], runs[i] = (first, start - 1), (start, last)
    return runs


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


# A breakpoint's interval holds every place its profile cost rises by less than this (chi-square with one
# degree of freedom, 95%) in units of the fit's residual variance.
PROFILE_CHI2 = 3.841


def breakpoint_intervals(x, y, w, runs) -> list[tuple[int, int]]:
    """Each breakpoint's interval from the data, as index pairs (the last index before, the first at or
    after the breakpoint): the places it could move to, its neighbours held, whose two lines' weighted RSS
    lies within PROFILE_CHI2 residual variances of the best (profile likelihood). Never narrower than the
    grid's bracket (last size of the segment before, first of the segment after)."""
    n_params = 2 * len(runs)
    rss = sum(_run_cost(x, y, w, first, last) for first, last in runs)
    used = int(np.sum(w > 0))
    variance = rss / max(used - n_params, 1)
    out = []
    for k in range(1, len(runs)):
        first, last = runs[k - 1][0], runs[k][1]
        here = runs[k][0]
        places = range(first + 2, last)       # two sizes at least on either side
        cost = {place: _run_cost(x, y, w, first, place - 1) + _run_cost(x, y, w, place, last) for place in places}
        best = min(cost.values()) if cost else 0.0
        inside = [place for place, value in cost.items() if value - best <= PROFILE_CHI2 * variance] or [here]
        out.append((min(min(inside), here) - 1, max(max(inside), here)))
    return out
