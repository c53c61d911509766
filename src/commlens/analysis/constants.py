"""Statistical constants the analysis shares, each computed from its definition and written once."""

from __future__ import annotations

import math
from statistics import NormalDist


def normal_quantile(confidence: float) -> float:
    """The standard normal quantile of a two-sided interval at `confidence` (1.96 at 0.95)."""
    return NormalDist().inv_cdf(0.5 + confidence / 2)


# Two-sided 95% quantile of the standard normal distribution (1.959964).
Z_95 = normal_quantile(0.95)
# A median absolute deviation times this estimates a Gaussian standard deviation (1.4826).
MAD_TO_SD = 1 / NormalDist().inv_cdf(0.75)
# Standard error of a median over that of a mean, for Gaussian data (sqrt(pi/2) = 1.2533).
MEDIAN_EFFICIENCY = math.sqrt(math.pi / 2)
