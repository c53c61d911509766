"""Straight lines through a curve's points: weighted least squares, the relative-error line the
models fit, and the design columns of one line or of one line per run of sizes."""

from __future__ import annotations

import numpy as np


def weighted_line(x, y, w):
    """Weighted least-squares line y = a + b x; vectorised over the leading dims of y and w.

    Returns (a, b, rss), rss being the weighted residual sum of squares.
    """
    x, y, w = np.asarray(x, float), np.asarray(y, float), np.asarray(w, float)
    sw = w.sum(axis=-1)
    x_mean = (w * x).sum(axis=-1) / sw
    y_mean = (w * y).sum(axis=-1) / sw
    dx = x - x_mean[..., None]
    dy = y - y_mean[..., None]
    sxx = (w * dx * dx).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        b = np.where(sxx > 0, (w * dx * dy).sum(axis=-1) / sxx, 0.0)
    a = y_mean - b * x_mean
    rss = (w * (dy - b[..., None] * dx) ** 2).sum(axis=-1)
    return a, b, rss


def relative_line(x, y, multiplicity=None, iterations=3):
    """Line through (x, y) minimising relative errors: weights 1/fitted^2, refined a few times.

    Weighting by the data itself (1/y^2) would favour points that happen to be high;
    re-weighting by the fitted value removes that bias after a couple of rounds.
    """
    m = 1.0 if multiplicity is None else multiplicity
    # A size a resample happened to leave without data (all its launches missed it) drops out.
    m = np.where(np.isfinite(y), m, 0.0)
    y = np.where(np.isfinite(y), y, 1.0)
    w = m / y ** 2
    for _ in range(iterations):
        a, b, _ = weighted_line(x, y, w)
        fitted = a[..., None] + b[..., None] * x
        w = m / np.where(fitted > 0, fitted, y) ** 2
    return a, b


def relative_residuals(y, fitted) -> tuple[float, float]:
    """The largest and the median relative residual |y / fitted - 1| over the points."""
    rel = np.abs(y / fitted - 1)
    return float(np.max(rel)), float(np.median(rel))


def inverse_slope(b):
    """Bandwidth from a slope in s/B: a flat or falling line has no finite bandwidth."""
    with np.errstate(divide="ignore"):
        return np.where(b > 0, 1.0 / np.where(b > 0, b, 1.0), np.inf)


def line_design(x) -> np.ndarray:
    """Columns of one straight line over all sizes (intercept, scaled size)."""
    x = np.asarray(x, float)
    return np.stack([np.ones(x.size), x / x[-1]], axis=1)


def runs_design(x, runs) -> np.ndarray:
    """Columns of one straight line per run of sizes: each segment its own intercept and slope."""
    x = np.asarray(x, float)
    design = np.zeros((x.size, 2 * len(runs)))
    for k, (first, last) in enumerate(runs):
        design[first:last + 1, 2 * k] = 1
        design[first:last + 1, 2 * k + 1] = x[first:last + 1] / x[-1]
    return design
