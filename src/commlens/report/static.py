"""Static report figures (PNG, SVG) drawn with matplotlib directly from a figure's HoloViews object.

HoloViews' matplotlib backend costs about 1.5 s a figure, most of it its own plotting machinery;
the report's figures use a few element kinds (lines and markers from hvPlot, shaded intervals,
vertical and horizontal marks, overlays and side-by-side layouts), which matplotlib draws in a
fraction of that. The interactive page still renders the same objects with Bokeh. Anything else raises
NoDirectDrawing, and static_copies.save_static falls back to HoloViews' renderer for that figure.
"""

from __future__ import annotations

from typing import Any

import holoviews as hv
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import NullLocator  # noqa: E402

PANEL_INCHES = (6.5, 4.2)
TIGHT_PANELS = 12
COLOURS = plt.rcParams["axes.prop_cycle"].by_key()["color"]


class NoDirectDrawing(TypeError):
    """An element kind this drawer does not know."""


def draw(obj) -> plt.Figure:
    """A matplotlib figure of `obj` (built for the matplotlib backend): a Layout side by side in
    its columns, or one Overlay or element."""
    panels = list(obj) if isinstance(obj, hv.Layout) else [obj]
    columns = min(getattr(obj, "_max_cols", None) or len(panels), len(panels)) if isinstance(obj, hv.Layout) else 1
    rows = -(-len(panels) // columns)
    width, height = _options(panels[0]).get("fig_inches") or PANEL_INCHES     # small multiples ask for less
    figure, axes = plt.subplots(rows, columns, figsize=(width * columns, height * rows), squeeze=False)
    try:
        for ax, panel in zip(axes.ravel(), panels):
            _panel(ax, panel)
        for ax in axes.ravel()[len(panels):]:
            ax.set_visible(False)
        if len(panels) <= TIGHT_PANELS:
            figure.tight_layout()
        else:      # small multiples: tight_layout's text measuring and log axes' minor ticks are most of the cost
            figure.subplots_adjust(left=0.06, right=0.98, bottom=0.04, top=0.97, wspace=0.3, hspace=0.45)
            for ax in axes.ravel():
                ax.xaxis.set_minor_locator(NullLocator())
                ax.yaxis.set_minor_locator(NullLocator())
    except Exception:
        plt.close(figure)
        raise
    return figure


def _layers(panel) -> list[tuple[str, Any]]:
    """(label, element) of every layer, NdOverlays (hvPlot's `by=`) opened into their members."""
    members = list(panel) if isinstance(panel, hv.Overlay) else [panel]
    layers = []
    for member in members:
        if isinstance(member, hv.NdOverlay):
            layers += [(" ".join(map(str, key)) if isinstance(key, tuple) else str(key), element)
                       for key, element in member.items()]
        else:
            layers.append((member.label, member))
    return layers


def _options(obj) -> dict:
    return hv.Store.lookup_options("matplotlib", obj, "plot").kwargs | \
        hv.Store.lookup_options("matplotlib", obj, "style").kwargs


def _panel(ax, panel) -> None:
    colours: dict[str, str] = {}
    logx = logy = False
    for label, element in _layers(panel):
        options = _options(element)
        logx, logy = logx or options.get("logx", False), logy or options.get("logy", False)
        base = label.replace(" bounds", "") if label else ""
        colour = options.get("color") if isinstance(options.get("color"), str) else None
        colour = colour or colours.setdefault(base, COLOURS[len(colours) % len(COLOURS)])
        if isinstance(element, (hv.VLine, hv.HLine)):
            mark = ax.axvline if isinstance(element, hv.VLine) else ax.axhline
            mark(float(element.data), color=colour, linestyle=options.get("linestyle", "--"), linewidth=1)
            continue
        x = element.dimension_values(0)
        if isinstance(element, hv.Area):
            low, high = ((element.dimension_values(1), element.dimension_values(2)) if len(element.vdims) > 1
                         else (0 * element.dimension_values(1), element.dimension_values(1)))
            ax.fill_between(x, low, high, color=colour, alpha=options.get("alpha", 0.2), linewidth=0)
        elif isinstance(element, hv.Scatter):
            ax.scatter(x, element.dimension_values(1), color=colour, s=options.get("s", 12), zorder=3)
        elif isinstance(element, hv.Curve):
            ax.plot(x, element.dimension_values(1), color=colour, label=label or None, linewidth=1.5)
        else:
            raise NoDirectDrawing(f"no direct drawing for {type(element).__name__}")
    options = _options(panel)
    logx, logy = options.get("logx", logx), options.get("logy", logy)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    if options.get("ylim"):
        ax.set_ylim(*options["ylim"])
    if options.get("xticks") is not None:
        # Explicit ticks only, as Bokeh's fixed ticker draws them: a log axis's minor ticks are most of
        # the cost of a panel. (value, label) pairs keep their labels (sizes as 1 KiB, 1 MiB).
        ticks = list(options["xticks"])
        if ticks and isinstance(ticks[0], tuple):
            ax.set_xticks([value for value, _ in ticks], [label for _, label in ticks])
        else:
            ax.set_xticks(ticks)
        ax.xaxis.set_minor_locator(NullLocator())
    fontsize = options.get("fontsize")
    ax.set_title(options.get("title", getattr(panel, "label", "")),
                 fontsize=fontsize.get("title", 10) if isinstance(fontsize, dict) else fontsize or 10)
    ax.set_xlabel(options.get("xlabel") or (panel.kdims[0].pprint_label if panel.kdims else ""))
    ax.set_ylabel(options.get("ylabel") or "")
    ax.grid(True, which="major", alpha=0.3)
    if options.get("show_legend", True) and any(line.get_label() and not line.get_label().startswith("_")
                                                for line in ax.get_lines()):
        ax.legend(loc="upper left", fontsize=7, framealpha=0.8)


def static_image(figure, dpi: int = 100):
    """`figure` as a PNG image for a notebook to show (IPython.display.Image, its title as alt text):
    `figure` is a report Figure or a function that returns a HoloViews object, built for matplotlib and
    drawn as the report's static copies are (draw; HoloViews' renderer for an element draw does not know).
    A PNG lives in the notebook's saved output, so its HTML export, nbviewer and GitHub show it; Bokeh
    output needs JavaScript and a DynamicMap a running kernel."""
    import io

    from IPython.display import Image

    from commlens.report.backends import current_backend

    with current_backend("matplotlib"):
        built = getattr(figure, "build", figure)()
    try:
        drawn = draw(built)
    except NoDirectDrawing:
        drawn = hv.render(built, backend="matplotlib")
    png = io.BytesIO()
    try:     # draw() laid the figure out: a tight bounding box would measure every label again (20% of the time)
        drawn.savefig(png, format="png", dpi=dpi)
    finally:
        plt.close(drawn)
    first = list(built)[0] if isinstance(built, hv.Layout) else built
    return Image(data=png.getvalue(), format="png",
                 alt=getattr(figure, "title", "") or _options(first).get("title") or "figure")
