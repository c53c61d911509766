"""The Hockney model of one curve: T = latency + size / bandwidth, with bootstrap intervals."""

from __future__ import annotations

from dataclasses import dataclass

from typing import Any

import numpy as np
from scipy import stats

from commlens.analysis.models.bootstrap import bootstrap_medians, percentile_interval
from commlens.analysis.models.curves import Curve, reduce_curve
from commlens.analysis.models.lines import inverse_slope, relative_line, relative_residuals


@dataclass(frozen=True)
class HockneyFit:
    """T = latency + size / bandwidth, fitted to per-size medians with relative-error weights.

    Intervals at `confidence`: with several launches, the t interval over the launches' own fits (the launch
    is the experimental unit: its placement, binding and neighbours move every size alike); with one, a
    percentile bootstrap over its samples (within one launch), or over the sizes where each point is a
    single value. `resampled` says which: "launches", "samples" or "sizes".
    """

    latency_s: float
    bandwidth_Bps: float
    n_half_bytes: float          # size reaching half the asymptotic bandwidth: latency * bandwidth
    latency_interval_s: tuple[float, float]
    bandwidth_interval_Bps: tuple[float, float]
    n_half_interval_bytes: tuple[float, float]
    max_rel_residual: float
    median_rel_residual: float
    n_sizes: int
    confidence: float
    resampled: str

    def predict(self, sizes) -> np.ndarray:
        return self.latency_s + np.asarray(sizes, float) / self.bandwidth_Bps

    def variables(self) -> dict:
        scalars = ("latency_s", "bandwidth_Bps", "n_half_bytes", "max_rel_residual",
                   "median_rel_residual", "n_sizes")
        intervals = ("latency_interval_s", "bandwidth_interval_Bps", "n_half_interval_bytes")
        out: dict[str, tuple[tuple[str, ...], Any]] = {name: ((), getattr(self, name)) for name in scalars}
        out.update({name: (("bound",), np.array(getattr(self, name))) for name in intervals})
        return out


def fit_hockney(sizes, times, confidence: float = 0.95, n_boot: int = 400, seed: int = 0,
                counts=None) -> HockneyFit:
    """Latency and bandwidth of T = latency + size / bandwidth, with intervals (see HockneyFit).

    With a launch axis each launch is fitted on its own and the intervals are t intervals over those
    fits, on the log scale (latency and bandwidth are positive, launch effects multiplicative): a
    bootstrap that resampled three launches was too narrow (its intervals held the true latency 82% of
    the time with 3 launches, 92% with 5; benchmarks/ground_truth.py measures these).
    """
    return fit_hockney_to_curve(reduce_curve(sizes, times, counts), confidence, n_boot, seed)


def t_interval(values: np.ndarray, confidence: float, centre: float) -> tuple[float, float]:
    """The t interval over launches of a positive quantity (one value per launch), on the log scale,
    around `centre` (the fit of the launches pooled): centre times exp(-+ t sd / sqrt(n)). NaN where a
    launch's value is not positive (a flat or falling line has no bandwidth)."""
    values = np.asarray(values, float)
    if not (np.all(values > 0) and centre > 0):
        return (np.nan, np.nan)
    logs = np.log(values)
    half = stats.t.ppf(0.5 + confidence / 2, logs.size - 1) * logs.std(ddof=1) / np.sqrt(logs.size)
    return float(centre * np.exp(-half)), float(centre * np.exp(half))


def fit_hockney_to_curve(curve: Curve, confidence: float, n_boot: int, seed: int) -> HockneyFit:
    """fit_hockney of a curve already reduced (fit_regimes fits it beside the piecewise model)."""
    if curve.sizes.size < 3:
        raise ValueError(f"fit_hockney needs at least 3 sizes with data, got {curve.sizes.size}")
    x, y = curve.sizes.astype(float), curve.median_s
    a, b = relative_line(x, y[None])
    a, b = float(a[0]), float(b[0])

    rng = np.random.default_rng(seed)
    launches: np.ndarray | list[int] = (np.flatnonzero(np.isfinite(curve.launch_median_s).sum(axis=0) >= 3)
                                        if curve.n_launches > 1 else [])
    if len(launches) >= 2:
        a_each, b_each = relative_line(x, curve.launch_median_s[:, launches].T)
        max_rel, median_rel = relative_residuals(y, a + b * x)
        return HockneyFit(latency_s=a, bandwidth_Bps=float(inverse_slope(np.array(b))),
                          n_half_bytes=a * float(inverse_slope(np.array(b))),
                          latency_interval_s=t_interval(a_each, confidence, a),
                          bandwidth_interval_Bps=tuple(sorted(1 / np.array(t_interval(b_each, confidence, b)))),
                          n_half_interval_bytes=t_interval(a_each / b_each, confidence, a / b),
                          max_rel_residual=max_rel, median_rel_residual=median_rel, n_sizes=int(x.size),
                          confidence=confidence, resampled="launches")
    if curve.sample_counts.max() > 1 or curve.n_launches > 1:
        resampled = "samples"
        a_boot, b_boot = relative_line(x, bootstrap_medians(curve, n_boot, rng))
    else:
        resampled = "sizes"
        picks = rng.integers(0, x.size, size=(n_boot, x.size))
        multiplicity = np.stack([np.bincount(p, minlength=x.size) for p in picks]).astype(float)
        a_boot, b_boot = relative_line(x, np.broadcast_to(y, multiplicity.shape), multiplicity)

    b_low, b_high = percentile_interval(b_boot, confidence)
    bandwidth = float(inverse_slope(np.array(b)))
    n_half_boot = a_boot * inverse_slope(b_boot)
    max_rel, median_rel = relative_residuals(y, a + b * x)
    return HockneyFit(latency_s=a, bandwidth_Bps=bandwidth, n_half_bytes=a * bandwidth,
                      latency_interval_s=percentile_interval(a_boot, confidence),
                      bandwidth_interval_Bps=(float(inverse_slope(np.array(b_high))),
                                              float(inverse_slope(np.array(b_low)))),
                      n_half_interval_bytes=percentile_interval(n_half_boot, confidence),
                      max_rel_residual=max_rel, median_rel_residual=median_rel,
                      n_sizes=int(x.size), confidence=confidence, resampled=resampled)
