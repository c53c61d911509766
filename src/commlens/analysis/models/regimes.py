"""Regimes of one curve: the first regime's latency, the last regime's bandwidth, where each new
regime starts, and whether a single Hockney line describes the whole curve within its noise."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from commlens.analysis.constants import MEDIAN_EFFICIENCY
from commlens.analysis.models.bootstrap import bootstrap_medians, percentile_interval
from commlens.analysis.models.curves import Curve, reduce_curve
from commlens.analysis.models.hockney import HockneyFit, fit_hockney_to_curve, t_interval
from commlens.analysis.models.lines import inverse_slope, weighted_line
from commlens.analysis.models.piecewise import fit_piecewise_to_curve

# A size's Hockney residual is beyond noise past this many standard errors of its median.
NOISE_Z = 3.0
# One Hockney line fits a curve where at most this fraction of its sizes lie beyond noise: a spike
# or two (anomalies() reports them) must not condemn it, while a regime it misses leaves many more.
MISFIT_FRACTION = 0.1


def median_noise(curve: Curve) -> np.ndarray:
    """Relative standard error of each size's median (curve.median_s), from the data's own spread.

    Within launches, the samples' robust spread (curve.median_rel_se); between launches, the
    spread of the launches' medians (MEDIAN_EFFICIENCY sd / sqrt(launches), since their median is
    what is fitted). The larger of the two: with two or three launches the spread between them
    can come out small by chance, and one launch shows none.
    """
    launches = np.isfinite(curve.launch_median_s).sum(axis=1)
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.filterwarnings("ignore", message="Degrees of freedom", category=RuntimeWarning)
        spread = np.nanstd(curve.launch_median_s, axis=1, ddof=1)
        between = np.where(launches >= 2, MEDIAN_EFFICIENCY * spread / np.sqrt(launches) / curve.median_s, 0.0)
    return np.fmax(curve.median_rel_se, between)


@dataclass(frozen=True)
class RegimeFit:
    """What a table of one curve's parameters can truthfully say: the first regime's latency, the
    last regime's asymptotic bandwidth and each size where a new regime starts (from fit_piecewise),
    and whether one Hockney line describes the whole curve.

    On a curve with protocol switches a single line is pulled between regimes and gives a latency
    and a bandwidth that no regime has (e.g. 9.1 us where the 1 B point is 6.2 us). Its relative
    residual at each size is held against that size's noise (median_noise: the standard error of
    its median, from the spread of its samples and launches): `beyond_noise` sizes are off by more
    than NOISE_Z of them, and `hockney_fits` where at most MISFIT_FRACTION of the sizes are.

    Intervals at `confidence`: with several launches, t intervals over the launches' own fits, each
    launch segmented afresh (where its switches fall varies with it); with one, a percentile bootstrap
    over its samples with the segmentation held as found (NaN with a single value per size: nothing to
    resample). A switch is at the first size of its regime; its interval (low, high] holds the places
    the data allow it (commlens.analysis.models.segmentation.breakpoint_intervals).
    """

    latency_s: float
    latency_interval_s: tuple[float, float]
    bandwidth_Bps: float
    bandwidth_interval_Bps: tuple[float, float]
    switches_bytes: tuple[int, ...]
    switch_intervals_bytes: tuple[tuple[int, int], ...]
    hockney: HockneyFit
    hockney_fits: bool
    beyond_noise: int
    median_noise_rel: float      # the median over sizes of median_noise
    n_sizes: int
    confidence: float

    @property
    def n_regimes(self) -> int:
        return len(self.switches_bytes) + 1

    def variables(self) -> dict:
        out = {
            "latency_s": ((), self.latency_s),
            "latency_interval_s": (("bound",), np.array(self.latency_interval_s)),
            "bandwidth_Bps": ((), self.bandwidth_Bps),
            "bandwidth_interval_Bps": (("bound",), np.array(self.bandwidth_interval_Bps)),
            "n_regimes": ((), self.n_regimes),
            "switch_bytes": (("switch",), np.array(self.switches_bytes, dtype=float)),
            "switch_interval_bytes": (("switch", "bound"),
                                      np.array(self.switch_intervals_bytes, dtype=float).reshape(-1, 2)),
            "hockney_fits": ((), float(self.hockney_fits)),
            "beyond_noise": ((), self.beyond_noise),
            "median_noise_rel": ((), self.median_noise_rel),
            "n_sizes": ((), self.n_sizes),
        }
        out.update({f"hockney_{name}": value for name, value in self.hockney.variables().items()
                    if name != "n_sizes"})
        return out


def _run_lines(x, y, w, run) -> tuple[np.ndarray, np.ndarray]:
    """(intercepts, slopes) of one run's weighted line through each row of y (bootstrap medians); a
    size a replicate left without data drops out of that replicate."""
    first, last = run
    y = y[..., first:last + 1]
    w = np.where(np.isfinite(y), w[first:last + 1], 0.0)
    a, b, _ = weighted_line(x[first:last + 1], np.where(np.isfinite(y), y, 0.0), w)
    return a, b


def _launch_regimes(curve: Curve, max_segments: int, min_segment_sizes: int):
    """Each launch's first regime's latency and last regime's bandwidth, its own segmentation found (so
    that where the switches fall varies with the launches, as it does); None below two launches with
    enough sizes."""
    launches = [launch for launch in range(curve.n_launches)
                if np.isfinite(curve.launch_median_s[:, launch]).sum() >= max(min_segment_sizes, 3)]
    if len(launches) < 2:
        return None
    latencies, bandwidths = [], []
    for launch in launches:
        measured = np.isfinite(curve.launch_median_s[:, launch])
        own = reduce_curve(curve.sizes[measured], curve.launch_median_s[measured, launch])
        pieces, _ = fit_piecewise_to_curve(own, max_segments, min_segment_sizes)
        latencies.append(pieces.segments[0].latency_s)
        bandwidths.append(pieces.segments[-1].bandwidth_Bps)
    return np.array(latencies), np.array(bandwidths)


def fit_regimes(sizes, times, confidence: float = 0.95, n_boot: int = 400, seed: int = 0,
                max_segments: int = 5, min_segment_sizes: int = 3, counts=None) -> RegimeFit:
    """Per-regime parameters of one curve and whether a single Hockney line fits it (see RegimeFit)."""
    curve = reduce_curve(sizes, times, counts)
    hockney = fit_hockney_to_curve(curve, confidence, n_boot, seed)
    pieces, segmentation = fit_piecewise_to_curve(curve, max_segments, min_segment_sizes)
    x, y = curve.sizes.astype(float), curve.median_s
    noise = median_noise(curve)
    off = np.abs(y / hockney.predict(x) - 1)
    beyond = int(np.sum(off > NOISE_Z * noise))
    runs = segmentation.best_bounds
    latency_interval = bandwidth_interval = (np.nan, np.nan)
    per_launch = _launch_regimes(curve, max_segments, min_segment_sizes)
    if per_launch is not None:
        latencies, bandwidths = per_launch
        latency_interval = t_interval(latencies, confidence, pieces.segments[0].latency_s)
        bandwidth_interval = t_interval(bandwidths, confidence, pieces.segments[-1].bandwidth_Bps)
    elif curve.sample_counts.max() > 1:
        medians = bootstrap_medians(curve, n_boot, np.random.default_rng(seed))
        latency_interval = percentile_interval(_run_lines(x, medians, segmentation.weights, runs[0])[0], confidence)
        low, high = percentile_interval(_run_lines(x, medians, segmentation.weights, runs[-1])[1], confidence)
        bandwidth_interval = (float(inverse_slope(np.array(high))), float(inverse_slope(np.array(low))))
    return RegimeFit(latency_s=pieces.segments[0].latency_s, latency_interval_s=latency_interval,
                     bandwidth_Bps=pieces.segments[-1].bandwidth_Bps, bandwidth_interval_Bps=bandwidth_interval,
                     switches_bytes=pieces.breakpoints_bytes, switch_intervals_bytes=pieces.breakpoint_intervals_bytes,
                     hockney=hockney, hockney_fits=beyond <= MISFIT_FRACTION * x.size, beyond_noise=beyond,
                     median_noise_rel=float(np.nanmedian(noise)), n_sizes=int(x.size), confidence=confidence)
