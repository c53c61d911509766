"""The report's figures, built from a campaign dataset alone.

Every figure is a function of the dataset (through `ReportData`) that returns a
`Figure` (a HoloViews object made with hvPlot) or a `Skipped` that says what the
dataset lacks. The same function is called once per plotting backend: Bokeh for the
interactive report, matplotlib for the static PNG/SVG copies; hvPlot applies its
options to the backend that is current when the plot is built. `PAGES` says which
report page each figure goes on.
"""

from __future__ import annotations

import holoviews as hv
import numpy as np
import pandas as pd

from commlens.campaign import kernel_of
from commlens.data.kernels import catalogue_kernels_tagged, kernel_tags
from commlens.report.analysis_table import ReportData, kernel_rows
from commlens.report.elements import Figure, Skipped
from commlens.report.network_figures import pair_matrices
from commlens.report.overlap_figure import availability_against_size, overlap_against_size
from commlens.report.plotting import (MAX_CURVES, median_curves, line_and_points, size_options, small_multiples,
                                       time_and_bandwidth)

SMALL_MESSAGES = 8000      # bytes: the reports' small-message range ends at 2000 integers
BAND = "shaded: the 95% interval of each median (see Methods, Intervals)."
BANDWIDTH_COLUMNS = ("bandwidth_MBps", "bandwidth_low_MBps", "bandwidth_high_MBps")


def _drawn(rows: pd.DataFrame) -> frozenset:
    """The (library, placement, kernel) curves of `rows` that a figure draws against size."""
    return frozenset(rows[["library", "placement", "kernel"]].drop_duplicates().itertuples(index=False, name=None))


def library_comparison(data: ReportData) -> list:
    kernel = data.main_kernel()
    if len(data.libraries) < 2 or kernel is None:
        return [Skipped("library-comparison", "Library comparison",
                        "needs two or more libraries and a ping-pong or stream kernel")]
    figures = []
    for placement in data.placements:
        rows = data.points[(data.points["kernel"] == kernel) & (data.points["placement"] == placement)]
        if rows["library"].nunique() >= 2:
            marks = finding_marks(data, rows)
            figures.append(Figure(f"library-comparison-{placement}", f"{kernel}, {placement}: library comparison",
                                  f"Median {kernel} time and bandwidth against size, one curve per library, "
                                  f"placement {placement}; {BAND}" + marks_caption(marks) + data.window_note([kernel]),
                                  time_and_bandwidth(rows, "library", f"{kernel} {placement}", marks,
                                                      regime_lines(data, rows, "library")), curves=_drawn(rows)))
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
                                  f"(nodes x processes per node; off-node placements on one host are emulated); "
                                  f"{BAND}", time_and_bandwidth(mine, "placement", f"{kernel} {library}"),
                                  curves=_drawn(mine)))
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
                                  f"placement {placement}; {BAND}", time_and_bandwidth(rows, "curve", placement),
                                  curves=_drawn(rows)))
    return figures or [Skipped(name, title, why)]


def _multiples_figure(name: str, title: str, caption: str, rows: pd.DataFrame, bandwidth: bool,
                      ylabel=None) -> Figure:
    """`rows` (a curve per kernel and library) as small multiples: a panel per kernel, a curve per library."""
    kernels = rows["kernel"].nunique()
    return Figure(name, title, caption + f" {rows['curve'].nunique()} curves, more than {MAX_CURVES}: one panel "
                                         f"per kernel ({kernels}), a curve per library.",
                  lambda: small_multiples(rows, "kernel", "library", title, bandwidth, ylabel), panels=kernels,
                  curves=_drawn(rows))


def send_against_ssend(data: ReportData) -> list:
    return _kernel_pair(data, "send-ssend", "Send against Ssend", "pingpong.send",
                        [k for k in ("pingpong.ssend",) if data.has(k)],
                        "needs pingpong.send and pingpong.ssend in one placement")


def one_sided_against_two_sided(data: ReportData) -> list:
    return _kernel_pair(data, "one-sided", "One-sided against two-sided", "pingpong.send", data.kernels("one-sided"),
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
                              lambda rows=rows, marks=marks, placement=placement: median_curves(
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
                  for layer in line_and_points(points, x, y, str(curve))]
        return hv.Overlay(layers).opts(title=title, xlabel=x, ylabel=ylabel, logy=True, **size_options())

    return [Figure(name, title, caption, build)]


def multipair_against_ppn(data: ReportData) -> list:
    why = "needs a multipair.* kernel at two or more processes per node"
    rows = kernel_rows(data, data.kernels("multipair"))
    rows = rows.assign(per_pair_MBps=rows["bandwidth_MBps"] / (rows["nprocs"] // 2).clip(lower=1))
    return (_against_ranks(rows, "multipair-aggregate", "Aggregate bandwidth against processes per node", "ppn",
                           "bandwidth_MBps", "aggregate bandwidth (MB/s)",
                           "Multi-pair bandwidth of all pairs together at the largest size."
                           + data.window_note(data.kernels("multipair")), why)
            + _against_ranks(rows, "multipair-per-pair", "Per-pair bandwidth against processes per node", "ppn",
                             "per_pair_MBps", "bandwidth per pair (MB/s)",
                             "Multi-pair bandwidth per pair at the largest size."
                             + data.window_note(data.kernels("multipair")), why))


def collectives_against_ranks(data: ReportData) -> list:
    rows = kernel_rows(data, data.kernels("collective"))
    return _against_ranks(rows, "collectives", "Collective latency against ranks", "nprocs", "time_us", "time (us)",
                          "Collective operation latency (or its bound, see the kernel label) at the largest size "
                          "against the number of ranks.",
                          "needs a coll.* kernel at two or more rank counts")


def io_against_tasks(data: ReportData) -> list:
    return _against_ranks(kernel_rows(data, data.kernels("io")), "io", "File I/O bandwidth against tasks", "nprocs",
                          "bandwidth_MBps", "aggregate bandwidth (MB/s)",
                          "Aggregate file I/O bandwidth at the largest size against the number of tasks.",
                          "needs an io.* kernel at two or more task counts")



def _per_placement(data: ReportData, name: str, title: str, tag: str, minimum: int, caption: str, why: str,
                   bandwidth: bool = False, mbps: bool = False) -> list:
    """One figure per placement of every kernel tagged `tag` (kernels/catalogue.def), where it has
    `minimum` of them."""
    kernels = data.kernels(tag)
    figures = []
    for placement in data.placements:
        rows = data.in_placement(placement, kernels)
        if rows["kernel"].nunique() < minimum:
            continue
        rows = rows.assign(curve=rows["kernel"] + " " + rows["library"])
        if mbps:      # NetPIPE's unit: megabits per second
            rows = rows.assign(**{column: rows[column] * 8 for column in BANDWIDTH_COLUMNS})
        if rows["curve"].nunique() > MAX_CURVES:
            figures.append(_multiples_figure(f"{name}-{placement}", f"{title}, {placement}",
                                             caption + data.window_note(rows["kernel"].unique()), rows, bandwidth,
                                             ylabel="throughput (Mbps)" if mbps else None))
            continue
        figures.append(Figure(f"{name}-{placement}", f"{title}, {placement}",
                              caption + data.window_note(rows["kernel"].unique()),
                              lambda rows=rows, placement=placement: median_curves(
                                  rows, "curve", f"{title} {placement}", bandwidth,
                                  ylabel="throughput (Mbps)" if mbps else None), curves=_drawn(rows)))
    return figures or [Skipped(name, title, why)]


def throughput_modes(data: ReportData) -> list:
    return _per_placement(data, "throughput", "Throughput per mode", "throughput", 2,
                          "NetPIPE's view: throughput in Mbps (1e6 bits/s) against size for every streaming, "
                          "ping-pong, one-sided and baseline mode measured in the placement.",
                          "needs two or more throughput kernels (" + ", ".join(catalogue_kernels_tagged("throughput"))
                          + ") in one placement", bandwidth=True, mbps=True)


def point_to_point_variants(data: ReportData) -> list:
    return _per_placement(data, "variants", "Point-to-point variants", "variant", 3,
                          "Every ping-pong, ping-ping and exchange variant measured in the placement (SKaMPI's "
                          "comparison of send modes and probes).",
                          "needs three or more pingpong/pingping/exchange kernels in one placement")


def patterns(data: ReportData) -> list:
    return _per_placement(data, "patterns", "Communication patterns", "pattern", 2,
                          "Multi-ping-pong variants, a message in pieces, ring exchanges and the halo swap "
                          "(time per iteration or per message, see each kernel's metric).",
                          "needs two or more multipingpong/pieces/ring/halo kernels in one placement")


def io_strategies(data: ReportData) -> list:
    return _per_placement(data, "io-strategies", "File I/O strategies", "io", 2,
                          "Aggregate bandwidth of each I/O strategy against the size each task writes or reads.",
                          "needs two or more io.* kernels in one placement", bandwidth=True)


def many_at_once(data: ReportData) -> list:
    return _per_placement(data, "congestion", "Many ranks at once", "congestion", 1,
                          "Bandwidth in all when many ranks talk at once, against size: into rank 0 as every other "
                          "rank sends to it (fan.in), out of it to every other (fan.out; OSU 7.5's osu_bw_fan_in "
                          "and osu_bw_fan_out), and between the pairs of a random perfect matching, a new one each "
                          "sample (bisection). Against one pair alone: a fan that reads no more than one pair is "
                          "held by the middle rank's node or link; a bisection that reads less than the pairs "
                          "together, by what they share. Each rank's own time is in the dataset's pair_time.",
                          "needs fan.in, fan.out or bisection in a placement", bandwidth=True)


def collective_method(data: ReportData, kernel: str) -> str:
    """accurate, lower, upper, root or window: how the entry's time relates to the operation's latency."""
    default = "accurate" if "fan-out" in kernel_tags(data.ds).get(kernel, ()) else "lower"
    return data.option(kernel, "method", default)


def collective_bounds(data: ReportData) -> list:
    """Per placement and operation: the band between lower and upper bounds, shaded, and
    the accurate (or root) measurement as a line where the campaign has one."""
    title = "Collective latency and its bounds"
    why = "needs a coll.* operation measured with --method lower and upper in one placement"
    kernels = data.kernels("collective")
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
                for method in ("accurate", "root", "window"):
                    exact = mine[mine["method"] == method]
                    if len(exact):
                        layers += line_and_points(exact, "size", "time_us", f"{label} {method}", points=False)
            return hv.Overlay(layers).opts(title=f"{title} {placement}", xlabel="size (B)", ylabel="time (us)",
                                           logx=True, logy=True, **size_options())

        figures.append(Figure(f"collective-bounds-{placement}", f"{title}, {placement}",
                              "Shaded: between the lower bound (back-to-back calls) and the upper bound (each call "
                              "followed by a barrier); lines: the accurate (acknowledged), root or window (calls "
                              "started together on synchronised clocks) measurement.",
                              build, curves=_drawn(rows)))
    return figures or [Skipped("collective-bounds", title, why)]


FINDING_COLOURS = {"packet_steps": "grey", "protocol_switch": "red", "regime_change": "brown", "alignment": "purple",
                   "spike": "orange"}
# Findings a figure marks where they are (what changes the curve from there on, or a staircase's first step).
MARKED = ("protocol_switch", "regime_change", "packet_steps")


def finding_marks(data: ReportData, rows: pd.DataFrame) -> list[tuple[float, str]]:
    """Dashed lines where the findings of the curves in `rows` are, coloured by kind (FINDING_COLOURS)."""
    curves = set(zip(rows["library"], rows["placement"], rows["kernel"]))
    found = data.findings[[curve in curves for curve in zip(data.findings["library"], data.findings["placement"],
                                                             data.findings["kernel"])]] if len(data.findings) \
        else data.findings
    if not len(found):
        return []
    found = found[found["kind"].isin(MARKED)]
    return sorted({(float(row["size"]), FINDING_COLOURS[row["kind"]]) for _, row in found.iterrows()})


def marks_caption(marks) -> str:
    if not marks:
        return ""
    kinds = {colour: kind for kind, colour in FINDING_COLOURS.items()}
    shown = sorted({kinds[colour].replace("_", " ") + f" ({colour})" for _, colour in marks})
    return (f" Dashed lines mark the findings where they are ({', '.join(shown)}; the Findings table gives each); "
            f"dotted, the regimes fitted to each curve (a click on their legend entry hides them).")


def regime_lines(data: ReportData, rows: pd.DataFrame, by: str) -> dict:
    """Per `by` group of `rows` (one curve each), the piecewise model's time at its sizes (microseconds)."""
    if rows.groupby(by)[["library", "placement", "kernel"]].nunique().max().max() > 1:
        return {}          # a group of several curves has no one fit
    lines = {}
    fits = data.piecewise
    if "segment_first_size_bytes" not in fits:
        return {}          # no curve had sizes enough for the model
    for group, curve in rows.groupby(by, sort=True):
        first = curve.iloc[0]
        fit = fits.sel(library=first["library"], placement=first["placement"], kernel=first["kernel"])
        starts = fit["segment_first_size_bytes"].values
        latency, bandwidth = fit["segment_latency_s"].values, fit["segment_bandwidth_Bps"].values
        valid = np.isfinite(starts)
        if not valid.any():
            continue
        sizes = curve["size"].to_numpy(float)
        which = np.clip(np.searchsorted(starts[valid], sizes, side="right") - 1, 0, valid.sum() - 1)
        time_s = latency[valid][which] + sizes / bandwidth[valid][which]
        factor = (curve["bandwidth_MBps"] * curve["time_us"] / curve["size"]).to_numpy()
        lines[group] = pd.DataFrame({"size": sizes, "time_us": time_s / 1e-6, "bytes_factor": factor})
    return lines


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
                  lambda: median_curves(rows, "library", f"{kernel} {library} {placement}", False, marks))


# The report's pages, each with the figures that go on it. A campaign whose figures fit on one page
# (pages.MAX_FIGURES_ONE_PAGE) gets one page in this order; a larger one gets the first page (what
# every reader needs: libraries, placements, small messages) and one page per kernel family.
PAGES = (("", (library_comparison, placement_comparison, small_messages)),
         ("point-to-point", (send_against_ssend, one_sided_against_two_sided, throughput_modes,
                             point_to_point_variants, multipair_against_ppn, overlap_against_size,
                             availability_against_size)),
         ("patterns", (patterns,)),
         ("collectives", (collectives_against_ranks, collective_bounds)),
         ("io", (io_against_tasks, io_strategies)),
         ("network", (pair_matrices, many_at_once)))
FIGURES = tuple(make for _, makers in PAGES for make in makers)


def every_curve(data: ReportData, drawn: frozenset) -> list:
    """Latency and bandwidth against size of every measured curve that no figure in `drawn` draws
    against size, a figure per placement (small multiples past MAX_CURVES): whatever its shape (one
    library, one placement, a kernel no family figure takes), a campaign's every curve is drawn."""
    rows = data.points
    left = ~pd.Series(list(zip(rows["library"], rows["placement"], rows["kernel"])), index=rows.index).isin(drawn)
    figures = []
    for placement, mine in rows[left].groupby("placement", sort=False):
        mine = mine.assign(curve=mine["kernel"] + " " + mine["library"])
        name, title = f"curves-{placement}", f"Latency and bandwidth, {placement}"
        caption = (f"Median time and bandwidth against size of every curve measured in placement {placement} "
                   f"that no figure above draws; {BAND}" + data.window_note(mine["kernel"].unique()))
        if mine["curve"].nunique() > MAX_CURVES:
            figures += [_multiples_figure(f"{name}-time", f"{title}: time", caption, mine, False),
                        _multiples_figure(f"{name}-bandwidth", f"{title}: bandwidth", caption, mine, True)]
        else:
            one_kernel = mine["kernel"].nunique() == 1      # then a curve per library, the kernel in the title
            label = f"{mine['kernel'].iloc[0]} {placement}" if one_kernel else placement
            by = "library" if one_kernel else "curve"
            marks = finding_marks(data, mine)
            figures.append(Figure(name, title, caption + marks_caption(marks),
                                  time_and_bandwidth(mine, by, label, marks, regime_lines(data, mine, by)),
                                  curves=_drawn(mine)))
    return figures


def all_figures(data: ReportData) -> list:
    """Every figure (with its page), in PAGES order, then those of every curve no figure drew
    (every_curve, on the first page); and every figure the dataset cannot give (Skipped)."""
    items = []
    for page, makers in PAGES:
        for item in (item for make in makers for item in make(data)):
            if isinstance(item, Figure):
                item.page = page
            items.append(item)
    drawn = frozenset().union(*(item.curves for item in items if isinstance(item, Figure)))
    return items + every_curve(data, drawn)
