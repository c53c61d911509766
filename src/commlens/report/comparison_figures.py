"""A comparison drawn: its ratio of times against size, one panel per kernel and placement, with
the ratio's interval, the line of no change and the sizes that changed marked; more panels than fit
one figure are split by kernel family.
"""

from __future__ import annotations

import holoviews as hv
import numpy as np
import pandas as pd
import xarray as xr

from commlens.campaign import kernel_of
from commlens.report.comparisons import Comparison
from commlens.report.elements import Figure, Skipped

# Small multiples per figure; a comparison with more panels gets one figure per kernel family.
MAX_PANELS = 12
PANEL_COLUMNS = 3
# Beyond the margin in full colour; a change under it, or of an unsure size, paler.
VERDICT_COLOURS = {"regressed": "#d62728", "improved": "#2ca02c", "slower": "#f4a3a3", "faster": "#9fd89f"}
RATIO_COLOUR = "#1f77b4"


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


def _level(result) -> str:
    """The level of a comparison's intervals, in words."""
    level = result.attrs.get("interval_level")
    if level is None:
        return f"{result.attrs['confidence']:.0%} marginal"
    return f"false coverage-rate level {level:.4g}"


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
                              f"shaded: the interval each verdict was read off ({_level(comparison.result)}); "
                              f"dashed: no change; red points slower beyond the margin, green faster beyond it, "
                              f"paler: slower or faster under it or by an unsure amount.", build, panels=len(group)))
    return figures
