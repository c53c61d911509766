"""Change points over a series of reruns: when a cell's time moved, and by how much.

A cell (library, placement, kernel, size) measured in n reruns gives a series y_1..y_n: the log of
each rerun's location, the geometric mean over its launches of the launch medians (as
commlens.analysis.compare uses), NaN where a rerun did not measure the cell. The model is a piecewise
constant level in y plus Gaussian noise of a known scale per rerun; the segmentation minimises

    sum over segments of the weighted squared deviations from the segment's mean + penalty * changes

exactly, by dynamic programming over the positions of the last change (optimal partitioning,
O(n^2) per cell, vectorised over cells). Then adjacent segments whose levels differ by less than
`min_effect` (relative) are merged, smallest difference first: a real but small shift is not a
change anybody acts on, and compare draws the same line.

Noise scale of a rerun's location (log units), per cell:

- from the launches: the launch-to-launch variance of log launch medians, pooled over the cell's
  reruns that have several launches, divided by the rerun's launch count;
- plus what a rerun adds beyond its launches, shared by every cell (rerun_variance): estimated from the
  second rerun on over all curves at once, robustly (a median), since reruns days apart differ by more
  than launches minutes apart (reboots, firmware, neighbours); without it, 3% rerun-to-rerun noise made
  every history of 2-5 reruns of ten curves report a change;
- floored by the series itself: the robust standard deviation of successive differences
  (1.4826 MAD / sqrt 2, which one or two level shifts hardly move), once there are MIN_DIFFERENCES
  of them: a cell's own series sees what the shared estimate averages over;
- and by RESOLUTION, so that identical launches do not make any difference infinitely significant.

Both estimates pool a few neighbouring sizes of the same curve when the caller says which cells
those are: noise changes slowly with size, and one cell's few launches estimate it poorly (an
underestimate is a false change). The penalty (see `penalty`) assumes a known scale; it is carried
to the estimate's degrees of freedom (`penalty_for_dof`). A cell with one launch per rerun and too
short a series has no noise estimate and is not tested.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from commlens.analysis.constants import MAD_TO_SD

# Successive differences a cell needs before its series' own spread is trusted as a floor: with
# fewer, one real step is too large a share of them and would hide itself.
MIN_DIFFERENCES = 6
# Smallest noise scale of a rerun's location (log units, ~0.2%): below it, timer resolution and
# rounding of the medians, not the machine, make the spread.
RESOLUTION = 0.002
# Neighbouring sizes either side whose launches and reruns share in a cell's noise estimate.
NEIGHBOURS = 2
# Degrees of freedom a MAD over k successive differences is worth, per difference: 0.37 for
# independent values (a MAD's efficiency), 0.30 measured for successive differences, which overlap.
MAD_EFFICIENCY = 0.30
# The median of a chi-square variable with one degree of freedom.
CHI2_1_MEDIAN = 0.454936423119572
# Cells segmented together: bounds the (cells x reruns) temporaries of the dynamic programme.
CHUNK_CELLS = 4096


@dataclass(frozen=True)
class ChangeSegmentation:
    """What `segment` finds, every array (cells, reruns): `change` is True at the first measured
    rerun of each new level; `level` the level (log) every rerun belongs to; `level_se` its standard
    error (log); `tested` (cells,) whether the cell had the data to be segmented."""

    change: np.ndarray
    level: np.ndarray
    level_se: np.ndarray
    tested: np.ndarray


def penalty(n_reruns: int, n_cells: int) -> float:
    """The cost of one more change, in units of squared standard scores.

    BIC charges log(n) per free parameter and a change adds two (its position and the new level):
    2 log n for one series. Looking at many cells at once, noise alone would buy a change in some of
    them: splitting a flat series at one position gains a chi-square(1) variable, and
    P(chi2_1 > 2 log(n m)) < 1 / (n m), so adding 2 log m for m cells keeps the expected number of
    false changes over every position of every cell below one (a Bonferroni bound; compare controls
    its many cells with Benjamini-Hochberg for the same reason)."""
    return 2.0 * np.log(max(n_reruns, 2) * max(n_cells, 1))


@dataclass(frozen=True)
class NoiseScale:
    """What `noise_scale` estimates: `scale` (cells, reruns), the standard deviation of each rerun's
    location in log units (NaN: unknown); `dof` (cells,), the degrees of freedom behind it."""

    scale: np.ndarray
    dof: np.ndarray


def noise_scale(log_location: np.ndarray, launch_var: np.ndarray, launches: np.ndarray,
                curve: np.ndarray | None = None, neighbours: int = NEIGHBOURS) -> NoiseScale:
    """The noise scale of every rerun's location; see the module's docstring.

    Arrays are (cells, reruns): `log_location`, `launch_var` (each rerun's variance of log launch
    medians, ddof 1, NaN below two launches) and `launches` (its launch count). With `curve` (cells,),
    rows are the sizes of curves in increasing size, consecutive rows of one curve neighbours: each
    cell's estimates then pool `neighbours` cells either side in its curve, since noise changes
    slowly with size and one cell's few launches and reruns estimate a spread poorly."""
    y = np.asarray(log_location, float)
    launches = np.nan_to_num(np.asarray(launches, float))
    var = np.asarray(launch_var, float)
    reach = 0 if curve is None else neighbours
    curve = np.arange(y.shape[0]) if curve is None else np.asarray(curve)
    usable = np.isfinite(var) & (launches > 1)
    launch_dof = np.where(usable, launches - 1, 0.0).sum(axis=1)
    launch_squares = np.where(usable, var * (launches - 1), 0.0).sum(axis=1)
    launch_dof, launch_squares = (_window_sum(v, curve, reach) for v in (launch_dof, launch_squares))
    with np.errstate(invalid="ignore", divide="ignore"):
        pooled = launch_squares / launch_dof
        from_launches = np.sqrt(pooled[:, None] / np.where(launches > 0, launches, np.nan))
    floor, floor_count = _series_floor(y, curve, reach)
    # Reruns days apart differ by more than launches minutes apart, and a cell's own series shows it only
    # after MIN_DIFFERENCES reruns; every curve's cells show it from the second rerun on.
    with_launches = np.isfinite(from_launches)
    rerun_var, rerun_dof = rerun_variance(y, np.where(with_launches, from_launches ** 2, np.nan), curve)
    # Cells without a launch spread (one launch a rerun): the whole rerun-to-rerun spread, from their like.
    alone_var, alone_dof = rerun_variance(np.where(with_launches, np.nan, y), np.zeros_like(y), curve)
    launch_part = np.where(with_launches, from_launches ** 2, 0.0)
    extra = np.where(with_launches, rerun_var, alone_var)
    with np.errstate(invalid="ignore", divide="ignore"):
        combined = np.sqrt(launch_part + np.nan_to_num(extra))
        combined = np.where(with_launches | (np.isfinite(y) & (alone_dof > 0)), combined, np.nan)
        # Welch-Satterthwaite: the degrees of freedom of a sum of two variance estimates.
        launch_sum = np.where(with_launches, launch_part, 0.0).sum(axis=1)
        mean_launch = launch_sum / with_launches.sum(axis=1)
        launch_dof_part = np.where(mean_launch > 0, mean_launch ** 2 / np.fmax(launch_dof, 1e-12), 0.0)
        rerun_dof_part = rerun_var ** 2 / rerun_dof if rerun_dof > 0 else 0.0
        summed = np.where(np.isfinite(mean_launch), mean_launch, 0.0) + rerun_var
        with_rerun_dof = np.where(launch_dof > 0, summed ** 2 / (launch_dof_part + rerun_dof_part), 0.0)
    with_rerun_dof = np.where(rerun_var > 0, with_rerun_dof, launch_dof)
    combined_dof = np.where(launch_dof > 0, with_rerun_dof, alone_dof)
    # Where the launches (and the reruns of every curve) give a scale, the floor can only make the cell's
    # test more cautious, so their degrees of freedom stand; where they give none, the floor's.
    dof = np.where(combined_dof > 0, combined_dof, MAD_EFFICIENCY * floor_count)
    scale = np.fmax(combined, floor[:, None])
    scale = np.where(np.isfinite(scale), np.fmax(scale, RESOLUTION), np.nan)
    return NoiseScale(scale=scale, dof=np.where(np.isfinite(scale).any(axis=1), dof, 0.0))


def rerun_variance(y: np.ndarray, launch_var: np.ndarray, curve: np.ndarray) -> tuple[float, float]:
    """The variance (log units) that a rerun adds to a location beyond its launches' noise, shared by every
    cell, and its degrees of freedom; (0, 0) without two reruns of any cell.

    Between successive measured reruns of a cell, d = y_r - y_prev has variance 2 tau^2 + v_r + v_prev (v:
    `launch_var`, the launch part of each location's variance). tau^2 solves median(d^2 / (2 tau^2 + v_r +
    v_prev)) = the chi-square(1) median: a median, so a real change in a minority of curves hardly moves it.
    The cells of a curve share a rerun's shift (a reboot moves the whole curve), so the degrees of freedom
    count the curves' differences, not the cells'."""
    observed = np.isfinite(y)
    previous = _previous_observed(observed)
    rows = np.arange(y.shape[0])[:, None]
    pair = observed & (previous >= 0)
    before = np.maximum(previous, 0)
    squared = np.where(pair, (y - y[rows, before]) ** 2, np.nan)
    launch_part = np.where(pair, launch_var + launch_var[rows, before], np.nan)
    usable = np.isfinite(squared) & np.isfinite(launch_part)
    if not usable.any():
        return 0.0, 0.0
    d2, a = squared[usable], launch_part[usable]
    units = len({(c, r) for c, r in zip(np.broadcast_to(np.asarray(curve)[:, None], y.shape)[usable],
                                         np.broadcast_to(np.arange(y.shape[1]), y.shape)[usable])})
    dof = MAD_EFFICIENCY * units

    def excess(tau2):
        total = a + 2 * tau2
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(total > 0, d2 / total, np.where(d2 > 0, np.inf, 0.0))
        return np.median(ratio) - CHI2_1_MEDIAN

    if excess(0.0) <= 0:
        return 0.0, dof
    low, high = 0.0, float(np.median(d2)) / (2 * CHI2_1_MEDIAN) + 1e-12
    for _ in range(60):              # bisection: excess falls as tau^2 grows
        middle = (low + high) / 2
        low, high = (middle, high) if excess(middle) > 0 else (low, middle)
    return (low + high) / 2, dof


def _window_sum(values: np.ndarray, curve: np.ndarray, reach: int) -> np.ndarray:
    """Sum of `values` (cells,) over the cells within `reach` rows either side in the same curve."""
    if reach == 0:
        return values
    n = values.size
    first, last = _curve_bounds(curve)
    index = np.arange(n)
    low, high = np.maximum(index - reach, first), np.minimum(index + reach, last)
    running = np.concatenate([[0.0], np.cumsum(values)])
    return running[high + 1] - running[low]


def _curve_bounds(curve: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the first and last row of its curve (curves are runs of equal ids)."""
    n = curve.size
    starts = np.flatnonzero(np.concatenate([[True], curve[1:] != curve[:-1]]))
    ends = np.concatenate([starts[1:] - 1, [n - 1]])
    run = np.repeat(np.arange(starts.size), np.diff(np.concatenate([starts, [n]])))
    return starts[run], ends[run]


def _series_floor(y: np.ndarray, curve: np.ndarray, reach: int) -> tuple[np.ndarray, np.ndarray]:
    """Robust standard deviation of one rerun's location from the differences between successive
    measured reruns (pooled over the cell's neighbours), and how many differences it rests on, per
    cell; NaN where the cell itself has fewer than MIN_DIFFERENCES."""
    observed = np.isfinite(y)
    previous = _previous_observed(observed)
    rows = np.arange(y.shape[0])[:, None]
    has_previous = observed & (previous >= 0)
    with np.errstate(invalid="ignore"):
        steps = np.where(has_previous, np.abs(y - y[rows, np.maximum(previous, 0)]), np.nan)
    enough = has_previous.sum(axis=1) >= MIN_DIFFERENCES
    floor, count = np.full(y.shape[0], np.nan), np.zeros(y.shape[0])
    first, last = _curve_bounds(curve)
    for start in range(0, y.shape[0], CHUNK_CELLS):
        rows = np.arange(start, min(start + CHUNK_CELLS, y.shape[0]))
        rows = rows[enough[rows]]
        if not rows.size:
            continue
        pooled = np.concatenate([np.where(((rows + offset >= first[rows]) & (rows + offset <= last[rows]))[:, None],
                                          steps[np.clip(rows + offset, 0, y.shape[0] - 1)], np.nan)
                                 for offset in range(-reach, reach + 1)], axis=1)
        floor[rows] = MAD_TO_SD * np.nanmedian(pooled, axis=1) / np.sqrt(2)
        count[rows] = np.isfinite(pooled).sum(axis=1)
    return floor, count


def _previous_observed(observed: np.ndarray) -> np.ndarray:
    """Index of the last observed rerun before each rerun (-1: none), (cells, reruns)."""
    index = np.where(observed, np.arange(observed.shape[1]), -1)
    last_up_to = np.maximum.accumulate(index, axis=1)
    return np.concatenate([np.full((observed.shape[0], 1), -1), last_up_to[:, :-1]], axis=1)


def penalty_for_dof(change_penalty: float, dof: np.ndarray) -> np.ndarray:
    """The penalty for a noise scale estimated with `dof` degrees of freedom: a split's gain is then
    an F(1, dof) variable, not a chi-square(1) one, and its tail is heavier; the penalty moves to the
    same tail probability (no change for dof 0: such cells are not tested)."""
    from scipy import stats

    dof = np.asarray(dof, float)
    tail = stats.chi2.sf(change_penalty, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        adjusted = stats.t.isf(tail / 2, np.where(dof > 0, dof, 1)) ** 2
    return np.where(dof > 0, np.fmax(adjusted, change_penalty), np.inf)


def segment(log_location: np.ndarray, noise: NoiseScale, min_effect: float = 0.05,
            change_penalty: float | None = None) -> ChangeSegmentation:
    """The penalised piecewise-constant fit of every cell's series; see the module's docstring.

    `log_location` is (cells, reruns), NaN where a rerun did not measure the cell; `noise` comes from
    noise_scale. The penalty (for a known noise scale) defaults to penalty(reruns, cells); each cell's
    is then carried to its noise estimate's degrees of freedom (penalty_for_dof)."""
    y = np.asarray(log_location, float)
    scale = np.asarray(noise.scale, float)
    if y.ndim != 2 or y.shape != scale.shape:
        raise ValueError(f"log_location and the noise scale must be (cells, reruns) alike; got {y.shape} "
                         f"and {scale.shape}")
    n_cells, n_reruns = y.shape
    base = penalty(n_reruns, n_cells) if change_penalty is None else float(change_penalty)
    beta = penalty_for_dof(base, noise.dof)
    known = np.isfinite(y) & np.isfinite(scale) & (scale > 0)
    weight = np.where(known, 1 / np.where(known, scale, 1.0) ** 2, 0.0)
    y = np.where(known, y, 0.0)
    tested = (known.sum(axis=1) >= 2) & np.isfinite(beta)
    change = np.zeros(y.shape, dtype=bool)
    candidates = np.flatnonzero(tested & ~_surely_flat(y, weight, beta, min_effect))
    for start in range(0, candidates.size, CHUNK_CELLS):
        rows = candidates[start:start + CHUNK_CELLS]
        change[rows] = _merge_small_steps(_optimal_partition(y[rows], weight[rows], beta[rows]),
                                          y[rows], weight[rows], min_effect)
    level, level_se = _levels(change, y, weight)
    return ChangeSegmentation(change=change, level=level, level_se=level_se, tested=tested)


def _surely_flat(y: np.ndarray, weight: np.ndarray, beta: np.ndarray, min_effect: float) -> np.ndarray:
    """Cells where no change can be reported, found without the dynamic programme: a series whose
    whole weighted sum of squares is at most the penalty (every segmentation with a change costs at
    least the penalty, the single segment costs that sum), or whose measured levels all lie within
    min_effect of each other (segment levels are averages of them, so every step would be merged)."""
    total = weight.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (weight * y).sum(axis=1) / total
        squares = (weight * (y - mean[:, None]) ** 2).sum(axis=1)
    observed = weight > 0
    spread = np.where(observed, y, -np.inf).max(axis=1) - np.where(observed, y, np.inf).min(axis=1)
    return (squares <= beta) | (np.expm1(spread) < min_effect)


def _optimal_partition(y: np.ndarray, weight: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """Exact minimiser of (weighted squares within segments + beta per change) for every row, by
    dynamic programming over the start of the last segment; (rows, reruns) bool, True where a new
    segment starts at a measured rerun."""
    n_rows, n = y.shape
    # Centred per row: the cumulative sums then stay small and the costs exact to rounding.
    centre = (weight * y).sum(axis=1) / weight.sum(axis=1)
    yc = np.where(weight > 0, y - centre[:, None], 0.0)
    # Reruns first, rows second: each step reads a contiguous block of every running sum.
    zeros = np.zeros((1, n_rows))
    sum_w = np.concatenate([zeros, np.cumsum(weight.T, axis=0)])
    sum_wy = np.concatenate([zeros, np.cumsum((weight * yc).T, axis=0)])
    sum_wyy = np.concatenate([zeros, np.cumsum((weight * yc ** 2).T, axis=0)])
    best = np.empty((n + 1, n_rows))
    beta = np.asarray(beta, float)
    best[0] = -beta              # the first segment pays no change
    last_start = np.zeros((n + 1, n_rows), dtype=np.int64)
    tiny = np.finfo(float).tiny  # a segment of unmeasured reruns has no weight and no sum: cost 0
    for end in range(1, n + 1):
        weight_in = sum_w[end] - sum_w[:end]
        np.maximum(weight_in, tiny, out=weight_in)
        explained = sum_wy[end] - sum_wy[:end]
        np.square(explained, out=explained)
        explained /= weight_in
        total = sum_wyy[end] - sum_wyy[:end]
        total -= explained            # the segment's weighted squares about its mean
        total += best[:end]
        total += beta
        last_start[end] = np.argmin(total, axis=0)
        best[end] = np.take_along_axis(total, last_start[end][None], axis=0)[0]
    last_start = last_start.T
    starts = np.zeros((n_rows, n), dtype=bool)
    rows = np.arange(n_rows)
    ends = np.full(n_rows, n)
    while (ends > 0).any():
        active = ends > 0
        start = last_start[rows[active], ends[active]]
        inner = start > 0
        starts[rows[active][inner], start[inner]] = True
        ends[active] = start
    return _at_measured_reruns(starts, weight > 0)


def _at_measured_reruns(starts: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Segment starts moved to the first measured rerun at or after them (a change inside a gap of
    unmeasured reruns is seen when measuring resumes); starts with no measured rerun before them
    dropped."""
    segment_id = np.cumsum(starts, axis=1)
    previous = _previous_observed(observed)
    rows = np.arange(starts.shape[0])[:, None]
    previous_id = segment_id[rows, np.maximum(previous, 0)]
    return observed & (previous >= 0) & (segment_id != previous_id)


def _segment_sums(change: np.ndarray, y: np.ndarray, weight: np.ndarray):
    """Per row and segment (numbered from 0 by the changes before each rerun): the segment of each
    rerun, and the segments' sums of weights and of weighted values, (rows, reruns) each."""
    n_rows, n = change.shape
    segment_id = np.cumsum(change, axis=1)
    flat = (np.arange(n_rows)[:, None] * n + segment_id).ravel()
    sum_w = np.bincount(flat, weights=weight.ravel(), minlength=n_rows * n).reshape(n_rows, n)
    sum_wy = np.bincount(flat, weights=(weight * y).ravel(), minlength=n_rows * n).reshape(n_rows, n)
    return segment_id, sum_w, sum_wy


def _merge_small_steps(change: np.ndarray, y: np.ndarray, weight: np.ndarray, min_effect: float) -> np.ndarray:
    """Removes, one per row and round, the change between the two adjacent levels closest to each
    other while they differ by less than min_effect (relative); the levels are recomputed each round."""
    change = change.copy()
    rows = np.arange(change.shape[0])
    while change.any():
        segment_id, sum_w, sum_wy = _segment_sums(change, y, weight)
        with np.errstate(invalid="ignore", divide="ignore"):
            level = sum_wy / sum_w
        after = level[rows[:, None], segment_id]
        before = level[rows[:, None], np.maximum(segment_id - 1, 0)]
        step = np.where(change, np.abs(after - before), np.inf)
        # Relative effect as compare reports it: new / old - 1, either way.
        small = change & (np.abs(np.expm1(after - before)) < min_effect)
        merging = small.any(axis=1)
        if not merging.any():
            break
        closest = np.argmin(np.where(small, step, np.inf), axis=1)
        change[rows[merging], closest[merging]] = False
    return change


def _levels(change: np.ndarray, y: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each rerun's segment level (log) and its standard error, (rows, reruns); NaN where the
    segment has no measured rerun."""
    rows = np.arange(change.shape[0])[:, None]
    segment_id, sum_w, sum_wy = _segment_sums(change, y, weight)
    with np.errstate(invalid="ignore", divide="ignore"):
        level = np.where(sum_w > 0, sum_wy / sum_w, np.nan)[rows, segment_id]
        level_se = np.where(sum_w > 0, 1 / np.sqrt(sum_w), np.nan)[rows, segment_id]
    return level, level_se


def steps(seg: ChangeSegmentation) -> tuple[np.ndarray, np.ndarray]:
    """At each change (NaN elsewhere), (cells, reruns): the log ratio of the new level to the one
    before, and its standard error given where the change is (an interval from it is conditional on
    the change's position, which the data chose, so it is somewhat optimistic)."""
    # A change is never at the first rerun, and the rerun before it belongs to the previous segment.
    before = np.concatenate([np.full((seg.level.shape[0], 1), np.nan), seg.level[:, :-1]], axis=1)
    before_se = np.concatenate([np.full((seg.level.shape[0], 1), np.nan), seg.level_se[:, :-1]], axis=1)
    log_ratio = np.where(seg.change, seg.level - before, np.nan)
    se = np.where(seg.change, np.hypot(seg.level_se, before_se), np.nan)
    return log_ratio, se
