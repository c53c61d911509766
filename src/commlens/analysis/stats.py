"""The summary of a campaign per point (library, placement, kernel, size), over its launches,
computed from the per-point statistics a ragged dataset keeps (no sample is read), vectorised over
every point.

The launch is the experimental unit (launches vary more than samples within a launch), and the
stopping rule gives launches very different sample counts (10 samples in one, 15,000 in the next),
so nothing is pooled across launches: every statistic is computed per launch, and the summary is
the median over launches of the per-launch values (the minimum: the smallest of them). Medians of
per-launch values keep every order a launch has: where each launch's mean is below its P99, so is
the summary's.

Each statistic the report draws comes with the interval of that statistic (`interval_over_launches`):
with one launch, the launch's own; with several, an interval over the launches' values, never
narrower than a typical launch's own.
"""

from __future__ import annotations

import warnings
from typing import cast
from contextlib import contextmanager

import numpy as np
import xarray as xr
from scipy import stats as scipy_stats

from commlens.analysis.constants import MEDIAN_EFFICIENCY, normal_quantile
from commlens.data.quantities import bandwidth, percentiles

# Statistics of a point that the summary combines over launches as the median of the launches' values.
TYPICAL = ("median", "mean", "iqm")


@contextmanager
def _empty_points_allowed():
    """A point of a failed launch is all NaN; its statistics are NaN, not a warning."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="All-NaN slice", category=RuntimeWarning)
        warnings.filterwarnings("ignore", message="Mean of empty slice", category=RuntimeWarning)
        warnings.filterwarnings("ignore", message="Degrees of freedom", category=RuntimeWarning)
        yield


def interval_over_launches(values: xr.DataArray, within: xr.DataArray, confidence: float = 0.95) -> xr.DataArray:
    """The interval of the median over launches of `values` (one per launch, NaN where a launch has
    none), with a `bound` dim (low, high).

    With one launch: `within`, that launch's own interval of the statistic (a `bound` dim). With
    L >= 2 launches, the launches' values are the sample: on the log scale (times are positive and
    launch effects multiplicative, as commlens.analysis.compare treats them) the interval is the
    median -+ t(L-1) * sqrt(pi/2) * sd / sqrt(L), the t interval of a mean widened by the median's
    larger standard error (from three launches on: the median of two is their mean); and it is never
    narrower than a typical launch's own interval (the median over launches of each bound), which it
    then spans. By construction the median lies inside.
    """
    launches = values.count("launch")
    centre = values.median("launch")
    typical_low = within.sel(bound="low", drop=True).median("launch")
    typical_high = within.sel(bound="high", drop=True).median("launch")
    positive = (values > 0) | values.isnull()
    # numpy's stubs: a ufunc of a DataArray is one
    logs = cast(xr.DataArray, np.log(values.where(positive.all("launch"))))
    sd = logs.std("launch", ddof=1)
    t = xr.apply_ufunc(lambda n: scipy_stats.t.ppf(0.5 + confidence / 2, np.maximum(n - 1, 1)), launches)
    # The median of two values is their mean; from three on, its standard error is larger.
    t = t * xr.where(launches > 2, MEDIAN_EFFICIENCY, 1.0)
    half = t * sd / np.sqrt(launches)
    several = launches >= 2
    low = xr.where(several, np.fmin(centre * np.exp(-half), typical_low), typical_low)
    high = xr.where(several, np.fmax(centre * np.exp(half), typical_high), typical_high)
    # A statistic that is not positive in every launch has no log: its launches' spread, linear.
    linear = several & ~positive.all("launch")
    linear_half = t * values.std("launch", ddof=1) / np.sqrt(launches)
    low = xr.where(linear, np.fmin(centre - linear_half, typical_low), low)
    high = xr.where(linear, np.fmax(centre + linear_half, typical_high), high)
    out = xr.concat([low, high], dim="bound").assign_coords(bound=["low", "high"])
    return out.transpose(*centre.dims, "bound").where(launches > 0)


def _mean_within(ds: xr.Dataset, measured: xr.DataArray, confidence: float) -> xr.DataArray:
    """Each launch's own normal interval of its mean, mean -+ z sd / sqrt(n) (the mean alone where
    it has one sample)."""
    half = (normal_quantile(confidence) * ds["std"] / np.sqrt(ds["sample_count"])).fillna(0)
    mean = ds["mean"].where(measured)
    return xr.concat([mean - half, mean + half], dim="bound").assign_coords(bound=["low", "high"])


def summarize_points(ds: xr.Dataset, ci: bool = True, confidence: float = 0.95) -> xr.Dataset:
    """The summary of a ragged dataset (ds.commlens.summary()), from its per-point statistics alone.

    Over a point's launches: median, mean, interquartile mean and each quantile are the median over
    launches of each launch's value (with one launch, the launch's own); p50, p90 and p99 are picked
    from the quantiles (p50 is the median); min is the smallest launch minimum; count the samples and
    launches the launches that measured the point; bandwidth (see bandwidth()) is from the median.
    With `ci`: `median_ci` and `mean_ci`, the intervals of those statistics (interval_over_launches:
    the interval of the median drawn as a band, of the mean), and `bandwidth_ci` from `median_ci`.
    """
    with _empty_points_allowed(), np.errstate(invalid="ignore", divide="ignore"):
        count = ds["sample_count"]
        measured = count > 0
        out = xr.Dataset({name: ds[name].where(measured).median("launch") for name in TYPICAL})
        out["min"] = ds["min"].where(measured).min("launch")
        out["count"] = count.sum("launch")
        out["launches"] = measured.sum("launch")
        for name in TYPICAL:
            out[name].attrs = {"units": "s", "long_name": f"median over launches of each launch's {name}"}
        out["min"].attrs = {"units": "s", "long_name": "smallest sample of any launch"}
        if "quantiles" in ds:
            out["quantiles"] = ds["quantiles"].where(measured).median("launch")
            out["quantiles"].attrs["units"] = "s"
            out = out.assign(percentiles(out["quantiles"]))
        out["bandwidth"] = bandwidth(out["median"], ds["size"])
        if ci:
            out["median_ci"] = interval_over_launches(ds["median"].where(measured), ds["median_ci"].where(measured),
                                                      confidence)
            out["median_ci"].attrs = {"units": "s", "long_name": f"{confidence:.0%} interval of the median over "
                                      "launches (one launch: its own distribution-free interval)"}
            out["mean_ci"] = interval_over_launches(ds["mean"].where(measured),
                                                    _mean_within(ds, measured, confidence), confidence)
            out["mean_ci"].attrs = {"units": "s", "long_name": f"{confidence:.0%} interval of the mean over "
                                    "launches (one launch: its own normal interval)"}
            # Bandwidth falls as time rises: the slow end of the time's interval is its low end.
            low, high = (bandwidth(out["median_ci"].sel(bound=bound, drop=True), ds["size"])
                         for bound in ("high", "low"))
            out["bandwidth_ci"] = xr.concat([low, high], dim="bound").assign_coords(bound=["low", "high"]) \
                .transpose(*out["bandwidth"].dims, "bound")
            out["bandwidth_ci"].attrs = {"units": "B/s", "long_name": "bandwidth at the ends of median_ci"}
    return out
