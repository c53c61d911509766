"""Readable tables for the notebooks: one curve point by point, the fitted models curve by curve and
segment by segment, in the report's units (sizes in B/KiB/MiB, times in us, bandwidths in MB/s, every
number with commlens.units' significant figures), one row per thing a reader looks at: never a
dataset's dims expanded into repeated rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from commlens.data.samples import CURVE_DIMS
from commlens.report.analysis_table import ReportData
from commlens.units import MB, US, format_exact_size, format_mbps, format_measured, format_size, format_us


def curve_table(data: ReportData, library: str, placement: str, kernel: str) -> pd.DataFrame:
    """One curve, a row per measured size: the median with its 95% interval, mean, P90, P99, the
    bandwidth with its interval, and how many launches and samples measured it (summary()'s)."""
    points = data.points
    curve = points[(points["library"] == library) & (points["placement"] == placement) & (points["kernel"] == kernel)]
    counts = data.ds["sample_count"].sel(library=library, placement=placement, kernel=kernel).sum("launch")
    return pd.DataFrame({
        "size": curve["size"].map(format_size),
        "median (us) [95%]": [format_measured(m / US, lo / US, hi / US) for m, lo, hi in
                              zip(curve["median_s"], curve["ci_low_s"], curve["ci_high_s"])],
        **{f"{name} (us)": curve[f"{column}_s"].map(format_us) for name, column in
           (("mean", "mean"), ("P90", "p90"), ("P99", "p99"))},
        "bandwidth (MB/s) [95%]": [format_measured(b / MB, lo / MB, hi / MB) for b, lo, hi in
                                   zip(curve["bandwidth_Bps"], curve["bandwidth_low_Bps"],
                                       curve["bandwidth_high_Bps"])],
        "launches": curve["launches"].astype(int),
        "samples": [int(counts.sel(size=size)) for size in curve["size"]],
    }).reset_index(drop=True)


def _curves(fit: xr.Dataset, measured: str):
    """(labels, the fit at that curve) for every curve where `measured` is finite."""
    values = fit[measured].transpose(*CURVE_DIMS).values
    for index in zip(*np.nonzero(np.isfinite(values))):
        labels = {dim: str(fit[dim].values[i]) for dim, i in zip(CURVE_DIMS, index)}
        yield labels, fit.sel(labels)


def _with_interval(value, interval, scale: float) -> str:
    low, high = np.asarray(interval.values, dtype=float) / scale
    return format_measured(float(value) / scale, low, high)


def hockney_table(fit: xr.Dataset) -> pd.DataFrame:
    """ds.commlens.fit("hockney"), a row per curve: latency and bandwidth with their 95% intervals, the
    half-performance size and how closely the line follows the medians."""
    rows = [{**labels,
             "latency (us) [95%]": _with_interval(cell["latency_s"], cell["latency_interval_s"], US),
             "bandwidth (MB/s) [95%]": _with_interval(cell["bandwidth_Bps"], cell["bandwidth_interval_Bps"], MB),
             "n 1/2": format_size(round(float(cell["n_half_bytes"]))) if np.isfinite(cell["n_half_bytes"]) else "",
             "median |residual|": f"{float(cell['median_rel_residual']):.1%}",
             "largest |residual|": f"{float(cell['max_rel_residual']):.1%}",
             "sizes": int(cell["n_sizes"])}
            for labels, cell in _curves(fit, "latency_s")]
    return pd.DataFrame(rows)


def segments_table(fit: xr.Dataset) -> pd.DataFrame:
    """ds.commlens.fit("piecewise"), a row per fitted segment of every curve: the sizes it spans, its
    latency and its bandwidth."""
    rows = []
    for labels, cell in _curves(fit, "n_segments"):
        for segment in range(int(cell["n_segments"])):
            part = cell.sel(segment=segment)
            rows.append({**labels, "segment": segment + 1,
                         "sizes": f"{format_exact_size(part['segment_first_size_bytes'])} to "
                                  f"{format_exact_size(part['segment_last_size_bytes'])}",
                         "latency (us)": format_us(part["segment_latency_s"]),
                         "bandwidth (MB/s)": format_mbps(part["segment_bandwidth_Bps"]),
                         "median |residual| of the curve": f"{float(cell['median_rel_residual']):.1%}"})
    return pd.DataFrame(rows)


__all__ = ["curve_table", "hockney_table", "segments_table"]
