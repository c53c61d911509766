"""Quantities derived from a point's statistics: the bandwidth a kernel achieved and the percentiles
people compare with OSU's `-z` output."""

from __future__ import annotations

import numpy as np
import xarray as xr

from commlens.launch.catalogue import describe_kernel

# The percentiles the summary gives next to the mean and median (OSU's -z: P50, P90, P99).
PERCENTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}


def tail_samples(quantile: float) -> int:
    """Samples a launch needs before its `quantile` is shown: 1 / (1 - quantile), enough that one of them
    can lie beyond it (10 for P90, 100 for P99). From fewer, a launch's P99 is its slowest sample or two,
    not a tail."""
    return round(1 / (1 - quantile))


# The tails shown only from enough samples a launch (P50, the median, is a launch's from one sample).
TAILS = {name: tail_samples(q) for name, q in PERCENTILES.items() if q > 0.5}


def bytes_factor(kernel: str, nprocs: float, factor: float | None = None, per: str | None = None) -> float:
    """Bytes a kernel moves per timed unit, in units of its message size (the catalogue's bytes_moved:
    both directions for the bidirectional kernels, every pair for multipair, every task for the file
    kernels); NaN where that needs the ranks and `nprocs` is unknown (NaN). `factor` and `per` are
    what the dataset recorded for the kernel (its `bytes_factor` and `bytes_per` coordinates); a
    dataset written before recorded none, and the catalogue of these sources says (1 where it cannot)."""
    if factor is None or per in (None, ""):
        described = describe_kernel(str(kernel))
        if described is None:
            return 1.0
        factor, per = described.bytes_factor, described.bytes_per
    return float(factor) * {"once": 1.0, "rank": nprocs, "pair": nprocs // 2}[per]


def kernel_bytes_factors(coords) -> xr.DataArray | float:
    """bytes_factor for every kernel (and placement, where it depends on the ranks) of a DataArray's or
    Dataset's coordinates; 1.0 without a kernel coordinate."""
    if "kernel" not in coords:
        return 1.0
    recorded = "bytes_factor" in coords and "bytes_per" in coords
    nprocs = coords["nprocs"] if "nprocs" in coords else xr.DataArray(np.nan)
    kernel, nprocs = xr.broadcast(coords["kernel"], nprocs)
    factor = xr.broadcast(coords["bytes_factor"], kernel)[0].values.ravel() if recorded else [None] * kernel.size
    per = xr.broadcast(coords["bytes_per"], kernel)[0].values.ravel() if recorded else [None] * kernel.size
    factors = [bytes_factor(k, n, f, p) for k, n, f, p in
               zip(kernel.values.ravel(), nprocs.values.ravel().astype(float), factor, per)]
    return xr.DataArray(np.reshape(factors, kernel.shape), dims=kernel.dims, coords=kernel.coords)


def bandwidth(median: xr.DataArray, sizes: xr.DataArray) -> xr.DataArray:
    """Bytes moved per second at each point, bytes_factor * size / median time (B/s): the one
    bandwidth the summary, the report and `commlens summary` all print. The kernel and the ranks
    come from `median`'s coordinates; without a kernel, size bytes a unit."""
    out = (kernel_bytes_factors(median.coords) * sizes / median).transpose(*median.dims)
    out.attrs = {"units": "B/s", "long_name": "bytes moved (size x the kernel's bytes factor) / median time "
                                              "(MB/s = 1e6 B/s)"}
    return out


def percentiles(quantiles: xr.DataArray) -> dict[str, xr.DataArray]:
    """PERCENTILES picked from a DataArray with a `quantile` dim that holds them, as {"p50": ...}."""
    return {name: quantiles.sel(quantile=q).drop_vars("quantile").assign_attrs(units="s")
            for name, q in PERCENTILES.items()}
