"""The report's figures and tables, built from a campaign dataset alone.

Every figure is a function of the dataset (through `ReportData`) that returns a
`Figure` (a HoloViews object made with hvPlot) or a `Skipped` that says what the
dataset lacks. The same function is called once per plotting backend: Bokeh for the
interactive report, matplotlib for the static PNG/SVG copies; hvPlot applies its
options to the backend that is current when the plot is built.

Units: bytes and seconds in the data, MB/s = 1e6 B/s and microseconds in figures,
as the reports do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import holoviews as hv
import hvplot.pandas  # noqa: F401  (registers .hvplot on DataFrames)
import numpy as np
import pandas as pd
import xarray as xr

from .campaign import kernel_of

MB = 1e6
US = 1e-6
WIDTH, HEIGHT = 520, 340
SMALL_MESSAGES = 8000      # bytes: the reports' small-message range ends at 2000 integers

# Kernels whose metric moves more than `size` bytes per timed unit, and by what factor
# (see each kernel's metric line); the rest move `size` bytes.
def bytes_factor(kernel: str, nprocs: int) -> float:
    name = kernel_of(kernel)
    if name in ("stream.bi", "exchange.sendrecv", "exchange.sendrecv_replace", "exchange.isend", "pingping"):
        return 2.0
    if name.startswith("multipair."):
        return nprocs // 2
    if name in ("io.own_file", "io.mpiio_all"):
        return 2.0 * nprocs
    if name in ("io.shared_file", "io.read_same"):
        return float(nprocs)
    return 1.0


@dataclass
class Figure:
    name: str          # file stem under figures/
    title: str
    caption: str
    build: object      # () -> HoloViews object, called once per backend


@dataclass
class Skipped:
    name: str
    title: str
    reason: str


@dataclass
class Table:
    name: str
    title: str
    caption: str
    frame: pd.DataFrame


class ReportData:
    """A dataset and what every figure needs from it, computed once."""

    def __init__(self, ds: xr.Dataset, n_boot: int = 200):
        self.ds = ds
        self.n_boot = n_boot

    @cached_property
    def points(self) -> pd.DataFrame:
        """One row per measured point: labels, placement shape, median time with its 95%
        interval over launches (over samples with one launch), bandwidth in MB/s."""
        from .stats import bootstrap_ci, mean, median

        ds = self.ds
        # Between launches where there are several (usually the wider interval), else between samples.
        over = "launch" if ds.sizes["launch"] > 1 else "sample"
        interval = bootstrap_ci(ds["time"], over=over, n_boot=self.n_boot)
        frame = xr.Dataset({"median_s": median(ds["time"]), "mean_s": mean(ds["time"]),
                            "ci_low_s": interval.sel(bound="low", drop=True),
                            "ci_high_s": interval.sel(bound="high", drop=True)}).to_dataframe().reset_index()
        frame = frame.dropna(subset=["median_s"])
        frame = frame[frame["median_s"] > 0]
        for coord in ("nodes", "ppn", "nprocs", "emulated"):
            frame[coord] = frame["placement"].map(dict(zip(ds["placement"].values, ds[coord].values)))
        factor = np.array([bytes_factor(k, n) for k, n in zip(frame["kernel"], frame["nprocs"])])
        frame["bandwidth_MBps"] = factor * frame["size"] / frame["median_s"] / MB
        frame["time_us"] = frame["median_s"] / US
        frame["ci_low_us"] = frame["ci_low_s"] / US
        frame["ci_high_us"] = frame["ci_high_s"] / US
        return frame.reset_index(drop=True)

    @cached_property
    def findings(self) -> pd.DataFrame:
        return self.ds.commbench.anomalies()

    def has(self, kernel: str) -> bool:
        return kernel in set(self.points["kernel"])

    def kernels(self, prefix: str) -> list[str]:
        return sorted({k for k in self.points["kernel"] if kernel_of(k).startswith(prefix)})

    @property
    def libraries(self) -> list[str]:
        return [str(v) for v in self.ds["library"].values]

    @property
    def placements(self) -> list[str]:
        return [str(v) for v in self.ds["placement"].values]

    def main_kernel(self) -> str | None:
        """The ping-pong every comparison is drawn with: pingpong.send where measured."""
        for kernel in ("pingpong.send", *sorted(set(self.points["kernel"]))):
            if self.has(kernel) and kernel_of(kernel).startswith(("pingpong", "stream")):
                return kernel
        return None


def _curves(frame: pd.DataFrame, by: str, title: str, bandwidth: bool, vlines=()) -> hv.Overlay:
    """Median against size (log-log) per `by` group, with its 95% interval shaded."""
    y, label = ("bandwidth_MBps", "bandwidth (MB/s)") if bandwidth else ("time_us", "time (us)")
    frame = frame.sort_values("size")
    layers = []
    for group, rows in frame.groupby(by, sort=True):
        if not bandwidth:
            layers.append(hv.Area(rows, "size", ["ci_low_us", "ci_high_us"], label=str(group))
                          .opts(alpha=0.2, line_alpha=0))
        layers.append(rows.hvplot.line(x="size", y=y, label=str(group), logx=True, logy=True,
                                       hover_cols=["library", "placement", "kernel", "size", y]))
        layers.append(rows.hvplot.scatter(x="size", y=y, label=str(group), logx=True, logy=True, size=12))
    for x, colour in vlines:
        layers.append(hv.VLine(float(x)).opts(color=colour, line_dash="dashed") if hv.Store.current_backend == "bokeh"
                      else hv.VLine(float(x)).opts(color=colour, linestyle="dashed"))
    return hv.Overlay(layers).opts(title=title, xlabel="size (B)", ylabel=label, logx=True, logy=True,
                                   **_size_options())


def _size_options() -> dict:
    if hv.Store.current_backend == "bokeh":
        return {"width": WIDTH, "height": HEIGHT, "legend_position": "top_left"}
    return {"fig_inches": (6.5, 4.2), "legend_position": "top_left"}


def _time_and_bandwidth(frame, by, title, vlines=()):
    return lambda: (_curves(frame, by, f"{title}: time", False, vlines)
                    + _curves(frame, by, f"{title}: bandwidth", True, vlines)).cols(2)


def library_comparison(data: ReportData) -> list:
    kernel = data.main_kernel()
    if len(data.libraries) < 2 or kernel is None:
        return [Skipped("library-comparison", "Library comparison",
                        "needs two or more libraries and a ping-pong or stream kernel")]
    figures = []
    for placement in data.placements:
        rows = data.points[(data.points["kernel"] == kernel) & (data.points["placement"] == placement)]
        if rows["library"].nunique() >= 2:
            figures.append(Figure(f"library-comparison-{placement}", f"{kernel}, {placement}: library comparison",
                                  f"Median {kernel} time and bandwidth against size, one curve per library, "
                                  f"placement {placement}; shaded: 95% interval of the mean.",
                                  _time_and_bandwidth(rows, "library", f"{kernel} {placement}")))
    return figures


def placement_comparison(data: ReportData) -> list:
    kernel = data.main_kernel()
    if kernel is None:
        return [Skipped("placement-comparison", "On-node against off-node", "needs a ping-pong or stream kernel")]
    rows = data.points[data.points["kernel"] == kernel]
    if not ((rows["nodes"] == 1).any() and (rows["nodes"] > 1).any()):
        return [Skipped("placement-comparison", "On-node against off-node",
                        f"needs {kernel} on one node and on more than one node")]
    figures = []
    for library in data.libraries:
        mine = rows[rows["library"] == library]
        if mine["placement"].nunique() >= 2:
            figures.append(Figure(f"placement-comparison-{library}", f"{kernel}, {library}: placements",
                                  f"Median {kernel} time and bandwidth against size for every placement "
                                  f"(nodes x processes per node; off-node placements on one host are emulated).",
                                  _time_and_bandwidth(mine, "placement", f"{kernel} {library}")))
    return figures


def _kernel_pair(data: ReportData, name: str, title: str, first: str, others: list[str], why: str) -> list:
    if not data.has(first) or not others:
        return [Skipped(name, title, why)]
    figures = []
    for placement in data.placements:
        rows = data.points[data.points["kernel"].isin([first, *others]) & (data.points["placement"] == placement)]
        if rows["kernel"].nunique() >= 2:
            rows = rows.assign(curve=rows["kernel"] + " " + rows["library"])
            figures.append(Figure(f"{name}-{placement}", f"{title}, {placement}",
                                  f"{title}: median time and bandwidth against size per kernel and library, "
                                  f"placement {placement}.", _time_and_bandwidth(rows, "curve", placement)))
    return figures or [Skipped(name, title, why)]


def send_against_ssend(data: ReportData) -> list:
    return _kernel_pair(data, "send-ssend", "Send against Ssend", "pingpong.send",
                        [k for k in ("pingpong.ssend",) if data.has(k)],
                        "needs pingpong.send and pingpong.ssend in one placement")


def one_sided_against_two_sided(data: ReportData) -> list:
    return _kernel_pair(data, "one-sided", "One-sided against two-sided", "pingpong.send", data.kernels("rma."),
                        "needs pingpong.send and an rma.* kernel in one placement")


def small_messages(data: ReportData) -> list:
    """The small-message range with detected packet boundaries and protocol switches marked."""
    kernel = data.main_kernel()
    title = "Small messages and packet boundaries"
    if kernel is None:
        return [Skipped("small-messages", title, "needs a ping-pong or stream kernel")]
    figures = []
    findings = data.findings
    for placement in data.placements:
        rows = data.points[(data.points["kernel"] == kernel) & (data.points["placement"] == placement)
                           & (data.points["size"] <= SMALL_MESSAGES)]
        if rows.empty or rows.groupby("library")["size"].nunique().max() < 8:
            continue
        marks = []
        found = findings[(findings["kernel"] == kernel) & (findings["placement"] == placement)]
        for _, row in found.iterrows():
            if row["kind"] == "packet_steps" and np.isfinite(row["period"]):
                # The first boundary after the smallest size, then one per payload period.
                marks += [(x, FINDING_COLOURS["packet_steps"])
                          for x in np.arange(row["size"], SMALL_MESSAGES + 1, row["period"])][:40]
            elif row["kind"] == "protocol_switch" and row["size"] <= SMALL_MESSAGES:
                marks.append((row["size"], FINDING_COLOURS["protocol_switch"]))
        figures.append(Figure(f"small-messages-{placement}", f"{kernel}, {placement}: small messages",
                              f"Sizes up to {SMALL_MESSAGES} B; dashed lines: detected packet boundaries (grey) "
                              f"and protocol switches (red), {len(found)} findings.",
                              lambda rows=rows, marks=marks, placement=placement: _curves(
                                  rows, "library", f"{kernel} {placement} small messages", False, marks)))
    return figures or [Skipped("small-messages", title, f"needs {kernel} at 8 or more sizes up to {SMALL_MESSAGES} B")]


def _against_ranks(rows: pd.DataFrame, name: str, title: str, x: str, y: str, ylabel: str, caption: str,
                   why: str) -> list:
    """`y` at each kernel's largest size against a placement property `x`, a curve per kernel and library."""
    if rows.empty or rows[x].nunique() < 2:
        return [Skipped(name, title, why)]
    rows = rows[rows["size"] == rows.groupby("kernel")["size"].transform("max")]
    rows = rows.assign(curve=rows["kernel"] + " " + rows["library"]).sort_values(x)

    def build():
        layers = [rows.hvplot.line(x=x, y=y, by="curve", logy=True), rows.hvplot.scatter(x=x, y=y, by="curve", logy=True)]
        return hv.Overlay(layers).opts(title=title, xlabel=x, ylabel=ylabel, **_size_options())

    return [Figure(name, title, caption, build)]


def _rows_of(data: ReportData, kernels: list[str]) -> pd.DataFrame:
    return data.points[data.points["kernel"].isin(kernels)]


def multipair_against_ppn(data: ReportData) -> list:
    why = "needs a multipair.* kernel at two or more processes per node"
    rows = _rows_of(data, data.kernels("multipair."))
    rows = rows.assign(per_pair_MBps=rows["bandwidth_MBps"] / (rows["nprocs"] // 2).clip(lower=1))
    return (_against_ranks(rows, "multipair-aggregate", "Aggregate bandwidth against processes per node", "ppn",
                           "bandwidth_MBps", "aggregate bandwidth (MB/s)",
                           "Multi-pair bandwidth of all pairs together at the largest size.", why)
            + _against_ranks(rows, "multipair-per-pair", "Per-pair bandwidth against processes per node", "ppn",
                             "per_pair_MBps", "bandwidth per pair (MB/s)",
                             "Multi-pair bandwidth per pair at the largest size.", why))


def collectives_against_ranks(data: ReportData) -> list:
    return _against_ranks(_rows_of(data, data.kernels("coll.")), "collectives", "Collective latency against ranks",
                          "nprocs", "time_us", "time (us)", "Collective operation latency (or its bound, see the "
                          "kernel label) at the largest size against the number of ranks.",
                          "needs a coll.* kernel at two or more rank counts")


def io_against_tasks(data: ReportData) -> list:
    return _against_ranks(_rows_of(data, data.kernels("io.")), "io", "File I/O bandwidth against tasks", "nprocs",
                          "bandwidth_MBps", "aggregate bandwidth (MB/s)",
                          "Aggregate file I/O bandwidth at the largest size against the number of tasks.",
                          "needs an io.* kernel at two or more task counts")


FINDING_COLOURS = {"packet_steps": "grey", "protocol_switch": "red", "alignment": "purple", "spike": "orange"}


def findings_figure(data: ReportData, library: str, placement: str, kernel: str) -> Figure:
    """One curve over its whole range with every finding marked where it was found
    (packet steps at their first boundary, the rest at their size)."""
    rows = data.points[(data.points["library"] == library) & (data.points["placement"] == placement)
                       & (data.points["kernel"] == kernel)]
    found = data.findings[(data.findings["library"] == library) & (data.findings["placement"] == placement)
                          & (data.findings["kernel"] == kernel)]
    marks = [(row["size"], FINDING_COLOURS.get(row["kind"], "black")) for _, row in found.iterrows()]
    kinds = ", ".join(f"{kind} ({colour})" for kind, colour in FINDING_COLOURS.items())
    return Figure(f"findings-{library}-{placement}-{kernel}", f"{kernel}, {library}, {placement}: findings",
                  f"{len(found)} findings marked: {kinds}.",
                  lambda: _curves(rows, "library", f"{kernel} {library} {placement}", False, marks))


FIGURES = (library_comparison, placement_comparison, send_against_ssend, one_sided_against_two_sided,
           small_messages, multipair_against_ppn, collectives_against_ranks, io_against_tasks)


def performance_table(data: ReportData) -> Table | Skipped:
    """The switch-table view: latency and uni-/bi-directional bandwidth per library and
    placement, with Hockney fit parameters and their 95% intervals."""
    kernel = data.main_kernel()
    title = "Latency and bandwidth per library and placement"
    if kernel is None:
        return Skipped("performance-table", title, "needs a ping-pong or stream kernel")
    points = data.points
    fit = data.ds.sel(kernel=[kernel]).commbench.fit("hockney")
    rows = []
    for (library, placement), mine in points[points["kernel"] == kernel].groupby(["library", "placement"]):
        smallest, largest = mine.loc[mine["size"].idxmin()], mine.loc[mine["size"].idxmax()]
        cell = fit.sel(library=library, placement=placement, kernel=kernel)
        row = {"library": library, "placement": placement,
               f"latency at {int(smallest['size'])} B (us)": round(smallest["time_us"], 3),
               f"{kernel} bandwidth at {int(largest['size'])} B (MB/s)": round(largest["bandwidth_MBps"], 1)}
        for name, stream in (("uni", "stream.uni"), ("bi", "stream.bi")):
            other = points[(points["kernel"] == stream) & (points["library"] == library)
                           & (points["placement"] == placement)]
            if len(other):
                top = other.loc[other["size"].idxmax()]
                row[f"{stream} at {int(top['size'])} B (MB/s)"] = round(top["bandwidth_MBps"], 1)
        if "latency_s" in cell:
            row["fitted latency (us) [95%]"] = _with_interval(cell["latency_s"] / US, cell["latency_interval_s"] / US)
            row["fitted bandwidth (MB/s) [95%]"] = _with_interval(cell["bandwidth_Bps"] / MB,
                                                                  cell["bandwidth_interval_Bps"] / MB)
        rows.append(row)
    return Table("performance-table", title,
                 f"Measured medians (all launches pooled) and a Hockney fit T = latency + size / bandwidth "
                 f"of {kernel}; stream columns where the campaign ran them.", pd.DataFrame(rows))


def _with_interval(value: xr.DataArray, interval: xr.DataArray) -> str:
    value, (low, high) = float(value), interval.values.astype(float)
    if not np.isfinite(value):
        return "n/a"
    if np.isfinite(low) and np.isfinite(high):
        return f"{value:.4g} [{low:.4g}, {high:.4g}]"
    return f"{value:.4g}"


def all_figures(data: ReportData) -> list:
    return [item for make in FIGURES for item in make(data)]
