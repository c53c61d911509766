"""Samples stored in proportion to the data: a CF contiguous ragged array, and the per-point
statistics that figures, tables and fits read instead of the samples.

A dataset's points are the cells of POINT_DIMS (library, placement, kernel, size, launch).
Their samples sit end to end in one 1-D variable `time(sample)`, point after point in
RAGGED_ORDER (library, placement, kernel, launch, size): the order in which a campaign's
launches write them, so collecting streams them to disk as it reads, and all samples of one
curve (every size and launch of one library, placement and kernel) are one contiguous slice.
`sample_count` over the point dims says how many each point holds (CF's count variable,
`sample_dimension = "sample"`); a point's first sample is the sum of the counts before it.

Why this layout and not a dense (point x max samples) cube or chunked storage: sample counts
differ by three orders of magnitude between points (an adaptive stopping rule), so any dense
axis is mostly padding; a ragged array is exactly the data, is plain netCDF that any CF reader
understands, needs no extra dependency, and a curve is read with one slice.
"""

from __future__ import annotations

import warnings
from statistics import NormalDist

import numpy as np
import xarray as xr

POINT_DIMS = ("library", "placement", "kernel", "size", "launch")
RAGGED_ORDER = ("library", "placement", "kernel", "launch", "size")
CURVE_DIMS = ("library", "placement", "kernel")
# How the ragged `time` variable is laid out, in its long_name wherever a dataset is made.
RAGGED_TIME = ("a ragged array, each point's samples in turn, as many as its sample_count (point_sample_count "
               "on disk)")
# Quantiles kept per point (OSU's -z reports P50, P90, P99).
QUANTILES = (0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99)
# A distribution-free 95% interval of a point's median: order statistics n/2 -+ 1.96 sqrt(n)/2.
MEDIAN_Z = NormalDist().inv_cdf(0.975)
# Per-curve sample cubes for the analysis keep at most this many evenly spaced order statistics
# per point (all of them below it); the true count travels with them (see curve_cube).
CUBE_SAMPLES = 1001



def quiet_nanmedian(values, axis):
    """Median ignoring NaN; an all-NaN slice gives NaN without a warning (a failed launch, a rank and
    itself in a matrix of pair times)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="All-NaN slice", category=RuntimeWarning)
        return np.nanmedian(values, axis=axis)


def quiet_nanmean(values, axis):
    """Mean ignoring NaN; an all-NaN slice gives NaN without a warning (a rank and itself in a matrix
    of pair times)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Mean of empty slice", category=RuntimeWarning)
        return np.nanmean(values, axis=axis)


POINT_STATISTICS = {
    "median": "median of the point's samples",
    "mean": "mean of the point's samples",
    "min": "smallest sample",
    "iqm": "interquartile mean: mean of the samples between the first and third quartiles",
    "std": "standard deviation of the samples (ddof 1; NaN below 2 samples)",
}


def point_statistics(samples: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Statistics of each point's samples (1-D arrays, seconds): `sample_count`, POINT_STATISTICS,
    `quantiles` (n_points, len(QUANTILES)) and `median_ci` (n_points, 2: low, high)."""
    n = len(samples)
    out = {name: np.full(n, np.nan) for name in POINT_STATISTICS}
    out["sample_count"] = np.zeros(n, dtype=np.int64)
    out["quantiles"] = np.full((n, len(QUANTILES)), np.nan)
    out["median_ci"] = np.full((n, 2), np.nan)
    for i, values in enumerate(samples):
        values = np.sort(np.asarray(values, dtype=float))
        count = values.size
        out["sample_count"][i] = count
        if not count:
            continue
        half = count // 2
        out["median"][i] = values[(count - 1) // 2] if count % 2 else 0.5 * (values[half - 1] + values[half])
        out["mean"][i] = values.mean()
        out["min"][i] = values[0]
        q1, q3 = np.quantile(values, (0.25, 0.75))
        # Empty for two samples: NaN (no sample between the quartiles).
        inner = values[(values >= q1) & (values <= q3)]
        out["iqm"][i] = inner.mean() if inner.size else np.nan
        out["std"][i] = values.std(ddof=1) if count > 1 else np.nan
        out["quantiles"][i] = np.quantile(values, QUANTILES)
        half = MEDIAN_Z * np.sqrt(count) / 2
        low, high = int(np.floor((count - 1) / 2 - half)), int(np.ceil((count - 1) / 2 + half))
        out["median_ci"][i] = values[max(low, 0)], values[min(high, count - 1)]
    return out


class PointStatistics:
    """The per-point statistics of a dataset being built, dense over POINT_DIMS (`shape`); points
    never given stay at count 0 and NaN."""

    def __init__(self, shape: tuple[int, ...]):
        self.shape = tuple(shape)
        self.values = point_statistics([])
        for name, empty in self.values.items():
            fill = 0 if name == "sample_count" else np.nan
            self.values[name] = np.full(self.shape + empty.shape[1:], fill, dtype=empty.dtype)

    def put(self, indices: list[tuple[int, ...]], samples: list[np.ndarray]) -> None:
        """Statistics of the points at `indices` (over POINT_DIMS) from their samples."""
        self.put_computed(indices, point_statistics(samples))

    def put_computed(self, indices: list[tuple[int, ...]] | np.ndarray, computed: dict[str, np.ndarray]) -> None:
        """point_statistics already computed for the points at `indices`, in the same order."""
        at = tuple(np.array(indices, dtype=np.int64).reshape(-1, len(self.shape)).T)
        for name, values in computed.items():
            self.values[name][at] = values

    def variables(self) -> dict:
        """As dataset variables over POINT_DIMS (with `quantile` and `bound` dims)."""
        v = self.values
        variables: dict[str, tuple[tuple[str, ...], np.ndarray, dict[str, str]]] = {
            "sample_count": (POINT_DIMS, v["sample_count"],
                             {"long_name": "samples of the point (0: not measured)",
                              "sample_dimension": "sample", "sample_order": " ".join(RAGGED_ORDER)})}
        for name, meaning in POINT_STATISTICS.items():
            variables[name] = (POINT_DIMS, v[name], {"units": "s", "long_name": meaning})
        variables["quantiles"] = (POINT_DIMS + ("quantile",), v["quantiles"],
                                  {"units": "s", "long_name": "quantiles of the point's samples"})
        variables["median_ci"] = (POINT_DIMS + ("bound",), v["median_ci"],
                                  {"units": "s", "long_name": "95% distribution-free interval of the median "
                                                              "(order statistics)"})
        return variables


STAT_COORDS = {"quantile": ("quantile", list(QUANTILES)), "bound": ("bound", ["low", "high"])}


def ragged_positions(sample_count: np.ndarray) -> np.ndarray:
    """First sample of every point, shaped like `sample_count` (POINT_DIMS), for counts laid out in
    RAGGED_ORDER: what `sample_start` holds when a dataset is made."""
    order = [POINT_DIMS.index(dim) for dim in RAGGED_ORDER]
    in_order = np.transpose(sample_count, order)
    flat = in_order.ravel().astype(np.int64)
    starts = (np.cumsum(flat) - flat).reshape(in_order.shape)       # exclusive: the counts before each point
    return np.transpose(starts, np.argsort(order)).astype(np.int64)


def start_variable(sample_count: np.ndarray) -> dict:
    """`sample_start` over POINT_DIMS. Kept, not derived at each use: a selection of the dataset
    (ds.sel(library=...)) keeps each point's start right, where counts alone would not."""
    return {"sample_start": (POINT_DIMS, ragged_positions(sample_count),
                             {"long_name": "index in `time` of the point's first sample"})}


def is_ragged(ds: xr.Dataset) -> bool:
    return "sample_count" in ds and ds["time"].dims == ("sample",)


def curve_slice(ds: xr.Dataset, cell: tuple[int, ...]):
    """One curve (integer cell over CURVE_DIMS) as (counts (n_sizes, n_launches), starts relative to
    `values`, values): one contiguous read of `time` covering all its points."""
    counts = ds["sample_count"].transpose(*POINT_DIMS).values[cell]
    starts = ds["sample_start"].transpose(*POINT_DIMS).values[cell]
    if not counts.any():
        return counts, starts, np.empty(0)
    first, last = int(starts[counts > 0].min()), int((starts + counts)[counts > 0].max())
    return counts, starts - first, np.asarray(ds["time"][first:last].values, dtype=float)


def curve_cube(counts: np.ndarray, starts: np.ndarray, values: np.ndarray, limit: int | None = CUBE_SAMPLES,
               sort: bool = True) -> np.ndarray:
    """One curve's samples as a cube (n_sizes, n_launches, m), NaN-padded, each point's samples
    sorted (or as measured, with sort=False and no limit). A point with more than `limit` samples
    keeps `limit` evenly spaced order statistics (its median among them): the analysis reads a
    point's distribution, not every sample, and the cube stays small whatever the stopping rule
    took. Counts give the true sizes."""
    limit = limit or max(int(counts.max(initial=0)), 1)
    n_sizes, n_launches = counts.shape
    width = int(min(counts.max(initial=0), limit))
    cube = np.full((n_sizes, n_launches, max(width, 1)), np.nan)
    for size, launch in zip(*np.nonzero(counts)):
        n, start = int(counts[size, launch]), int(starts[size, launch])
        point = values[start:start + n]
        if sort or n > limit:
            point = np.sort(point)
        if n > limit:
            point = point[np.rint(np.linspace(0, n - 1, limit)).astype(np.int64)]
        cube[size, launch, :point.size] = point
    return cube


def from_cube(time: xr.DataArray) -> tuple[np.ndarray, PointStatistics]:
    """A dense (POINT_DIMS..., sample) array, NaN where absent (the layout of older datasets and
    of synthetic cubes), as (ragged samples in RAGGED_ORDER, their point statistics)."""
    dense = time.transpose(*POINT_DIMS, "sample").values
    stats = PointStatistics(dense.shape[:-1])
    order = [POINT_DIMS.index(dim) for dim in RAGGED_ORDER]
    indices = [tuple(np.array(i)[np.argsort(order)]) for i in np.ndindex(*np.array(dense.shape[:-1])[order])]
    per_point = [dense[index][np.isfinite(dense[index])] for index in indices]
    stats.put(indices, per_point)
    return (np.concatenate(per_point) if per_point else np.empty(0)), stats


def launches_cube(per_launch: list[dict[int, np.ndarray]], sizes) -> np.ndarray:
    """Times (sizes, launches, samples) from each launch's {size: samples}, padded with NaN to the
    longest point: the layout of synthetic.dataset_from_cubes and of the curve detectors."""
    width = max(len(samples) for run in per_launch for samples in run.values())
    times = np.full((len(sizes), len(per_launch), width), np.nan)
    for number, run in enumerate(per_launch):
        for row, size in enumerate(sizes):
            times[row, number, :len(run[size])] = run[size]
    return times
