"""The Hockney model of one curve: T = latency + size / bandwidth, with bootstrap intervals."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from commlens.analysis.models.bootstrap import bootstrap_medians, percentile_interval
from commlens.analysis.models.curves import Curve, reduce_curve
from commlens.analysis.models.lines import inverse_slope, relative_line, relative_residuals


@dataclass(frozen=True)
class HockneyFit:
    """T = latency + size / bandwidth, fitted to per-size medians with relative-error weights.

    Intervals are percentile bootstrap intervals at `confidence`; `resampled` says
    what was resampled: "launches and samples", "samples", or "sizes" (when each
    point is a single value, the sizes themselves).
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
        out = {name: ((), getattr(self, name)) for name in scalars}
        out.update({name: (("bound",), np.array(getattr(self, name))) for name in intervals})
        return out


def fit_hockney(sizes, times, confidence: float = 0.95, n_boot: int = 400, seed: int = 0,
                counts=None) -> HockneyFit:
    """Latency and bandwidth of T = latency + size / bandwidth, with bootstrap intervals.

    With a launch axis, launches are resampled as well as samples, because the
    variation between launches is often larger than within one. A bootstrap over
    very few launches is too narrow: on synthetic curves whose launches shift by
    0.3%, 95% intervals held the true latency 82% of the time with 3 launches and
    92% with 5 (with no launch shifts, all the time).
    """
    return fit_hockney_to_curve(reduce_curve(sizes, times, counts), confidence, n_boot, seed)


def fit_hockney_to_curve(curve: Curve, confidence: float, n_boot: int, seed: int) -> HockneyFit:
    """fit_hockney of a curve already reduced (fit_regimes fits it beside the piecewise model)."""
    if curve.sizes.size < 3:
        raise ValueError(f"fit_hockney needs at least 3 sizes with data, got {curve.sizes.size}")
    x, y = curve.sizes.astype(float), curve.median_s
    a, b = relative_line(x, y[None])
    a, b = float(a[0]), float(b[0])

    rng = np.random.default_rng(seed)
    if curve.sample_counts.max() > 1 or curve.n_launches > 1:
        resampled = "launches and samples" if curve.n_launches > 1 else "samples"
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
