"""The summary of a campaign per point (library, placement, kernel, size), over its launches:
computed from the per-point statistics a ragged dataset keeps, with intervals of the mean from
the samples and from a bootstrap of the launches, vectorised over every point.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager

import numpy as np
import xarray as xr

from commbench.analysis.constants import normal_quantile
from commbench.data.quantities import bandwidth, percentiles


@contextmanager
def _empty_points_allowed():
    """A point of a failed launch is all NaN; its statistics are NaN, not a warning."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="All-NaN slice", category=RuntimeWarning)
        warnings.filterwarnings("ignore", message="Mean of empty slice", category=RuntimeWarning)
        yield


def _bootstrap_over_pool(values: xr.DataArray, confidence: float, n_boot: int, seed: int) -> xr.DataArray:
    """Percentile bootstrap interval of the mean over the `_pool` dim, per cell of the others (NaN
    where a cell has fewer than two finite values)."""
    keep = [d for d in values.dims if d != "_pool"]
    flat = values.transpose(*keep, "_pool").values.reshape(-1, values.sizes["_pool"])
    bounds = bootstrap_mean_intervals(flat, n_boot, confidence, np.random.default_rng(seed))
    shape = [values.sizes[d] for d in keep] + [2]
    coords = {name: coord for name, coord in values.coords.items() if set(coord.dims) <= set(keep)}
    return xr.DataArray(bounds.reshape(shape), dims=keep + ["bound"], coords={**coords, "bound": ["low", "high"]})


def bootstrap_mean_intervals(rows: np.ndarray, n_boot: int, confidence: float, rng: np.random.Generator,
                             chunk: int = 2048) -> np.ndarray:
    """(low, high) percentile bootstrap interval of the mean of each row's finite values, (rows, 2).

    Vectorised over rows, a chunk at a time (a campaign has a row per point): every row is
    resampled with the same uniform draws, scaled to its own count of finite values, so that
    each row's interval is an ordinary bootstrap of that row while no row costs a Python loop.
    """
    rows = np.asarray(rows, float)
    n = rows.shape[1]
    finite = np.isfinite(rows)
    counts = finite.sum(axis=1)
    order = np.argsort(~finite, axis=1, kind="stable")            # each row's finite values first
    compact = np.take_along_axis(rows, order, axis=1)
    uniform = rng.random((n_boot, n))
    tail = (1 - confidence) / 2 * 100
    out = np.full((rows.shape[0], 2), np.nan)
    usable = np.flatnonzero(counts >= 2)
    for start in range(0, usable.size, chunk):
        index = usable[start:start + chunk]
        k = counts[index][:, None, None]
        draws = np.minimum((uniform[None] * k).astype(np.int64), k - 1)          # (rows, n_boot, n)
        picked = np.take_along_axis(compact[index][:, None, :], draws, axis=2)
        in_row = np.arange(n)[None, None, :] < k                                 # the first k draws count
        means = np.where(in_row, picked, 0.0).sum(axis=2) / k[:, :, 0]
        out[index] = np.percentile(means, [tail, 100 - tail], axis=1).T
    return out


def summarize_points(ds: xr.Dataset, ci: bool = True, n_boot: int = 1000, seed: int = 0,
                     confidence: float = 0.95) -> xr.Dataset:
    """The summary of a ragged dataset (ds.commbench.summary()), from its per-point statistics
    alone (no sample is read).

    Over a point's launches: median = median of the launches' medians (the launch is the
    experimental unit; with one launch, the sample median); mean and interquartile mean over
    all samples (the launches' values weighted by their counts); min; count; bandwidth (see
    bandwidth()) from the median; quantiles = median over launches of each launch's quantile, and
    from them p50, p90 and p99 (a typical launch's percentile; p50 is the median). Intervals of the mean:
    over samples, normal (mean -+ z sd / sqrt(n), the pooled sd from the launches' means and
    sds); over launches, the percentile bootstrap of the launches' means (bootstrap_mean_intervals).
    """
    with _empty_points_allowed(), np.errstate(invalid="ignore", divide="ignore"):
        count = ds["sample_count"]
        measured = count > 0
        total = count.sum("launch")
        weight = count.where(measured)

        def weighted(name):
            return (ds[name] * weight).sum("launch", min_count=1) / total.where(total > 0)

        out = xr.Dataset({
            "median": ds["median"].where(measured).median("launch"),
            "mean": weighted("mean"),
            "min": ds["min"].where(measured).min("launch"),
            "iqm": weighted("iqm"),
            "count": total,
        })
        for name in ("median", "mean", "min", "iqm"):
            out[name].attrs["units"] = "s"
        if "quantiles" in ds:
            out["quantiles"] = ds["quantiles"].where(measured).median("launch")
            out["quantiles"].attrs["units"] = "s"
            out = out.assign(percentiles(out["quantiles"]))
        out["bandwidth"] = bandwidth(out["median"], ds["size"])
        if ci:
            # Pooled variance: within-launch sums of squares plus between-launch spread of the means.
            within = ((count - 1).clip(min=0) * ds["std"].fillna(0) ** 2).where(measured).sum("launch")
            between = (weight * (ds["mean"] - out["mean"]) ** 2).sum("launch")
            sd = np.sqrt((within + between) / (total - 1).where(total > 1))
            half = normal_quantile(confidence) * sd / np.sqrt(total.where(total > 1))
            out["mean_ci_samples"] = xr.concat([out["mean"] - half, out["mean"] + half], dim="bound") \
                .assign_coords(bound=["low", "high"]).transpose(*out["mean"].dims, "bound")
            out["mean_ci_samples"].attrs = {"long_name": f"{confidence:.0%} normal interval of the mean, over "
                                                        "samples", "units": "s"}
            launch_means = ds["mean"].where(measured).rename(launch="_pool")
            out["mean_ci_launches"] = _bootstrap_over_pool(launch_means, confidence, n_boot, seed)
            out["mean_ci_launches"].attrs = {"long_name": f"{confidence:.0%} bootstrap interval of the mean, "
                                                         "over launches", "units": "s"}
    return out
