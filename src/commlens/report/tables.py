"""The report's tables: the study tables built from a campaign dataset alone (latency and
bandwidth per library and placement with each curve's regimes, the halo speed-up, multi-pair
bandwidth), each a `Table` or a `Skipped` that says what the dataset lacks, and the tables every
report has (findings, failed launches, integrity errors, provenance).

Units: bytes and seconds in the data, MB/s = 1e6 B/s and microseconds in tables,
as the reports do. Where the dataset holds rows imported from another suite's files, the study tables
have a `source` column: "measured", or "imported [n]" citing the numbered line At a glance that says
what its numbers are (commlens.data.origins).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from commlens.analysis import models
from commlens.campaign import kernel_of
from commlens.data.origins import curve_marks, curve_origins
from commlens.report.analysis_table import ReportData, kernel_rows
from commlens.report.elements import Skipped, Table
from commlens.units import MB, US, format_exact_size, format_measured, format_number, format_seconds, format_size


def performance_table(data: ReportData) -> Table | Skipped:
    """The switch-table view: latency (mean, median, P90, P99) and uni-/bi-directional bandwidth per
    library and placement, with each curve's regimes and their 95% intervals, and the single-line
    Hockney fit where it describes the curve."""
    kernel = data.main_kernel()
    title = "Latency and bandwidth per library and placement"
    if kernel is None:
        return Skipped("performance-table", title, "needs a ping-pong or stream kernel")
    points = data.points
    fit = data.ds.sel(kernel=[kernel]).commlens.fit("regimes", n_boot=data.n_boot)
    rows = []
    for (library, placement), mine in points[points["kernel"] == kernel].groupby(["library", "placement"]):
        smallest, largest = mine.loc[mine["size"].idxmin()], mine.loc[mine["size"].idxmax()]
        latency = f"latency at {format_size(smallest['size'])} (us)"
        row = {"library": library, "placement": placement,
               f"{latency}: mean": smallest["mean_us"],
               f"{latency}: P50 (median)": smallest["p50_us"],
               f"{latency}: P90": smallest["p90_us"],
               f"{latency}: P99": smallest["p99_us"],
               f"{kernel} bandwidth at {format_size(largest['size'])} (MB/s)": largest["bandwidth_MBps"]}
        # The switch tables' columns: the catalogue's `table` kernels (streaming bandwidth, the TCP
        # baseline), and the `peak` a copy in memory reaches, against which the achieved bandwidth is judged.
        columns = [(name, name) for name in data.kernels("table") if kernel_of(name) == name]
        columns += [(f"{name} peak", name) for name in data.kernels("peak") if kernel_of(name) == name]
        for column, other_kernel in columns:
            peak = column.endswith(" peak")
            other = points[(points["kernel"] == other_kernel) & (points["library"] == library)
                           & (points["placement"] == placement)]
            if peak and other.empty:      # a copy in memory runs on one rank: any placement will do
                other = points[(points["kernel"] == other_kernel) & (points["library"] == library)]
            if len(other):
                top = other.loc[other["size"].idxmax()]
                row[f"{column} at {format_size(top['size'])} (MB/s)"] = top["bandwidth_MBps"]
                if peak:
                    best = max(v for k, v in row.items() if "(MB/s)" in k and " peak " not in k)
                    row[f"best achieved / {column}"] = best / top["bandwidth_MBps"]
        if "latency_s" in fit and np.isfinite(fit["latency_s"].sel(library=library, placement=placement,
                                                                     kernel=kernel)):
            row.update(regime_columns(fit.sel(library=library, placement=placement, kernel=kernel)))
        rows.append(row)
    frame = with_sources(data.ds, pd.DataFrame(rows), kernel)
    return Table("performance-table", title,
                 f"{kernel}. Latency at the smallest size: mean, P50, P90 and P99 of a typical launch (the median "
                 f"over launches of each launch's own; P50 is the median). Bandwidth: "
                 f"bytes moved / median time; stream columns where the campaign ran them. Regimes from a "
                 f"piecewise alpha-beta fit (segments chosen by BIC): the first regime's latency, the last "
                 f"regime's asymptotic bandwidth, and between which measured sizes each new regime starts. "
                 f"The single-line Hockney fit T = latency + size / bandwidth is shown only where it fits: "
                 f"its relative residual is within {models.NOISE_Z:g} standard errors of the point's median "
                 f"(from the spread of its samples and launches) at all but {models.MISFIT_FRACTION:.0%} of "
                 f"the sizes; elsewhere it lies between regimes and describes none."
                 + IMPORTED_NOTE * ("source" in frame), frame)


# What a table's caption adds where it has imported rows.
IMPORTED_NOTE = (" Rows whose source is imported [n] were measured by another suite and read from its files "
                 "(line [n] At a glance says what their numbers are; Methods, Imported rows, names the files): one "
                 "value per size, so no interval, and percentiles only where the files report them.")


def with_sources(ds: xr.Dataset, frame: pd.DataFrame, kernel: str | None = None) -> pd.DataFrame:
    """`frame` (a row per library and placement, and per kernel where it has a kernel column, else of
    `kernel`) with a `source` column where the dataset has imported curves: "measured" or the curve's
    mark and legend number ("imported [1]"); unchanged where it has none."""
    marks = curve_marks(curve_origins(ds))
    if not marks or frame.empty:
        return frame

    def source(row) -> str:
        return marks.get((str(row["library"]), str(row["placement"]), str(row.get("kernel", kernel))), "measured")

    frame = frame.copy()
    frame.insert(list(frame.columns).index("kernel" if "kernel" in frame else "placement") + 1, "source",
                 frame.apply(source, axis=1))
    return frame


def regime_columns(cell: xr.Dataset) -> dict:
    """A curve's fit_regimes result (ds.commlens.fit("regimes") at one curve) as table columns."""
    switches = [(low, high) for low, high in cell["switch_interval_bytes"].values if np.isfinite(high)]
    n_sizes, beyond = int(cell["n_sizes"]), int(cell["beyond_noise"])
    fits = bool(cell["hockney_fits"])
    return {
        "latency, first regime (us) [95%]": _with_interval(cell["latency_s"] / US, cell["latency_interval_s"] / US),
        "bandwidth, last regime (MB/s) [95%]": _with_interval(cell["bandwidth_Bps"] / MB,
                                                              cell["bandwidth_interval_Bps"] / MB),
        "regime switches": "; ".join(f"between {format_exact_size(low)} and {format_exact_size(high)}"
                                     for low, high in switches) or "none",
        "Hockney fit": (f"fits: {n_sizes - beyond} of {n_sizes} sizes within noise" if fits
                        else f"does not fit: {beyond} of {n_sizes} sizes beyond noise"),
        "Hockney latency (us) [95%]": _with_interval(cell["hockney_latency_s"] / US,
                                                     cell["hockney_latency_interval_s"] / US) if fits else "-",
        "Hockney bandwidth (MB/s) [95%]": _with_interval(cell["hockney_bandwidth_Bps"] / MB,
                                                         cell["hockney_bandwidth_interval_Bps"] / MB) if fits else "-",
    }


def _with_interval(value: xr.DataArray, interval: xr.DataArray) -> str:
    number, (low, high) = float(value), interval.values.astype(float)
    if not np.isfinite(number):
        return "n/a"
    if np.isfinite(low) and np.isfinite(high):
        return format_measured(number, low, high)
    return format_number(number)


def halo_speedup_table(data: ReportData) -> Table | Skipped:
    """EPCC's halo question: what overlapping the swap with non-blocking calls buys."""
    title = "Halo exchange: blocking against non-blocking"
    halos = data.kernels("halo")
    blocking = [k for k in halos if data.option(k, "halo", "blocking") == "blocking"]
    nonblocking = [k for k in halos if data.option(k, "halo", "blocking") == "nonblocking"]
    if not (blocking and nonblocking):
        return Skipped("halo-speedup", title, "needs halo.jacobi2d run blocking and nonblocking")
    points = data.points.set_index(["library", "placement", "size", "kernel"])["median_s"]
    rows = []
    for (library, placement, size), _ in data.points[data.points["kernel"].isin(halos)].groupby(
            ["library", "placement", "size"]):
        try:
            t_block, t_over = points[(library, placement, size, blocking[0])], points[(library, placement, size,
                                                                                        nonblocking[0])]
        except KeyError:
            continue
        rows.append({"library": library, "placement": placement, "size": format_size(size),
                     "blocking (us)": t_block / US, "non-blocking (us)": t_over / US,
                     "speed-up": t_block / t_over})
    return Table("halo-speedup", title, "Time per Jacobi iteration; speed-up = blocking / non-blocking "
                 "(above 1: the non-blocking swap is faster).", pd.DataFrame(rows))


def multipair_table(data: ReportData) -> Table | Skipped:
    """The switch document's 'bandwidth with 1, 2, 4 tasks per node'."""
    kernels = data.kernels("multipair")
    if not kernels:
        return Skipped("multipair-table", "Bandwidth per tasks per node", "needs a multipair.* kernel")
    rows = kernel_rows(data, kernels)
    rows = rows[rows["size"] == rows.groupby("kernel")["size"].transform("max")]
    pairs = (rows["nprocs"] // 2).clip(lower=1)
    frame = pd.DataFrame({"library": rows["library"], "kernel": rows["kernel"], "placement": rows["placement"],
                          "tasks per node": rows["ppn"], "size": rows["size"].map(format_size),
                          "aggregate (MB/s)": rows["bandwidth_MBps"],
                          "per pair (MB/s)": rows["bandwidth_MBps"] / pairs})
    frame = with_sources(data.ds, frame)
    return Table("multipair-table", "Bandwidth per tasks per node",
                 "Multi-pair bandwidth at the largest size: all pairs together and per pair."
                 + IMPORTED_NOTE * ("source" in frame), frame.sort_values(["library", "kernel", "tasks per node"]))


TABLES = (performance_table, halo_speedup_table, multipair_table)


def all_tables(data: ReportData) -> tuple[list[Table], list[Skipped]]:
    made = [make(data) for make in TABLES]
    return [t for t in made if isinstance(t, Table)], [t for t in made if isinstance(t, Skipped)]


# ----------------------------------------------------------------------------- tables every report has

def failed_runs_table(ds: xr.Dataset) -> Table:
    failed = ds.commlens.failed_runs().reset_index()
    return Table("failed-runs", "Failed launches", "Launches that gave no data (failed, timed out, refused, "
                 "missing, or never run: their library's environment or build failed, or the library does not "
                 "support the kernel, placement or a setting), with the reason; their cells are empty in every "
                 "figure.", failed)


def integrity_table(ds: xr.Dataset) -> Table:
    """Points whose integrity check counted corrupted bytes: any is a reason to distrust the run."""
    return Table("integrity-errors", "Integrity errors",
                 "Points measured with --integrity whose messages arrived corrupted (count of bad messages).",
                 ds.commlens.integrity_errors())


def provenance_tables(ds: xr.Dataset) -> list[Table]:
    libraries = pd.DataFrame({
        "library": ds["library"].values,
        "version": [str(v).strip().splitlines()[0] if str(v).strip() else "" for v in ds["library_version"].values],
        "family": ds["family"].values, "compiler": ds["compiler"].values, "environment": ds["library_env"].values})
    for extra in ("launcher", "library_status", "build_warnings", "source"):   # not in older or unimported datasets
        if extra in ds.coords:
            libraries[extra] = ds[extra].values
    placement_coords = [c for c in ("nodes", "ppn", "nprocs", "transport", "emulated", "network_rate", "mtu")
                        if c in ds.coords]
    placements = ds[placement_coords].reset_coords()[placement_coords].to_dataframe().reset_index() \
        if placement_coords else pd.DataFrame({"placement": ds["placement"].values})
    keys = ("campaign", "campaign_file", "git_commit", "kernel_source_hash", "config_hash", "commlens_version",
            "hosts", "cpu_model", "os", "compilers", "compiler_flags", "build_warnings", "timer_resolution_s",
            "first_launch", "created")
    run = pd.DataFrame({"key": [k for k in keys if k in ds.attrs],
                        "value": [format_seconds(ds.attrs[k]) if k.endswith("_s") else str(ds.attrs[k])
                                  for k in keys if k in ds.attrs]})
    return [Table("provenance-run", "Campaign and machine", "Recorded in the dataset when it was collected.", run),
            Table("provenance-libraries", "Libraries", "The library axis: each row its own environment and build.",
                  libraries),
            Table("provenance-placements", "Placements", "Nodes x processes per node; `emulated`: more than one "
                  "node emulated on one host over the network path.", placements)]
