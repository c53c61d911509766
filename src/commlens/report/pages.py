"""Which of the report's pages each figure goes on, and which figures are drawn with Bokeh.

A campaign with more figures (or panels) than fit one page gets report.html (what changed, the
overview figures, tables, provenance) and one report-<family>.html per kernel family; past
MAX_INTERACTIVE_PANELS Bokeh panels in all, or past MAX_PANELS in one figure, a figure is shown as
its static PNG from figures/ beside the page, so neither the build nor the page grows without bound.
"""

from __future__ import annotations

from commlens.report.comparison_figures import MAX_PANELS
from commlens.report.elements import Figure


# A report with more figures than this gets one page per kernel family (figures.PAGES) after its first.
MAX_FIGURES_ONE_PAGE = 40
MAX_PANELS_ONE_PAGE = 120     # or more panels than this (small multiples of many kernels)
# Bokeh panels in the whole report, in page order; figures past it are shown as their static PNG. A
# panel costs Bokeh about half a second to render and serialise (a grid of many panels more: its tools
# and legends are merged across them, and past about 20 panels serialising it overflows the stack), and
# a page with hundreds of them is slow to open as well. A figure of more than MAX_PANELS is always static.
MAX_INTERACTIVE_PANELS = 80


def interactive_figures(figures: list[Figure]) -> set[str]:
    """Names of the figures drawn with Bokeh: in report order, while their panels fit the budget."""
    chosen, spent = set(), 0
    for figure in figures:
        if figure.panels <= MAX_PANELS and spent + figure.panels <= MAX_INTERACTIVE_PANELS:
            chosen.add(figure.name)
            spent += figure.panels
    return chosen


def figure_pages(figures: list[Figure]) -> dict[str, list[Figure]]:
    """Figures per page, first page ("") first: all on it where they fit, else as figures.PAGES says."""
    if len(figures) <= MAX_FIGURES_ONE_PAGE and sum(figure.panels for figure in figures) <= MAX_PANELS_ONE_PAGE:
        return {"": list(figures)}
    pages: dict[str, list[Figure]] = {"": []}
    for figure in figures:
        pages.setdefault(figure.page, []).append(figure)
    return pages


def page_file(page: str) -> str:
    return f"report-{page}.html"
