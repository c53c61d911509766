"""Per-point statistics over a campaign's samples, vectorised over every other dimension.

Each function takes the `time` DataArray (or any array with `launch` and `sample`
dims, NaN where absent) and reduces over samples, launches or both; the result
broadcasts over library, placement, kernel and size.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager

import numpy as np
import xarray as xr

POOLED = ("launch", "sample")
# The percentiles the summary gives next to the mean and median (OSU's -z: P50, P90, P99).
PERCENTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}


@contextmanager
def _empty_points_allowed():
    """A point of a failed launch is all NaN; its statistics are NaN, not a warning."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="All-NaN slice", category=RuntimeWarning)
        warnings.filterwarnings("ignore", message="Mean of empty slice", category=RuntimeWarning)
        yield


def median(time: xr.DataArray, dim=POOLED) -> xr.DataArray:
    return time.median(dim=list(dim))


def mean(time: xr.DataArray, dim=POOLED) -> xr.DataArray:
    return time.mean(dim=list(dim))


def minimum(time: xr.DataArray, dim=POOLED) -> xr.DataArray:
    return time.min(dim=list(dim))


def interquartile_mean(time: xr.DataArray, dim=POOLED) -> xr.DataArray:
    """Mean of the samples between the first and third quartiles (inclusive): robust to outliers."""
    q1 = time.quantile(0.25, dim=list(dim)).drop_vars("quantile")
    q3 = time.quantile(0.75, dim=list(dim)).drop_vars("quantile")
    inner = time.where((time >= q1) & (time <= q3))
    return inner.mean(dim=list(dim))


def bytes_factor(kernel: str, nprocs: float) -> float:
    """Bytes a kernel moves per timed unit, in units of its message size (see each kernel's metric
    line): both directions for the bidirectional kernels, every pair for multipair, every task
    for the file kernels; NaN where that needs the ranks and `nprocs` is unknown (NaN)."""
    from .campaign import kernel_of

    name = kernel_of(str(kernel))
    if name in ("stream.bi", "exchange.sendrecv", "exchange.sendrecv_replace", "exchange.isend", "pingping"):
        return 2.0
    if name.startswith("multipair."):
        return nprocs // 2
    if name in ("io.own_file", "io.mpiio_all"):
        return 2.0 * nprocs
    if name in ("io.shared_file", "io.read_same"):
        return float(nprocs)
    return 1.0


def bandwidth(median: xr.DataArray, sizes: xr.DataArray) -> xr.DataArray:
    """Bytes moved per second at each point, bytes_factor * size / median time (B/s): the one
    bandwidth the summary, the report and `commbench summary` all print. The kernel and the ranks
    come from `median`'s `kernel` and `nprocs` coordinates; without a kernel, size bytes a unit."""
    if "kernel" in median.coords:
        nprocs = median.coords["nprocs"] if "nprocs" in median.coords else xr.DataArray(np.nan)
        kernel, nprocs = xr.broadcast(median.coords["kernel"], nprocs)
        factors = [bytes_factor(k, n) for k, n in zip(kernel.values.ravel(), nprocs.values.ravel().astype(float))]
        factor = xr.DataArray(np.reshape(factors, kernel.shape), dims=kernel.dims, coords=kernel.coords)
    else:
        factor = 1.0
    out = (factor * sizes / median).transpose(*median.dims)
    out.attrs = {"units": "B/s", "long_name": "bytes moved (size x the kernel's bytes factor) / median time "
                                              "(MB/s = 1e6 B/s)"}
    return out


def percentiles(quantiles: xr.DataArray) -> dict[str, xr.DataArray]:
    """PERCENTILES picked from a DataArray with a `quantile` dim that holds them, as {"p50": ...}."""
    return {name: quantiles.sel(quantile=q).drop_vars("quantile").assign_attrs(units="s")
            for name, q in PERCENTILES.items()}


def bootstrap_ci(time: xr.DataArray, over: str = "sample", confidence: float = 0.95,
                 n_boot: int = 1000, seed: int = 0) -> xr.DataArray:
    """Percentile bootstrap interval of the mean time per point, with a `bound` dim (low, high).

    over="sample": resamples every sample of every launch, pooled; it shows how well
    the samples pin the mean down. over="launch": resamples whole launches (their
    means); it shows how much a new launch could move the result, which on real
    machines is often the larger of the two.
    """
    if over == "sample":
        values = time.stack(_pool=POOLED)
    elif over == "launch":
        values = time.mean("sample").rename(launch="_pool")
    else:
        raise ValueError(f"over must be 'sample' or 'launch', got {over!r}")
    result = _bootstrap_over_pool(values, confidence, n_boot, seed)
    result.attrs = {"long_name": f"{confidence:.0%} bootstrap interval of the mean, over {over}s",
                    "units": time.attrs.get("units", "s")}
    return result


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


def summarize(time: xr.DataArray, sizes: xr.DataArray | None = None, ci: bool = True,
              n_boot: int = 1000, seed: int = 0) -> xr.Dataset:
    """Median, mean, minimum, interquartile mean, P50, P90, P99, count and bandwidth per point
    (all samples pooled), with intervals."""
    with _empty_points_allowed():
        return _summarize(time, sizes, ci, n_boot, seed)


def _summarize(time, sizes, ci, n_boot, seed) -> xr.Dataset:
    out = xr.Dataset({
        "median": median(time), "mean": mean(time), "min": minimum(time),
        "iqm": interquartile_mean(time), "count": time.count(dim=list(POOLED)),
        **percentiles(time.quantile(list(PERCENTILES.values()), dim=list(POOLED))),
    })
    for name in ("median", "mean", "min", "iqm"):
        out[name].attrs["units"] = "s"
    if sizes is not None:
        out["bandwidth"] = bandwidth(out["median"], sizes)
    if ci:
        out["mean_ci_samples"] = bootstrap_ci(time, over="sample", n_boot=n_boot, seed=seed)
        out["mean_ci_launches"] = bootstrap_ci(time, over="launch", n_boot=n_boot, seed=seed)
    return out


# ----------------------------------------------------------------------------- from point statistics

def summarize_points(ds: xr.Dataset, ci: bool = True, n_boot: int = 1000, seed: int = 0,
                     confidence: float = 0.95) -> xr.Dataset:
    """summarize() of a ragged dataset, from its per-point statistics alone (no sample is read).

    Over a point's launches: median = median of the launches' medians (the launch is the
    experimental unit; with one launch, the sample median); mean and interquartile mean over
    all samples (the launches' values weighted by their counts); min; count; bandwidth (see
    bandwidth()) from the median; quantiles = median over launches of each launch's quantile, and
    from them p50, p90 and p99 (a typical launch's percentile; p50 is the median). Intervals of the mean:
    over samples, normal (mean -+ z sd / sqrt(n), the pooled sd from the launches' means and
    sds); over launches, the percentile bootstrap of the launches' means, as bootstrap_ci.
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
            half = _normal_quantile(confidence) * sd / np.sqrt(total.where(total > 1))
            out["mean_ci_samples"] = xr.concat([out["mean"] - half, out["mean"] + half], dim="bound") \
                .assign_coords(bound=["low", "high"]).transpose(*out["mean"].dims, "bound")
            out["mean_ci_samples"].attrs = {"long_name": f"{confidence:.0%} normal interval of the mean, over "
                                                        "samples", "units": "s"}
            launch_means = ds["mean"].where(measured).rename(launch="_pool")
            out["mean_ci_launches"] = _bootstrap_over_pool(launch_means, confidence, n_boot, seed)
            out["mean_ci_launches"].attrs = {"long_name": f"{confidence:.0%} bootstrap interval of the mean, "
                                                         "over launches", "units": "s"}
    return out


def _normal_quantile(confidence: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + confidence / 2)
