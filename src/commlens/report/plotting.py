"""The report's HoloViews drawing helpers: median curves against size with their intervals, lines
with their points, small multiples, and time beside bandwidth.

They build HoloViews elements for the plotting backend that is current when called: Bokeh for the
interactive report, matplotlib for the static PNG/SVG copies.
"""

from __future__ import annotations

import holoviews as hv
import pandas as pd

WIDTH, HEIGHT = 520, 340
# The legend entry of a curve's fitted piecewise model, after the curve's own label.
FIT_LABEL = "fitted regimes"


def median_curves(frame: pd.DataFrame, by: str, title: str, bandwidth: bool, vlines=(), ylabel=None,
            points: bool = True, fits=None) -> hv.Overlay:
    """Median time (or the bandwidth from it) against size (log-log) per `by` group, shaded with the
    95% interval of that median (ReportData.points: `ci_low_us`..., `bandwidth_low_MBps`...). `vlines`:
    (size, colour[, label]) marks of findings where they are; `fits`: {group: frame of size and time_us}
    drawn dashed over the medians, each its own legend entry (a click on it hides it in the interactive
    report). Sizes are labelled as people read them (1 KiB, 1 MiB)."""
    y, label = ("bandwidth_MBps", "bandwidth (MB/s)") if bandwidth else ("time_us", "time (us)")
    label = ylabel or label
    frame = frame[frame["size"] > 0].sort_values("size")     # a log axis has no zero-byte point
    bokeh = hv.Store.current_backend == "bokeh"
    layers = []
    band = ["bandwidth_low_MBps", "bandwidth_high_MBps"] if bandwidth else ["ci_low_us", "ci_high_us"]
    for group, rows in frame.groupby(by, sort=True):
        if set(band) <= set(rows.columns):
            layers.append(hv.Area(rows, "size", band, label=str(group))
                          .opts(alpha=0.2, **({"line_alpha": 0} if bokeh else {"linewidth": 0})))
        layers += line_and_points(rows, "size", y, str(group), hover=["library", "placement", "kernel"], points=points)
        fit = (fits or {}).get(group)
        if fit is not None and len(fit):
            fit = fit[fit["size"] > 0].sort_values("size")
            values = fit.assign(bandwidth_MBps=fit["size"] * fit.get("bytes_factor", 1.0) / fit["time_us"])
            line = hv.Curve(values, "size", y, label=f"{group}: {FIT_LABEL}")
            layers.append(line.opts(line_dash="dotted", color="black", alpha=0.7) if bokeh
                          else line.opts(linestyle="dotted", color="black", alpha=0.7))
    for mark in vlines:
        x, colour = mark[0], mark[1]
        line = hv.VLine(float(x))
        layers.append(line.opts(color=colour, line_dash="dashed") if bokeh
                      else line.opts(color=colour, linestyle="dashed"))
    overlay = hv.Overlay(layers).opts(title=title, xlabel="size", ylabel=label, logx=True, logy=True,
                                      **_size_tick_options(frame["size"]), **size_options())
    return overlay.opts(legend_opts={"click_policy": "hide"}) if bokeh else overlay


def _size_tick_options(sizes) -> dict:
    """The size axis's ticks, (value, label) pairs: Bokeh draws them as they are, and the static drawer
    (commlens.report.static) too."""
    ticks = size_ticks(sizes)
    if not ticks:
        return {}
    return {"xticks": ticks}


def size_ticks(sizes) -> list[tuple[float, str]]:
    """Ticks at the powers of four (of two where the range is short) within `sizes`, labelled 1 KiB, 1 MiB."""
    from commlens.units import format_size

    sizes = [float(size) for size in sizes if size > 0]
    if not sizes:
        return []
    low, high = min(sizes), max(sizes)
    step = 2 if high / low < 64 else 4 if high / low < 2 ** 14 else 16      # about six labels, none overlapping
    ticks, value = [], 1.0
    while value <= high:
        if value >= low:
            ticks.append((value, format_size(int(value))))
        value *= step
    return ticks


def line_and_points(rows: pd.DataFrame, x: str, y: str, label: str, hover=(), points: bool = True) -> list:
    """A labelled line through `rows` (and its points), built as HoloViews elements directly: hvPlot's
    converter costs about 20 ms a call, and a campaign's report draws hundreds of lines."""
    vdims = [y, *[column for column in hover if column in rows and column not in (x, y)]]
    line = hv.Curve(rows, x, vdims, label=label)
    layers = [line.opts(tools=["hover"]) if hv.Store.current_backend == "bokeh" else line]
    if points:
        dots = hv.Scatter(rows, x, vdims, label=label)
        layers.append(dots.opts(size=6) if hv.Store.current_backend == "bokeh" else dots.opts(s=12))
    return layers


def size_options() -> dict:
    if hv.Store.current_backend == "bokeh":
        return {"width": WIDTH, "height": HEIGHT, "legend_position": "top_left"}
    return {"fig_inches": (6.5, 4.2), "legend_position": "top_left"}


# More curves than this in one overlay and a reader cannot tell them apart: a figure that would have
# more draws one small panel per kernel instead, its libraries as the curves (see small_multiples).
MAX_CURVES = 12
MULTIPLE_COLUMNS = 4


def small_multiples(frame: pd.DataFrame, panel: str, by: str, title: str, bandwidth: bool, ylabel=None):
    """One small log-log panel per `panel` value (a curve per `by` group in each), on shared axes, so
    forty kernel variants of a placement read as forty comparable panels rather than 200 tangled lines."""
    bokeh = hv.Store.current_backend == "bokeh"
    size = {"width": 280, "height": 210} if bokeh else {"fig_inches": (3.2, 2.4)}
    panels: list[hv.Overlay] = []
    for name, rows in frame.groupby(panel, sort=True):
        overlay = median_curves(rows, by, str(name), bandwidth, ylabel=ylabel, points=False)   # lines: panels are small
        panels.append(overlay.opts(show_legend=len(panels) == 0, fontsize={"title": 9}, **size))
    return hv.Layout(panels).cols(MULTIPLE_COLUMNS)


def time_and_bandwidth(frame, by, title, vlines=(), fits=None):
    return lambda: (median_curves(frame, by, f"{title}: time", False, vlines, fits=fits)
                    + median_curves(frame, by, f"{title}: bandwidth", True, vlines, fits=fits)).cols(2)
