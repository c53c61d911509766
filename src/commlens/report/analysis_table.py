"""The report's analysis table: `ReportData`, a campaign dataset and what every figure and table
needs from it (one row per measured point, the findings, the comparisons), computed once.

Units: bytes and seconds in the data, MB/s = 1e6 B/s and microseconds in figures,
as the reports do.
"""

from __future__ import annotations

import json
from functools import cached_property

import numpy as np
import pandas as pd
import xarray as xr

import commlens.analysis  # noqa: F401  (registers ds.commlens, which ReportData uses)
from commlens.campaign import kernel_of
from commlens.data.kernels import kernel_tags, windowed_kernels
from commlens.data.origins import imported_libraries
from commlens.data.quantities import PERCENTILES, TAILS
from commlens.data.samples import POINT_DIMS
from commlens.report.comparisons import baseline_comparisons, library_row_comparisons
from commlens.units import MB, US


class ReportData:
    """A dataset and what every figure needs from it, computed once; `baseline`, another campaign's
    dataset, adds a comparison of this one against it; `n_boot`: the resamples of the bootstrap
    intervals of the report's fitted models (the performance table's regimes)."""

    def __init__(self, ds: xr.Dataset, n_boot: int = 400, baseline: xr.Dataset | None = None):
        self.ds = ds
        self.n_boot = n_boot
        self.baseline = baseline
        # The validated campaign, as collected: kernel options (method, halo...) and report notes.
        self.config = json.loads(ds.attrs.get("campaign_config", "{}"))

    def option(self, kernel: str, name: str, default=None):
        return self.config.get("kernels", {}).get(kernel, {}).get(name, default)

    def window_note(self, kernels) -> str:
        """What a bandwidth figure's caption says of its windowed kernels' buffers (DESIGN: every
        departure from how OSU measures is stated): '' when it shows none."""
        recorded = dict(zip(self.ds["kernel"].values.tolist(), self.ds["window_buffers"].values.tolist())) \
            if "window_buffers" in self.ds.coords else {}
        windowed = set(windowed_kernels(self.ds))
        how = {kernel: recorded.get(kernel) or "not recorded" for kernel in sorted(set(kernels)) if kernel in windowed}
        if not how:
            return ""
        words = {"shared": "one buffer per window, as osu_bw", "distinct": "a buffer per message of the window"}
        return " Window buffers: " + "; ".join(f"{kernel} {value} ({words.get(value, 'older dataset')})"
                                               for kernel, value in how.items()) + "."

    def in_placement(self, placement: str, kernels) -> pd.DataFrame:
        return self.points[self.points["kernel"].isin(kernels) & (self.points["placement"] == placement)]

    @cached_property
    def points(self) -> pd.DataFrame:
        """One row per measured point: labels, placement shape, the median over launches with the
        95% interval of that median (`ci_low_s`, `ci_high_s`: the band a figure draws around its line,
        see commlens.analysis.stats.interval_over_launches), mean, P50, P90 and P99, bandwidth in
        MB/s (bytes moved / median time) with its interval, and how many launches measured it: all
        summary()'s. Empty, with every column, where no launch gave data."""
        ds = self.ds
        summary = ds.commlens.summary()
        interval, rate = summary["median_ci"], summary["bandwidth_ci"]
        frame = xr.Dataset({"median_s": summary["median"], "mean_s": summary["mean"],
                            **{f"{name}_s": summary[name] for name in PERCENTILES},
                            "bandwidth_Bps": summary["bandwidth"], "launches": summary["launches"],
                            "ci_low_s": interval.sel(bound="low", drop=True),
                            "ci_high_s": interval.sel(bound="high", drop=True),
                            "bandwidth_low_Bps": rate.sel(bound="low", drop=True),
                            "bandwidth_high_Bps": rate.sel(bound="high", drop=True)}).to_dataframe().reset_index()
        frame = frame.dropna(subset=["median_s"])
        frame = frame[frame["median_s"] > 0]
        for coord in ("nodes", "ppn", "nprocs", "emulated"):
            values = dict(zip(ds["placement"].values, ds[coord].values))
            frame[coord] = frame["placement"].map(values).astype(np.asarray(ds[coord].values).dtype)
        for name in ("bandwidth", "bandwidth_low", "bandwidth_high"):
            frame[f"{name}_MBps"] = frame[f"{name}_Bps"] / MB
        # A tail is shown only where every launch took samples enough to have one (data.quantities.TAILS);
        # an imported row's percentiles are its suite's, over its own iterations.
        fewest = ds["sample_count"].where(ds["sample_count"] > 0).min("launch").to_dataframe("fewest")
        frame = frame.join(fewest["fewest"], on=list(POINT_DIMS[:-1]))
        own = ~frame["library"].isin(imported_libraries(ds))
        for name, needed in TAILS.items():
            frame.loc[own & ~(frame["fewest"] >= needed), f"{name}_s"] = np.nan
        frame["time_us"] = frame["median_s"] / US
        for name in ("mean", *PERCENTILES, "ci_low", "ci_high"):
            frame[f"{name}_us"] = frame[f"{name}_s"] / US
        return frame.drop(columns="fewest").reset_index(drop=True)

    @cached_property
    def findings(self) -> pd.DataFrame:
        return self.ds.commlens.anomalies()

    @cached_property
    def piecewise(self) -> xr.Dataset:
        """The piecewise model of every curve: the regimes the figures draw over the medians."""
        return self.ds.commlens.fit("piecewise")

    @cached_property
    def comparisons(self) -> list:
        """Comparison (or Skipped) of each library-row pair, then of each row against the baseline campaign."""
        return library_row_comparisons(self) + baseline_comparisons(self)

    def has(self, kernel: str) -> bool:
        return kernel in set(self.points["kernel"])

    def kernels(self, tag: str) -> list[str]:
        """The measured kernels the catalogue tags `tag` (as the dataset recorded their tags)."""
        tags = kernel_tags(self.ds)
        return sorted({k for k in self.points["kernel"] if tag in tags.get(k, ())})

    @property
    def libraries(self) -> list[str]:
        return [str(v) for v in self.ds["library"].values]

    @property
    def placements(self) -> list[str]:
        return [str(v) for v in self.ds["placement"].values]

    def main_kernel(self) -> str | None:
        """The ping-pong every comparison is drawn with: the reference kernel (pingpong.send) where
        measured, else the first ping-pong or stream kernel."""
        measured = sorted(set(self.points["kernel"]))
        for kernel in [*self.kernels("reference"), *measured]:
            if self.has(kernel) and kernel_of(kernel).startswith(("pingpong", "stream")):
                return kernel
        return None


def kernel_rows(data: ReportData, kernels: list[str]) -> pd.DataFrame:
    return data.points[data.points["kernel"].isin(kernels)]
