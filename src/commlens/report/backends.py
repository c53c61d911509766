"""HoloViews' plotting backends for the report's figures: Bokeh for the interactive pages,
matplotlib for the static copies; a figure is built once per backend."""

from __future__ import annotations

import contextlib
import importlib

import holoviews as hv

from commlens.report.elements import Figure


def load_backend(backend: str) -> None:
    """HoloViews' plotting for `backend`, registered without hv.extension's notebook output (which a
    forked drawing process must not send: the kernel's channels belong to its parent)."""
    if backend not in hv.Store.renderers:
        importlib.import_module({"bokeh": "holoviews.plotting.bokeh", "matplotlib": "holoviews.plotting.mpl"}[backend])


@contextlib.contextmanager
def current_backend(backend: str):
    """HoloViews' current backend is `backend` in the block (hvPlot styles follow it). Switched only
    where it differs, and once for many figures: a switch runs all of HoloViews' switch hooks (about
    40 ms here, twice a figure when each figure switched there and back)."""
    load_backend(backend)
    previous = hv.Store.current_backend
    if previous == backend:
        yield
        return
    hv.Store.set_current_backend(backend)
    try:
        yield
    finally:
        hv.Store.set_current_backend(previous)


def build_with(backend: str, figure: Figure):
    """The figure's HoloViews object with `backend`'s options (hvPlot styles for the current one)."""
    with current_backend(backend):
        return figure.build()
