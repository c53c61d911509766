"""Latency-bandwidth models of one curve: time against message size.

Every fit takes `sizes` in bytes (1-D) and `times` in seconds shaped (n_sizes,),
(n_sizes, n_samples) or (n_sizes, n_launches, n_samples), NaN where absent; sizes
without any data are dropped. It fits the per-size median (with a launch axis, the
median of the launches' medians), so the heavy tail of benchmark samples
(preemption, interrupts) cannot move it. Residuals are weighted as relative errors:
a 0.1 us error at 2 us counts as much as a 0.1 ms error at 2 ms, which keeps the
small sizes, where the latency is decided, from being drowned by the large ones.

Results are small frozen dataclasses whose attribute names carry their units;
`variables()` lays them out as (dims, values) pairs for an xarray Dataset, which is
how `ds.commlens.fit(model)` stacks them over a whole campaign.

One module per model (hockney, piecewise, regimes, packets), on what they share: curves (a
curve reduced to its per-size medians), lines (weighted and relative-error lines), bootstrap
(resampled medians) and segmentation (segmented least squares). FITS names every fit.
"""

from collections.abc import Callable
from typing import Any

from commlens.analysis.models.curves import MEDIAN_EFFICIENCY, Curve, quiet_nanmedian, reduce_curve, robust_sd
from commlens.analysis.models.hockney import HockneyFit, fit_hockney
from commlens.analysis.models.lines import line_design, runs_design, weighted_line
from commlens.analysis.models.packets import (PacketFit, best_packets, equivalent_payloads, fit_packet, packet_counts,
                                               smallest_header)
from commlens.analysis.models.piecewise import PiecewiseFit, Segment, fit_piecewise
from commlens.analysis.models.regimes import MISFIT_FRACTION, NOISE_Z, RegimeFit, fit_regimes, median_noise
from commlens.analysis.models.segmentation import Segmentation, predict_segments, segment_curve, segment_lines

FITS: dict[str, Callable[..., Any]] = {"hockney": fit_hockney, "piecewise": fit_piecewise, "packet": fit_packet,
                                       "regimes": fit_regimes}

__all__ = [
    "FITS", "fit_hockney", "fit_piecewise", "fit_packet", "fit_regimes",
    "HockneyFit", "PiecewiseFit", "Segment", "PacketFit", "RegimeFit",
    "Curve", "reduce_curve", "quiet_nanmedian", "robust_sd", "MEDIAN_EFFICIENCY",
    "median_noise", "NOISE_Z", "MISFIT_FRACTION",
    "Segmentation", "segment_curve", "segment_lines", "predict_segments",
    "weighted_line", "line_design", "runs_design",
    "packet_counts", "best_packets", "equivalent_payloads", "smallest_header",
]
