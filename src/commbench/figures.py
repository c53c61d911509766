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

import json
from dataclasses import dataclass
from functools import cached_property

import holoviews as hv
import numpy as np
import pandas as pd
import xarray as xr

from . import dataset  # noqa: F401  (registers ds.commbench, which ReportData uses)
from . import models
from .campaign import kernel_of
from .guards import WINDOWED_KERNELS
from .compare import VERDICTS, across, changed_ranges, describe_range, provenance_differences, within
from .stats import PERCENTILES, bytes_factor  # noqa: F401  (bytes_factor: figures' name for it)
from .units import format_size

MB = 1e6
US = 1e-6
WIDTH, HEIGHT = 520, 340
SMALL_MESSAGES = 8000      # bytes: the reports' small-message range ends at 2000 integers


@dataclass
class Figure:
    name: str          # file stem under figures/
    title: str
    caption: str
    build: object      # () -> HoloViews object, called once per backend
    panels: int = 1    # small multiples: what drawing it costs grows with them
    page: str = ""     # the report page it belongs on (see PAGES); "" the first page


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
    """A dataset and what every figure needs from it, computed once; `baseline`, another campaign's
    dataset, adds a comparison of this one against it."""

    def __init__(self, ds: xr.Dataset, n_boot: int = 200, baseline: xr.Dataset | None = None):
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
        how = {kernel: recorded.get(kernel) or "not recorded" for kernel in sorted(set(kernels))
               if kernel_of(kernel) in WINDOWED_KERNELS}
        if not how:
            return ""
        words = {"shared": "one buffer per window, as osu_bw", "distinct": "a buffer per message of the window"}
        return " Window buffers: " + "; ".join(f"{kernel} {value} ({words.get(value, 'older dataset')})"
                                               for kernel, value in how.items()) + "."

    def in_placement(self, placement: str, kernels) -> pd.DataFrame:
        return self.points[self.points["kernel"].isin(kernels) & (self.points["placement"] == placement)]

    @cached_property
    def points(self) -> pd.DataFrame:
        """One row per measured point: labels, placement shape, median time with its 95%
        interval over launches (over samples with one launch), mean, P50, P90 and P99 (summary's),
        bandwidth in MB/s (summary's: bytes moved / median time)."""
        ds = self.ds
        summary = ds.commbench.summary(n_boot=self.n_boot)
        # Between launches where there are several (usually the wider interval), else between samples.
        interval = summary["mean_ci_launches" if ds.sizes["launch"] > 1 else "mean_ci_samples"]
        frame = xr.Dataset({"median_s": summary["median"], "mean_s": summary["mean"],
                            **{f"{name}_s": summary[name] for name in PERCENTILES},
                            "bandwidth_Bps": summary["bandwidth"],
                            "ci_low_s": interval.sel(bound="low", drop=True),
                            "ci_high_s": interval.sel(bound="high", drop=True)}).to_dataframe().reset_index()
        frame = frame.dropna(subset=["median_s"])
        frame = frame[frame["median_s"] > 0]
        for coord in ("nodes", "ppn", "nprocs", "emulated"):
            frame[coord] = frame["placement"].map(dict(zip(ds["placement"].values, ds[coord].values)))
        frame["bandwidth_MBps"] = frame["bandwidth_Bps"] / MB
        frame["time_us"] = frame["median_s"] / US
        for name in ("mean", *PERCENTILES):
            frame[f"{name}_us"] = frame[f"{name}_s"] / US
        frame["ci_low_us"] = frame["ci_low_s"] / US
        frame["ci_high_us"] = frame["ci_high_s"] / US
        return frame.reset_index(drop=True)

    @cached_property
    def findings(self) -> pd.DataFrame:
        return self.ds.commbench.anomalies()

    @cached_property
    def comparisons(self) -> list:
        """Comparison (or Skipped) of each library-row pair, then of each row against the baseline campaign."""
        return library_row_comparisons(self) + baseline_comparisons(self)

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


def _curves(frame: pd.DataFrame, by: str, title: str, bandwidth: bool, vlines=(), ylabel=None,
            points: bool = True) -> hv.Overlay:
    """Median against size (log-log) per `by` group, with its 95% interval shaded."""
    y, label = ("bandwidth_MBps", "bandwidth (MB/s)") if bandwidth else ("time_us", "time (us)")
    label = ylabel or label
    frame = frame[frame["size"] > 0].sort_values("size")     # a log axis has no zero-byte point
    layers = []
    for group, rows in frame.groupby(by, sort=True):
        if not bandwidth:
            layers.append(hv.Area(rows, "size", ["ci_low_us", "ci_high_us"], label=str(group))
                          .opts(alpha=0.2, **({"line_alpha": 0} if hv.Store.current_backend == "bokeh"
                                              else {"linewidth": 0})))
        layers += _line_and_points(rows, "size", y, str(group), hover=["library", "placement", "kernel"], points=points)
    for x, colour in vlines:
        layers.append(hv.VLine(float(x)).opts(color=colour, line_dash="dashed") if hv.Store.current_backend == "bokeh"
                      else hv.VLine(float(x)).opts(color=colour, linestyle="dashed"))
    return hv.Overlay(layers).opts(title=title, xlabel="size (B)", ylabel=label, logx=True, logy=True,
                                   **_size_options())


def _line_and_points(rows: pd.DataFrame, x: str, y: str, label: str, hover=(), points: bool = True) -> list:
    """A labelled line through `rows` (and its points), built as HoloViews elements directly: hvPlot's
    converter costs about 20 ms a call, and a campaign's report draws hundreds of lines."""
    vdims = [y, *[column for column in hover if column in rows and column not in (x, y)]]
    line = hv.Curve(rows, x, vdims, label=label)
    layers = [line.opts(tools=["hover"]) if hv.Store.current_backend == "bokeh" else line]
    if points:
        dots = hv.Scatter(rows, x, vdims, label=label)
        layers.append(dots.opts(size=6) if hv.Store.current_backend == "bokeh" else dots.opts(s=12))
    return layers


def _size_options() -> dict:
    if hv.Store.current_backend == "bokeh":
        return {"width": WIDTH, "height": HEIGHT, "legend_position": "top_left"}
    return {"fig_inches": (6.5, 4.2), "legend_position": "top_left"}


# More curves than this in one overlay and a reader cannot tell them apart: a figure that would have
# more draws one small panel per kernel instead, its libraries as the curves (see _small_multiples).
MAX_CURVES = 12
MULTIPLE_COLUMNS = 4


def _small_multiples(frame: pd.DataFrame, panel: str, by: str, title: str, bandwidth: bool, ylabel=None):
    """One small log-log panel per `panel` value (a curve per `by` group in each), on shared axes, so
    forty kernel variants of a placement read as forty comparable panels rather than 200 tangled lines."""
    bokeh = hv.Store.current_backend == "bokeh"
    size = {"width": 280, "height": 210} if bokeh else {"fig_inches": (3.2, 2.4)}
    panels = []
    for name, rows in frame.groupby(panel, sort=True):
        overlay = _curves(rows, by, str(name), bandwidth, ylabel=ylabel, points=False)   # lines: panels are small
        panels.append(overlay.opts(show_legend=len(panels) == 0, fontsize={"title": 9}, **size))
    return hv.Layout(panels).cols(MULTIPLE_COLUMNS)


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
                                  f"placement {placement}; shaded: 95% interval of the mean."
                                  + data.window_note([kernel]),
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
            if rows["curve"].nunique() > MAX_CURVES:
                figures.append(_multiples_figure(f"{name}-{placement}", f"{title}, {placement}",
                                                 f"{title}: median time against size, placement {placement}.",
                                                 rows, False))
                continue
            figures.append(Figure(f"{name}-{placement}", f"{title}, {placement}",
                                  f"{title}: median time and bandwidth against size per kernel and library, "
                                  f"placement {placement}.", _time_and_bandwidth(rows, "curve", placement)))
    return figures or [Skipped(name, title, why)]


def _multiples_figure(name: str, title: str, caption: str, rows: pd.DataFrame, bandwidth: bool,
                      ylabel=None) -> Figure:
    """`rows` (a curve per kernel and library) as small multiples: a panel per kernel, a curve per library."""
    kernels = rows["kernel"].nunique()
    return Figure(name, title, caption + f" {rows['curve'].nunique()} curves, more than {MAX_CURVES}: one panel "
                                         f"per kernel ({kernels}), a curve per library.",
                  lambda: _small_multiples(rows, "kernel", "library", title, bandwidth, ylabel), panels=kernels)


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
        layers = [layer for curve, points in rows.groupby("curve", sort=True)
                  for layer in _line_and_points(points, x, y, str(curve))]
        return hv.Overlay(layers).opts(title=title, xlabel=x, ylabel=ylabel, logy=True, **_size_options())

    return [Figure(name, title, caption, build)]


def _rows_of(data: ReportData, kernels: list[str]) -> pd.DataFrame:
    return data.points[data.points["kernel"].isin(kernels)]


def multipair_against_ppn(data: ReportData) -> list:
    why = "needs a multipair.* kernel at two or more processes per node"
    rows = _rows_of(data, data.kernels("multipair."))
    rows = rows.assign(per_pair_MBps=rows["bandwidth_MBps"] / (rows["nprocs"] // 2).clip(lower=1))
    return (_against_ranks(rows, "multipair-aggregate", "Aggregate bandwidth against processes per node", "ppn",
                           "bandwidth_MBps", "aggregate bandwidth (MB/s)",
                           "Multi-pair bandwidth of all pairs together at the largest size."
                           + data.window_note(data.kernels("multipair.")), why)
            + _against_ranks(rows, "multipair-per-pair", "Per-pair bandwidth against processes per node", "ppn",
                             "per_pair_MBps", "bandwidth per pair (MB/s)",
                             "Multi-pair bandwidth per pair at the largest size."
                             + data.window_note(data.kernels("multipair.")), why))


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



# Kernels whose bandwidth NetPIPE-style throughput plots compare (with any @variant).
THROUGHPUT_KERNELS = ("pingpong.send", "stream.uni", "stream.bi", "exchange.sendrecv", "rma.put", "rma.get",
                      "rma.pingpong", "tcp.pingpong", "memcpy")
POINT_TO_POINT_VARIANTS = ("pingpong.", "pingping", "exchange.")
PATTERNS = ("multipingpong.", "pieces", "ring.", "halo.")
FAN_OUT = ("coll.bcast", "coll.scatter", "coll.scatterv", "coll.scan")


def _per_placement(data: ReportData, name: str, title: str, prefixes, minimum: int, caption: str, why: str,
                   bandwidth: bool = False, mbps: bool = False) -> list:
    """One figure per placement of every kernel starting with one of `prefixes`, where it has `minimum` of them."""
    kernels = sorted({k for k in data.points["kernel"] if kernel_of(k).startswith(tuple(prefixes))})
    figures = []
    for placement in data.placements:
        rows = data.in_placement(placement, kernels)
        if rows["kernel"].nunique() < minimum:
            continue
        rows = rows.assign(curve=rows["kernel"] + " " + rows["library"])
        if mbps:      # NetPIPE's unit: megabits per second
            rows = rows.assign(bandwidth_MBps=rows["bandwidth_MBps"] * 8)
        if rows["curve"].nunique() > MAX_CURVES:
            figures.append(_multiples_figure(f"{name}-{placement}", f"{title}, {placement}",
                                             caption + data.window_note(rows["kernel"].unique()), rows, bandwidth,
                                             ylabel="throughput (Mbps)" if mbps else None))
            continue
        figures.append(Figure(f"{name}-{placement}", f"{title}, {placement}",
                              caption + data.window_note(rows["kernel"].unique()),
                              lambda rows=rows, placement=placement: _curves(
                                  rows, "curve", f"{title} {placement}", bandwidth,
                                  ylabel="throughput (Mbps)" if mbps else None)))
    return figures or [Skipped(name, title, why)]


def throughput_modes(data: ReportData) -> list:
    return _per_placement(data, "throughput", "Throughput per mode", THROUGHPUT_KERNELS, 2,
                          "NetPIPE's view: throughput in Mbps (1e6 bits/s) against size for every streaming, "
                          "ping-pong, one-sided and baseline mode measured in the placement.",
                          "needs two or more of " + ", ".join(THROUGHPUT_KERNELS) + " in one placement",
                          bandwidth=True, mbps=True)


def point_to_point_variants(data: ReportData) -> list:
    return _per_placement(data, "variants", "Point-to-point variants", POINT_TO_POINT_VARIANTS, 3,
                          "Every ping-pong, ping-ping and exchange variant measured in the placement (SKaMPI's "
                          "comparison of send modes and probes).",
                          "needs three or more pingpong/pingping/exchange kernels in one placement")


def patterns(data: ReportData) -> list:
    return _per_placement(data, "patterns", "Communication patterns", PATTERNS, 2,
                          "Multi-ping-pong variants, a message in pieces, ring exchanges and the halo swap "
                          "(time per iteration or per message, see each kernel's metric).",
                          "needs two or more multipingpong/pieces/ring/halo kernels in one placement")


def io_strategies(data: ReportData) -> list:
    return _per_placement(data, "io-strategies", "File I/O strategies", ("io.",), 2,
                          "Aggregate bandwidth of each I/O strategy against the size each task writes or reads.",
                          "needs two or more io.* kernels in one placement", bandwidth=True)


def collective_method(data: ReportData, kernel: str) -> str:
    """accurate, lower, upper or root: how the entry's time relates to the operation's latency."""
    default = "accurate" if kernel_of(kernel) in FAN_OUT else "lower"
    return data.option(kernel, "method", default)


def collective_bounds(data: ReportData) -> list:
    """Per placement and operation: the band between lower and upper bounds, shaded, and
    the accurate (or root) measurement as a line where the campaign has one."""
    title = "Collective latency and its bounds"
    why = "needs a coll.* operation measured with --method lower and upper in one placement"
    kernels = data.kernels("coll.")
    figures = []
    for placement in data.placements:
        rows = data.in_placement(placement, kernels)
        rows = rows.assign(op=[kernel_of(k) for k in rows["kernel"]],
                           method=[collective_method(data, k) for k in rows["kernel"]])
        bounded = [op for op, mine in rows.groupby("op") if {"lower", "upper"} <= set(mine["method"])]
        if not bounded:
            continue
        rows = rows[rows["op"].isin(bounded) & (rows["size"] > 0)]

        def build(rows=rows, placement=placement):
            layers = []
            for (op, library), mine in rows.groupby(["op", "library"]):
                lower = mine[mine["method"] == "lower"].set_index("size")["time_us"]
                upper = mine[mine["method"] == "upper"].set_index("size")["time_us"]
                band = pd.DataFrame({"lower": lower, "upper": upper}).dropna().reset_index()
                label = f"{op} {library}"
                layers.append(hv.Area(band, "size", ["lower", "upper"], label=f"{label} bounds").opts(alpha=0.25))
                for method in ("accurate", "root"):
                    exact = mine[mine["method"] == method]
                    if len(exact):
                        layers += _line_and_points(exact, "size", "time_us", f"{label} {method}", points=False)
            return hv.Overlay(layers).opts(title=f"{title} {placement}", xlabel="size (B)", ylabel="time (us)",
                                           logx=True, logy=True, **_size_options())

        figures.append(Figure(f"collective-bounds-{placement}", f"{title}, {placement}",
                              "Shaded: between the lower bound (back-to-back calls) and the upper bound (each call "
                              "followed by a barrier); lines: the accurate (acknowledged) or root measurement.",
                              build))
    return figures or [Skipped("collective-bounds", title, why)]


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


# The report's pages, each with the figures that go on it. A campaign whose figures fit on one page
# (report.MAX_FIGURES_ONE_PAGE) gets one page in this order; a larger one gets the first page (what
# every reader needs: libraries, placements, small messages) and one page per kernel family.
PAGES = (("", (library_comparison, placement_comparison, small_messages)),
         ("point-to-point", (send_against_ssend, one_sided_against_two_sided, throughput_modes,
                             point_to_point_variants, multipair_against_ppn)),
         ("patterns", (patterns,)),
         ("collectives", (collectives_against_ranks, collective_bounds)),
         ("io", (io_against_tasks, io_strategies)))
FIGURES = tuple(make for _, makers in PAGES for make in makers)


def performance_table(data: ReportData) -> Table | Skipped:
    """The switch-table view: latency (mean, median, P90, P99) and uni-/bi-directional bandwidth per
    library and placement, with each curve's regimes and their 95% intervals, and the single-line
    Hockney fit where it describes the curve."""
    kernel = data.main_kernel()
    title = "Latency and bandwidth per library and placement"
    if kernel is None:
        return Skipped("performance-table", title, "needs a ping-pong or stream kernel")
    points = data.points
    fit = data.ds.sel(kernel=[kernel]).commbench.fit("regimes")
    rows = []
    for (library, placement), mine in points[points["kernel"] == kernel].groupby(["library", "placement"]):
        smallest, largest = mine.loc[mine["size"].idxmin()], mine.loc[mine["size"].idxmax()]
        latency = f"latency at {int(smallest['size'])} B (us)"
        row = {"library": library, "placement": placement,
               f"{latency}: mean": round(smallest["mean_us"], 3),
               f"{latency}: P50 (median)": round(smallest["p50_us"], 3),
               f"{latency}: P90": round(smallest["p90_us"], 3),
               f"{latency}: P99": round(smallest["p99_us"], 3),
               f"{kernel} bandwidth at {int(largest['size'])} B (MB/s)": round(largest["bandwidth_MBps"], 1)}
        # The switch tables' columns: streaming bandwidth, the TCP baseline, and the peak a
        # copy in memory reaches, against which the achieved bandwidth is judged.
        for column, other_kernel, largest_size in (("stream.uni", "stream.uni", True), ("stream.bi", "stream.bi", True),
                                                   ("tcp.pingpong", "tcp.pingpong", True),
                                                   ("memcpy peak", "memcpy", True)):
            other = points[(points["kernel"] == other_kernel) & (points["library"] == library)
                           & (points["placement"] == placement)]
            if other_kernel == "memcpy" and other.empty:      # memcpy runs on one rank: any placement will do
                other = points[(points["kernel"] == "memcpy") & (points["library"] == library)]
            if len(other):
                top = other.loc[other["size"].idxmax()]
                row[f"{column} at {int(top['size'])} B (MB/s)"] = round(top["bandwidth_MBps"], 1)
                if other_kernel == "memcpy":
                    best = max(v for k, v in row.items() if "(MB/s)" in k and "memcpy" not in k)
                    row["best achieved / memcpy peak"] = round(best / top["bandwidth_MBps"], 3)
        if "latency_s" in fit and np.isfinite(fit["latency_s"].sel(library=library, placement=placement,
                                                                     kernel=kernel)):
            row.update(regime_columns(fit.sel(library=library, placement=placement, kernel=kernel)))
        rows.append(row)
    return Table("performance-table", title,
                 f"{kernel}. Latency at the smallest size: mean over all samples; P50, P90 and P99 of a typical "
                 f"launch (the median over launches of each launch's percentile; P50 is the median). Bandwidth: "
                 f"bytes moved / median time; stream columns where the campaign ran them. Regimes from a "
                 f"piecewise alpha-beta fit (segments chosen by BIC): the first regime's latency, the last "
                 f"regime's asymptotic bandwidth, and between which measured sizes each new regime starts. "
                 f"The single-line Hockney fit T = latency + size / bandwidth is shown only where it fits: "
                 f"its relative residual is within {models.NOISE_Z:g} standard errors of the point's median "
                 f"(from the spread of its samples and launches) at all but {models.MISFIT_FRACTION:.0%} of "
                 f"the sizes; elsewhere it lies between regimes and describes none.", pd.DataFrame(rows))


def regime_columns(cell: xr.Dataset) -> dict:
    """A curve's fit_regimes result (ds.commbench.fit("regimes") at one curve) as table columns."""
    switches = [(low, high) for low, high in cell["switch_interval_bytes"].values if np.isfinite(high)]
    n_sizes, beyond = int(cell["n_sizes"]), int(cell["beyond_noise"])
    fits = bool(cell["hockney_fits"])
    return {
        "latency, first regime (us) [95%]": _with_interval(cell["latency_s"] / US, cell["latency_interval_s"] / US),
        "bandwidth, last regime (MB/s) [95%]": _with_interval(cell["bandwidth_Bps"] / MB,
                                                              cell["bandwidth_interval_Bps"] / MB),
        "regime switches": "; ".join(f"between {_exact_size(low)} and {_exact_size(high)}"
                                     for low, high in switches) or "none",
        "Hockney fit": (f"fits: {n_sizes - beyond} of {n_sizes} sizes within noise" if fits
                        else f"does not fit: {beyond} of {n_sizes} sizes beyond noise"),
        "Hockney latency (us) [95%]": _with_interval(cell["hockney_latency_s"] / US,
                                                     cell["hockney_latency_interval_s"] / US) if fits else "-",
        "Hockney bandwidth (MB/s) [95%]": _with_interval(cell["hockney_bandwidth_Bps"] / MB,
                                                         cell["hockney_bandwidth_interval_Bps"] / MB) if fits else "-",
    }


def _exact_size(size: float) -> str:
    """format_size where it is exact ('16 KiB'), else bytes ('16381 B', not a rounded '16 KiB'): a
    switch between 16381 B and 16 KiB must not read as one between 16 KiB and 16 KiB."""
    text = format_size(size)
    number, unit = text.split()
    exact = float(number) * 1024 ** ("B", "KiB", "MiB", "GiB", "TiB").index(unit) == size
    return text if exact else f"{int(size)} B"


def _with_interval(value: xr.DataArray, interval: xr.DataArray) -> str:
    value, (low, high) = float(value), interval.values.astype(float)
    if not np.isfinite(value):
        return "n/a"
    if np.isfinite(low) and np.isfinite(high):
        return f"{_figure(value)} [{_figure(low)}, {_figure(high)}]"
    return _figure(value)


def _figure(value: float) -> str:
    """Four significant figures, or a whole number from 1e4 to 1e7 ('15024' MB/s, not '1.502e+04')."""
    return f"{value:.0f}" if 1e4 <= abs(value) < 1e7 else f"{value:.4g}"


def halo_speedup_table(data: ReportData) -> Table | Skipped:
    """EPCC's halo question: what overlapping the swap with non-blocking calls buys."""
    title = "Halo exchange: blocking against non-blocking"
    halos = data.kernels("halo.")
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
        rows.append({"library": library, "placement": placement, "size (B)": size,
                     "blocking (us)": round(t_block / US, 2), "non-blocking (us)": round(t_over / US, 2),
                     "speed-up": round(t_block / t_over, 3)})
    return Table("halo-speedup", title, "Time per Jacobi iteration; speed-up = blocking / non-blocking "
                 "(above 1: the non-blocking swap is faster).", pd.DataFrame(rows))


def multipair_table(data: ReportData) -> Table | Skipped:
    """The switch document's 'bandwidth with 1, 2, 4 tasks per node'."""
    kernels = data.kernels("multipair.")
    if not kernels:
        return Skipped("multipair-table", "Bandwidth per tasks per node", "needs a multipair.* kernel")
    rows = _rows_of(data, kernels)
    rows = rows[rows["size"] == rows.groupby("kernel")["size"].transform("max")]
    pairs = (rows["nprocs"] // 2).clip(lower=1)
    frame = pd.DataFrame({"library": rows["library"], "kernel": rows["kernel"], "placement": rows["placement"],
                          "tasks per node": rows["ppn"], "size (B)": rows["size"],
                          "aggregate (MB/s)": rows["bandwidth_MBps"].round(1),
                          "per pair (MB/s)": (rows["bandwidth_MBps"] / pairs).round(1)})
    return Table("multipair-table", "Bandwidth per tasks per node",
                 "Multi-pair bandwidth at the largest size: all pairs together and per pair.",
                 frame.sort_values(["library", "kernel", "tasks per node"]))


TABLES = (performance_table, halo_speedup_table, multipair_table)


def all_tables(data: ReportData) -> tuple[list[Table], list[Skipped]]:
    made = [make(data) for make in TABLES]
    return [t for t in made if isinstance(t, Table)], [t for t in made if isinstance(t, Skipped)]


def all_figures(data: ReportData) -> list:
    """Every figure (with its page) and every figure the dataset cannot give (Skipped), in PAGES order."""
    items = []
    for page, makers in PAGES:
        for item in (item for make in makers for item in make(data)):
            if isinstance(item, Figure):
                item.page = page
            items.append(item)
    return items


# ----------------------------------------------------------------------------- comparisons

# Small multiples per figure; a comparison with more panels gets one figure per kernel family.
MAX_PANELS = 12
PANEL_COLUMNS = 3
VERDICT_COLOURS = {"regressed": "#d62728", "improved": "#2ca02c"}
RATIO_COLOUR = "#1f77b4"


@dataclass
class Comparison:
    """Candidate against baseline (commbench.compare's result over placement, kernel and size),
    with how its rows were matched and what differs in how the two were measured."""

    name: str          # file stem prefix of its figures
    title: str
    result: xr.Dataset
    matched: str
    warnings: tuple[str, ...] = ()
    asked: bool = True     # False: a default pair (first row against another), not one the campaign listed

    @property
    def counts(self) -> dict[str, int]:
        """Verdicts of the cells either side measured: sizes no kernel of a placement ran are not 'missing'."""
        result = self.result
        measured = ((result["baseline_launches"] > 0) | (result["candidate_launches"] > 0)).values
        verdicts = result["verdict"].values[measured]
        return {verdict: int((verdicts == verdict).sum()) for verdict in VERDICTS}

    @property
    def statement(self) -> str:
        """The method and the false-discovery control, as printed under the table."""
        attrs = self.result.attrs
        return (f"Method: {attrs['method']}. Multiple testing: {attrs['multiple_testing']}; a size range is "
                f"listed where q <= {1 - attrs['confidence']:g} and the change is at least "
                f"{attrs['min_effect']:.0%}.")


def comparison_pairs(data: ReportData) -> list[tuple[str, str]]:
    """(baseline, candidate) library rows: the campaign's `compare:` pairs, else the first row against each other."""
    listed = data.config.get("compare")
    if listed:
        return [(pair["baseline"], pair["candidate"]) for pair in listed]
    rows = data.libraries
    return [(rows[0], other) for other in rows[1:]]


def _has_data(ds: xr.Dataset, library: str) -> bool:
    return library in ds["library"].values and bool((ds["sample_count"].sel(library=library) > 0).any())


def library_row_comparisons(data: ReportData) -> list:
    items, asked = [], bool(data.config.get("compare"))
    for baseline, candidate in comparison_pairs(data):
        name, title = f"compare-{baseline}-{candidate}", f"{candidate} against {baseline}"
        empty = [row for row in (baseline, candidate) if not _has_data(data.ds, row)]
        if empty:
            items.append(Skipped(name, title, f"library row {', '.join(empty)} has no data in this dataset"))
            continue
        result = within(data.ds, baseline, candidate, dim="library")
        items.append(Comparison(name, title, result, f"library rows of this campaign: baseline {baseline}, "
                                                     f"candidate {candidate}", asked=asked))
    return items


def baseline_comparisons(data: ReportData) -> list:
    """Each library row against the same row (or, one row each, the only row) of the baseline campaign."""
    if data.baseline is None:
        return []
    campaign = str(data.baseline.attrs.get("campaign", "baseline"))
    try:
        result = across(data.baseline, data.ds)
    except ValueError as error:
        return [Skipped(f"baseline-{campaign}", f"Against campaign {campaign}", str(error))]
    warnings = tuple(provenance_differences(data.baseline, data.ds))
    items = []
    for library in (str(v) for v in result["library"].values):
        items.append(Comparison(f"baseline-{campaign}-{library}", f"{library} against campaign {campaign}",
                                result.sel(library=library, drop=True),
                                f"library rows of the two campaigns: {result.attrs['library_map']}", warnings))
    return items


def comparison_panels(result: xr.Dataset) -> list[tuple[str, str, pd.DataFrame]]:
    """(kernel, placement, rows) of every curve with a compared size (a log axis has no 0 B), kernel
    by kernel in the dataset's (the campaign's) order."""
    frame = result[["ratio", "ratio_low", "ratio_high", "verdict"]].to_dataframe().reset_index()
    frame = frame[(frame["verdict"] != "missing") & (frame["size"] > 0)]
    curves = {key: rows.sort_values("size") for key, rows in frame.groupby(["kernel", "placement"])}
    return [(str(kernel), str(placement), curves[kernel, placement]) for kernel in result["kernel"].values
            for placement in result["placement"].values if (kernel, placement) in curves]


def _columns(group: list) -> int:
    """One column per placement where every kernel of the figure ran in the same ones (a row per
    kernel), else PANEL_COLUMNS."""
    placements: dict[str, list] = {}
    for kernel, placement, _ in group:
        placements.setdefault(kernel, []).append(placement)
    shapes = {tuple(names) for names in placements.values()}
    width = len(next(iter(shapes)))
    return width if len(shapes) == 1 and 1 < width <= 4 else min(PANEL_COLUMNS, len(group))


def kernel_family(kernel: str) -> str:
    """'pingpong.send@small' -> 'pingpong'."""
    return kernel_of(kernel).split(".", 1)[0]


def _panel_groups(panels: list) -> list[tuple[str, list]]:
    """All panels in one figure when they fit, else one figure per kernel family (split past MAX_PANELS)."""
    if len(panels) <= MAX_PANELS:
        return [("", panels)]
    families: dict[str, list] = {}
    for panel in panels:
        families.setdefault(kernel_family(panel[0]), []).append(panel)
    groups = []
    for family, members in families.items():
        parts = [members[i:i + MAX_PANELS] for i in range(0, len(members), MAX_PANELS)]
        groups += [(family if len(parts) == 1 else f"{family}-{n + 1}", part) for n, part in enumerate(parts)]
    return groups


def _ratio_limits(rows: pd.DataFrame) -> tuple[float, float]:
    """A y range that shows every ratio and the line at 1; an interval far wider than the ratios'
    spread (few launches) runs off the panel rather than flattening the ratios."""
    smallest, largest = min(float(rows["ratio"].min()), 1.0), max(float(rows["ratio"].max()), 1.0)
    low = max(np.nanmin([smallest, *rows["ratio_low"]]), smallest / 2)
    high = min(np.nanmax([largest, *rows["ratio_high"]]), largest * 2)
    pad = 0.05 * (high - low) or 0.05
    return max(low - pad, 0.0), high + pad


def _ratio_panel(rows: pd.DataFrame, title: str) -> hv.Overlay:
    """Ratio against size (log x) with its interval shaded, a line at 1, and changed sizes marked."""
    bokeh = hv.Store.current_backend == "bokeh"
    layers = [hv.Area(rows, "size", ["ratio_low", "ratio_high"]).opts(
                  color=RATIO_COLOUR, alpha=0.25, **({"line_alpha": 0} if bokeh else {"linewidth": 0})),
              hv.HLine(1.0).opts(color="black", **({"line_dash": "dashed"} if bokeh else {"linestyle": "dashed"})),
              hv.Curve(rows, "size", "ratio").opts(color=RATIO_COLOUR)]
    for verdict, colour in VERDICT_COLOURS.items():
        changed = rows[rows["verdict"] == verdict]
        if len(changed):
            layers.append(hv.Scatter(changed, "size", ["ratio", "verdict"], label=verdict)
                          .opts(color=colour, **({"size": 7, "tools": ["hover"]} if bokeh else {"s": 18})))
    size = {"width": 360, "height": 250} if bokeh else {"fig_inches": (4.5, 3.0)}
    return hv.Overlay(layers).opts(title=title, xlabel="size (B)", ylabel="candidate / baseline time",
                                   logx=True, xticks=_decades(rows["size"]), ylim=_ratio_limits(rows),
                                   show_legend=False, **size)


def _decades(sizes: pd.Series) -> list[float]:
    """Ticks at the powers of ten inside the sizes' span (many panels drawn at once: no minor ticks);
    a span without two of them is marked at its ends."""
    low, high = np.log10(float(sizes.min())), np.log10(float(sizes.max()))
    ticks = [float(10 ** k) for k in range(int(np.ceil(low)), int(np.floor(high)) + 1)]
    return ticks if len(ticks) >= 2 else [float(sizes.min()), float(sizes.max())]


def ratio_figures(comparison: Comparison) -> list:
    panels = comparison_panels(comparison.result)
    if not panels:
        return [Skipped(comparison.name, comparison.title, "no size was measured by both")]
    figures = []
    for family, group in _panel_groups(panels):
        def build(group=group):
            overlays = [_ratio_panel(rows, f"{kernel} {placement}") for kernel, placement, rows in group]
            if len(overlays) == 1:
                return overlays[0]
            layout = hv.Layout(overlays).cols(_columns(group))
            return layout.opts(shared_axes=False) if hv.Store.current_backend == "bokeh" else layout

        which = f", {family} kernels" if family else ""
        figures.append(Figure(comparison.name + (f"-{family}" if family else ""),
                              f"{comparison.title}: ratio against size{which}",
                              f"Candidate / baseline time against size, one panel per kernel and placement; "
                              f"shaded: the ratio's {comparison.result.attrs['confidence']:.0%} interval; dashed: "
                              f"no change; red points regressed, green improved.", build, panels=len(group)))
    return figures


def changed_ranges_table(comparison: Comparison) -> Table:
    ranges = changed_ranges(comparison.result)
    frame = pd.DataFrame({"change": [describe_range(row) for _, row in ranges.iterrows()],
                          "verdict": ranges["verdict"].tolist(), "sizes": ranges["sizes"].tolist(),
                          "q value": ranges["q_value"].tolist()})
    return Table(f"{comparison.name}-ranges", f"{comparison.title}: changed size ranges",
                 "Consecutive measured sizes with the same verdict, with the median ratio's change and "
                 "interval over the range and the smallest q value.", frame)
