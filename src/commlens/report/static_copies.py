"""Static copies of every figure (PNG and SVG, drawn with matplotlib by commlens.report.static, in
a forked process while the HTML is built) in figures/ beside the report.
"""

from __future__ import annotations

from pathlib import Path

import holoviews as hv
import matplotlib.pyplot as plt

from commlens.io.atomic import replacing
from commlens.report.backends import build_with, load_backend
from commlens.report.elements import Figure

STATIC_FORMATS = ("png", "svg")
STATIC_DPI = 150


class StaticDrawing:
    """save_static for every figure, in a forked worker process while the caller builds the HTML:
    on two cores the report takes about as long as its slower half instead of both halves.
    Where fork is not available (or a single core), the figures are drawn in files(), in turn."""

    def __init__(self, figures: list[Figure], directory: Path):
        self.figures, self.directory, self.pool, self.pending = figures, directory, None, None
        self.drawn: list[list[str]] | None = None

    def __enter__(self):
        import multiprocessing
        import os

        if self.figures and (os.cpu_count() or 1) > 1 and "fork" in multiprocessing.get_all_start_methods():
            load_backend("matplotlib")     # once, before the fork
            global _FORKED_FIGURES
            _FORKED_FIGURES = (self.figures, self.directory)    # inherited by the fork, not pickled
            # As many workers as cores: the parent's Bokeh rendering is the shorter half, and the
            # workers have every core to themselves once it is done.
            workers = min(len(self.figures), os.cpu_count() or 2)
            self.pool = multiprocessing.get_context("fork").Pool(workers)
            self.pending = self.pool.map_async(_save_forked, range(len(self.figures)), chunksize=1)
        return self

    def files(self) -> list[list[str]]:
        if self.drawn is None:
            self.drawn = ([save_static(figure, self.directory) for figure in self.figures] if self.pending is None
                          else self.pending.get())
        return self.drawn

    def image(self, name: str) -> str:
        """Where a page that shows a figure static finds its PNG: figures/ beside the page. Linked, not
        inlined: a broad campaign's small multiples are megabytes each, and a page inlining them is slow
        to open."""
        return f"{self.directory.name}/{name}.png"

    def __exit__(self, *exc):
        if self.pool is not None:
            if exc[0]:
                self.pool.terminate()    # the HTML failed: the drawings are not wanted
            else:
                self.pool.close()
            self.pool.join()
        return False


_FORKED_FIGURES: tuple = ()


def _save_forked(index: int) -> list[str]:
    figures, directory = _FORKED_FIGURES
    if hv.Store.current_backend != "matplotlib":   # this process draws nothing else: switched once
        hv.Store.set_current_backend("matplotlib")
    return save_static(figures[index], directory)


def save_static(figure: Figure, directory: Path) -> list[str]:
    """The figure as PNG (150 dpi) and SVG, drawn once by matplotlib (directly: commlens.report.static;
    through HoloViews' renderer where it has an element that does not know) and written in each format."""
    from commlens.report.static import NoDirectDrawing, draw

    directory.mkdir(parents=True, exist_ok=True)
    built = build_with("matplotlib", figure)
    try:
        drawn = draw(built)
    except NoDirectDrawing:
        drawn = hv.render(built, backend="matplotlib")
    paths = []
    for fmt in STATIC_FORMATS:
        path = directory / f"{figure.name}.{fmt}"
        with replacing(path) as tmp:   # whole or not at all (a full disk)
            drawn.savefig(tmp, format=fmt, dpi=STATIC_DPI, bbox_inches="tight")
        paths.append(path.name)
    plt.close(drawn)
    return paths
