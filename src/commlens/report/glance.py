"""What the report opens with, "at a glance": per curve the latency at its smallest size and its peak
bandwidth with their 95% intervals, how many points met the precision target, and a warning where
the data say the host may have been busy or the tails are wide. A campaign in which no launch gave
data gets instead which rows gave none and why.

Every number is read from the dataset (through ReportData.points and the per-point records); the
warnings are possibilities the data point to, worded as such, never a diagnosis. A curve imported
from another suite's files is marked (its `source`, with a numbered legend line saying what its numbers
are) and left out of the precision statements: no precision target applied to it.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import xarray as xr

from commlens.data.kernels import stopping_statistics
from commlens.data.origins import curve_marks, curve_origins, imported_libraries, legends
from commlens.report.analysis_table import ReportData
from commlens.analysis.stats import interval_over_launches
from commlens.data.quantities import TAILS, bandwidth
from commlens.units import MB, US, format_launch_interval, format_number, format_size, format_size_range

# A launch's P90 this many times its median: a tenth of its samples took that much longer.
WIDE_TAIL = 2.0
# The launches' medians of one point this many times apart: the launches disagree.
LAUNCHES_APART = 1.5
# Below this share of points that met the precision target, the report says so up front.
FEW_SETTLED = 0.5
# Percentiles of a launch with fewer samples say little about its tail (P90's rule: data.quantities.TAILS).
TAIL_SAMPLES = TAILS["p90"]
# More headline rows than this and the rest are in the tables further down.
MAX_ROWS = 24


@dataclass
class Glance:
    headline: pd.DataFrame                         # a row per curve: latency and peak bandwidth, intervals
    lines: list[str] = field(default_factory=list)     # facts: precision, launches
    warnings: list[str] = field(default_factory=list)  # what may make the numbers less than they seem
    no_data: pd.DataFrame | None = None             # no launch gave data: rows, status, launches, reason

    def markdown(self) -> str:
        """The facts and warnings as Markdown, for a notebook (the table is shown beside it)."""
        first = ["**No launch gave data**: each row of the campaign, how its launches ended, and why."] \
            if self.no_data is not None else []
        return "\n\n".join(first + self.lines + [f"**Read with care**: {line}" for line in self.warnings])

    @property
    def table(self) -> pd.DataFrame:
        """The headline per curve, or (no launch gave data) the rows and why."""
        return self.headline if self.no_data is None else self.no_data


def dataset_shape(ds) -> str:
    """'2 libraries x 2 placements x 1 kernel x 23 sizes x 3 launches; 428984 samples'."""
    plural = {"library": "libraries", "launch": "launches"}
    words = [f"{ds.sizes[dim]} {dim if ds.sizes[dim] == 1 else plural.get(dim, dim + 's')}"
             for dim in ("library", "placement", "kernel", "size", "launch") if dim in ds.sizes]
    return " x ".join(words) + (f"; {ds.sizes['sample']} samples" if "sample" in ds.sizes else "")


def at_a_glance(data: ReportData) -> Glance:
    """What the report opens with (see the module's docstring)."""
    ds = data.ds
    if data.points.empty:
        return Glance(pd.DataFrame(), [_launch_line(ds)], no_data=_no_data_rows(ds))
    lines = [_precision_line(ds), _launch_line(ds), *_imported_lines(ds)]
    return Glance(_headline(data), [line for line in lines if line], _warnings(ds))


def _imported_lines(ds) -> list[str]:
    """What the imported curves' numbers are, a numbered line each, as the headline's `source` cites them."""
    lines = legends(curve_origins(ds))[1]
    if not lines:
        return []
    return (["Rows whose source is imported [n] were measured by other suites and read from their files (Methods, "
             "Imported rows, names each file), with no precision target; line [n] says what their numbers are:"]
            + [f"[{number}] {line}." for number, line in enumerate(lines, start=1)])


def _headline(data: ReportData) -> pd.DataFrame:
    """The main ping-pong's curves (every curve where the campaign has none), one row each: the latency at
    the smallest size and the peak bandwidth, each with an interval a reader can use
    (format_launch_interval: labelled within one launch, or said in words where too few launches make it
    span more than a factor of ten)."""
    points = data.points
    kernel = data.main_kernel()
    if kernel is not None:
        points = points[points["kernel"] == kernel]
    rows = []
    marks = curve_marks(curve_origins(data.ds))
    for (library, placement, kernel), curve in points.groupby(["library", "placement", "kernel"], sort=False):
        smallest = curve.loc[curve["size"].idxmin()]
        launches = int(smallest["launches"])
        cell = data.ds["median"].sel(library=library, placement=placement, kernel=kernel)
        per_launch = cell.sel(size=smallest["size"]).where(data.ds["sample_count"].sel(
            library=library, placement=placement, kernel=kernel, size=smallest["size"]) > 0).values / US
        peak = peak_bandwidth(data, library, placement, kernel, curve)
        rows.append({
            "library": library, "placement": placement, "kernel": kernel,
            "smallest size": format_size(smallest["size"]),
            "latency (us) [95%]": format_launch_interval(
                smallest["median_s"] / US, smallest["ci_low_s"] / US, smallest["ci_high_s"] / US, launches,
                per_launch),
            "peak bandwidth (MB/s) [95%]": "" if peak is None else format_launch_interval(
                peak.value / MB, peak.low / MB, peak.high / MB, launches, peak.per_launch / MB),
            "peak over": "" if peak is None else peak.sizes,
            "launches": launches,
        })
        if marks:
            rows[-1]["source"] = marks.get((str(library), str(placement), str(kernel)), "measured")
    return pd.DataFrame(rows).head(MAX_ROWS)


# The peak bandwidth is a plateau's, not the largest of noisy medians (which is biased upwards: it picks
# whichever size's noise happened to read fastest): per launch, the median of its bandwidths at the
# PEAK_SIZES sizes that read fastest over all launches; over launches, their median and its interval.
PEAK_SIZES = 3


@dataclass(frozen=True)
class Peak:
    value: float          # B/s
    low: float
    high: float
    per_launch: np.ndarray
    sizes: str            # which sizes it is taken over, in words


def peak_bandwidth(data: ReportData, library, placement, kernel, curve: pd.DataFrame) -> Peak | None:
    """A curve's peak bandwidth over its PEAK_SIZES fastest sizes (see PEAK_SIZES), with the interval over
    launches of the launches' plateau values."""
    sized = curve[curve["size"] > 0]
    if sized.empty:
        return None
    top = sized.nlargest(PEAK_SIZES, "bandwidth_Bps")
    ds = data.ds.sel(library=library, placement=placement, kernel=kernel, size=top["size"].to_numpy())
    measured = ds["sample_count"] > 0
    rates = bandwidth(ds["median"].where(measured), ds["size"])
    per_launch = rates.median("size", skipna=True).where(measured.any("size"))
    # Each launch's own interval of its plateau: its medians' intervals, the slow end giving the low rate.
    within = xr.concat([bandwidth(ds["median_ci"].sel(bound=end, drop=True).where(measured), ds["size"])
                        .median("size", skipna=True) for end in ("high", "low")], "bound").assign_coords(
        bound=["low", "high"])
    centre = float(per_launch.median("launch"))
    interval = interval_over_launches(per_launch, within)
    sizes = sorted(int(size) for size in top["size"])
    return Peak(centre, float(interval.sel(bound="low")), float(interval.sel(bound="high")),
                per_launch.values, format_size_range(sizes[0], sizes[-1]) + (f" ({len(sizes)} sizes)"
                                                                               if len(sizes) > 1 else ""))


def _measured(ds) -> np.ndarray:
    """Points commlens measured, to a precision target (an imported point had none)."""
    measured = ds["sample_count"] > 0
    imported = imported_libraries(ds)
    if imported:
        measured = measured & ~ds["library"].isin(imported)
    return measured.transpose(*ds["sample_count"].dims).values


def _precision_line(ds) -> str:
    if "settled" not in ds:
        return ""
    measured = _measured(ds)
    if not measured.any():
        return ""
    settled = int((ds["settled"].values.astype(bool) & measured).sum())
    config = ds.attrs.get("campaign_config", "")
    target = _rse_target(config)
    # As the launches recorded it: "median", "mean" (older harnesses), or each where kernels differ.
    statistic = " or ".join(sorted(set(stopping_statistics(ds).values())))
    statistic = f" of the {statistic}" if statistic else ""
    return (f"{settled} of {int(measured.sum())} points (one size in one launch) met the precision target"
            + (f" (relative standard error{statistic} at most {target:.1%})" if target else "")
            + "; the others stopped at a cap on samples or time.")


def _rse_target(config: str):
    try:
        return json.loads(config or "{}").get("precision", {}).get("rse")
    except ValueError:
        return None


def _launch_line(ds) -> str:
    if "status" not in ds:
        return ""
    status = [s for s in ds["status"].values.ravel().tolist() if s != "skipped"]
    ok = status.count("ok")
    if ok == len(status):
        return f"All {ok} launches gave data."
    return f"{ok} of {len(status)} launches gave data; see Failed launches for the others and why."


def _where(ds, index: tuple) -> str:
    """'mpich-5.0.2, 2N1P, pingpong.send at 8 B, launch 2' for a point's index over POINT_DIMS."""
    library, placement, kernel, size, launch = (ds[dim].values[i] for dim, i in
                                                zip(("library", "placement", "kernel", "size", "launch"), index))
    return f"{library}, {placement}, {kernel} at {format_size(size)}, launch {launch}"


def _warnings(ds) -> list[str]:
    """Wide tails within launches, launches that disagree, few points that met the target."""
    from commlens.data.samples import POINT_DIMS

    measured = ds["sample_count"].transpose(*POINT_DIMS).values
    found = []
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # points no launch measured are all NaN
        median = ds["median"].transpose(*POINT_DIMS).values
        if "quantiles" in ds:
            p90 = ds["quantiles"].sel(quantile=0.9).transpose(*POINT_DIMS).values
            tail = np.where(measured >= TAIL_SAMPLES, p90 / median, np.nan)
            wide = np.nan_to_num(tail) >= WIDE_TAIL
            if wide.any():
                worst = np.unravel_index(np.nanargmax(tail), tail.shape)
                found.append(f"wide tails: in {int(wide.sum())} of {int((measured >= TAIL_SAMPLES).sum())} points "
                                f"a launch's P90 is {WIDE_TAIL:g}x its median or more (at most "
                                f"{format_number(tail[worst], 3)}x: {_where(ds, worst)})")
        typical = np.where(measured > 0, median, np.nan)
        apart = np.nanmax(typical, axis=-1) / np.nanmin(typical, axis=-1)
        several = (measured > 0).sum(axis=-1) >= 2
        apart = np.where(several, apart, np.nan)
        far = np.nan_to_num(apart) >= LAUNCHES_APART
        if far.any():
            worst = np.unravel_index(np.nanargmax(apart), apart.shape)
            where = _where(ds, worst + (0,)).rsplit(", launch", 1)[0]
            found.append(f"launches disagree: at {int(far.sum())} of {int(several.sum())} points the launches' "
                            f"medians are {LAUNCHES_APART:g}x apart or more "
                            f"(at most {format_number(apart[worst], 3)}x: {where})")
    if "settled" in ds and _measured(ds).any():
        share = (ds["settled"].values.astype(bool) & _measured(ds)).sum() / max(int(_measured(ds).sum()), 1)
        if share < FEW_SETTLED:
            found.append(f"only {share:.0%} of the points met the precision target")
    if not found:
        return []
    return ["; ".join(found) + ". The host may have been busy while these were measured (other jobs, "
                    "frequency changes) or the path is noisy: the intervals are wide where launches disagree; "
                    "rerun on a quiet host, or with more launches, before drawing conclusions."]


def _no_data_rows(ds) -> pd.DataFrame:
    """Every (library, placement, kernel) whose launches gave no data, with their status, how many
    launches, and why (one row per distinct reason)."""
    if "status" not in ds:
        return pd.DataFrame()
    columns = ["status", "reason"] if "reason" in ds else ["status"]
    table = ds[columns].to_dataframe()[columns].reset_index()
    table = table[table["status"] != "skipped"]
    if "reason" not in table:
        table["reason"] = ""
    if "library_status" in ds.coords:      # a library whose environment or build failed says why once
        failed = {str(k): (str(s), str(r)) for k, s, r in zip(ds["library"].values, ds["library_status"].values,
                                                             ds["library_reason"].values) if s != "ok"}
        for library, (_status, reason) in failed.items():
            mine = table["library"] == library
            table.loc[mine & (table["reason"] == ""), "reason"] = reason
    grouped = table.groupby(["library", "placement", "kernel", "status", "reason"], sort=False).size()
    return grouped.rename("launches").reset_index()[["library", "placement", "kernel", "status", "launches",
                                                     "reason"]]
