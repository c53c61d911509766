"""The report's HoloViews drawing helpers: median curves against size with their intervals, lines
with their points, small multiples, and time beside bandwidth.

They build HoloViews elements for the plotting backend that is current when called: Bokeh for the
interactive report, matplotlib for the static PNG/SVG copies.
"""

from __future__ import annotations

import holoviews as hv
import pandas as pd

WIDTH, HEIGHT = 520, 340


def _curves(frame: pd.DataFrame, by: str, title: str, bandwidth: bool, vlines=(), ylabel=None,
            points: bool = True) -> hv.Overlay:
    """Median time (or the bandwidth from it) against size (log-log) per `by` group, shaded with the
    95% interval of that median (ReportData.points: `ci_low_us`..., `bandwidth_low_MBps`...)."""
    y, label = ("bandwidth_MBps", "bandwidth (MB/s)") if bandwidth else ("time_us", "time (us)")
    label = ylabel or label
    frame = frame[frame["size"] > 0].sort_values("size")     # a log axis has no zero-byte point
    layers = []
    band = ["bandwidth_low_MBps", "bandwidth_high_MBps"] if bandwidth else ["ci_low_us", "ci_high_us"]
    for group, rows in frame.groupby(by, sort=True):
        if set(band) <= set(rows.columns):
            layers.append(hv.Area(rows, "size", band, label=str(group))
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
