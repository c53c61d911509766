"""Packet steps: a regular step wherever a message needs one packet more, found by the packet
model's search and confirmed boundary by boundary."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from commlens.analysis.constants import MEDIAN_EFFICIENCY

from commlens.analysis.models import best_packets, equivalent_payloads, runs_design, smallest_header

# Residual variance (in noise variances) above which line plus step does not explain a window.
STEP_MISFIT = 4.0
# Many small steps (PacketSteps.confirmed): over this many boundaries at least, the typical one this many
# of its standard errors and this share of them going up. Real links at 50 Mbit/s here step 1-8 noise widths
# at each of eight boundaries to 8 KiB (MTU 1000); the few-plain-steps reading alone asked the typical one for
# 3 and missed them. Pooled over windows of four sizes, small steps were found on step-free curves (1 of 30
# with a host that changed speed part-way through launches: a period of 8.2 sizes of a 2 KiB grid).
MANY_BOUNDARIES = 6
SIZES_PER_PERIOD = 6
TYPICAL_STEP = 1.5
RISING = 0.75


@dataclass(frozen=True)
class PacketSteps:
    """Steps at one payload and header: the height of each step and its significance."""

    payload: int
    header: int
    payload_interval: tuple[int, int]
    heights_s: np.ndarray        # step height at each packet boundary with enough sizes on both sides
    z: np.ndarray                # each height in its standard errors
    sizes_per_period: float = 0.0   # the grid's sizes in one period (its typical spacing into the payload)

    @property
    def typical_z(self) -> float:
        """The lower median of the steps' significance: most steps must be there, not a few."""
        return float(np.sort(self.z)[(self.z.size - 1) // 2])

    @property
    def robust_score(self) -> float:
        """The typical step's significance carried over every boundary: what a few large steps show."""
        return self.typical_z * np.sqrt(self.z.size) / MEDIAN_EFFICIENCY

    @property
    def pooled_score(self) -> float:
        """The steps' pooled significance (Stouffer's: their z summed over the root of their number): steps
        of two or three noise widths each, repeated at many boundaries, add up to what no single one shows."""
        return float(self.z.sum() / np.sqrt(self.z.size))

    def confirmed(self, threshold: float) -> bool:
        """Steps at most boundaries, by either reading: the typical step half the threshold and the robust
        score the threshold (a few plain steps); or, over MANY_BOUNDARIES boundaries at least, each window
        of SIZES_PER_PERIOD sizes or more, the pooled score the threshold with the typical step
        TYPICAL_STEP and RISING of them going up (many small steps)."""
        few_plain = self.typical_z >= threshold / 2 and self.robust_score >= threshold
        many_small = (self.z.size >= MANY_BOUNDARIES and self.sizes_per_period >= SIZES_PER_PERIOD
                      and self.pooled_score >= threshold and self.typical_z >= TYPICAL_STEP
                      and self.rising >= RISING)
        return few_plain or many_small

    @property
    def score(self) -> float:
        return max(self.robust_score, self.pooled_score if self.z.size >= MANY_BOUNDARIES else 0.0)

    @property
    def rising(self) -> float:
        """The share of the boundaries where the time steps up."""
        return float(np.mean(self.z > 0))


def _local_steps(x, y, sigma, payload, header) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The step at every boundary k * payload - header, each from the sizes within half a payload of it.

    Each window gets its own line plus a step, so a protocol switch elsewhere, or
    a slow trend, cannot pass for a step here; windows with fewer than two sizes
    on either side are skipped. Returns each window's step height, its
    significance, and how well line plus step explains the window (residual sum of
    squares per degree of freedom, in noise variances: about 1 for a real step).
    """
    boundary = np.rint((x + header) / payload)
    u = (x + header - boundary * payload) / payload
    after = (u > 0).astype(float)              # a size exactly at the boundary still fits in k packets
    valid = boundary >= 1
    window = boundary[valid].astype(np.int64)
    w, yv = 1 / sigma[valid] ** 2, y[valid]
    design = np.stack([np.ones(window.size), u[valid], after[valid]], axis=1)
    n_windows = int(window.max()) + 1 if window.size else 0
    gram = np.zeros((n_windows, 3, 3))
    rhs = np.zeros((n_windows, 3))
    for i in range(3):
        rhs[:, i] = np.bincount(window, w * design[:, i] * yv, minlength=n_windows)
        for j in range(3):
            gram[:, i, j] = np.bincount(window, w * design[:, i] * design[:, j], minlength=n_windows)
    n_after = np.bincount(window, after[valid], minlength=n_windows)
    n_before = np.bincount(window, 1 - after[valid], minlength=n_windows)
    usable = (n_after >= 2) & (n_before >= 2)
    if not usable.any():
        return np.array([]), np.array([]), np.array([])
    covariance = np.linalg.inv(gram[usable])
    beta = np.einsum("kij,kj->ki", covariance, rhs[usable])
    sum_sq = np.bincount(window, w * yv * yv, minlength=n_windows)[usable]
    dof = np.maximum(n_after + n_before - 3, 1)[usable]
    misfit = np.maximum(sum_sq - np.einsum("ki,ki->k", beta, rhs[usable]), 0) / dof
    return beta[:, 2], beta[:, 2] / np.sqrt(covariance[:, 2, 2]), misfit


def packet_steps(x, y, sigma, baselines, threshold) -> PacketSteps | None:
    """Steps at a regular payload: the best packet model over each of `baselines`, confirmed
    boundary by boundary; the best confirmed one.

    Two baselines are tried because each fails where the other does not: one line
    for the whole curve is pulled off by a protocol switch, a line per segment of a
    first fit has already spent its segments on the steps when they are large.
    The evidence must pass `threshold` at most boundaries (PacketSteps.confirmed), so a single
    jump or a spike cannot make a staircase out of boundaries that have none; and line plus
    step must explain the typical window about as well as the noise allows.
    """
    confirmed = []
    for baseline in baselines:
        found = best_packets(x, y, 1 / sigma ** 2, baseline)
        if found is None:
            continue
        low, high = equivalent_payloads(x, *found)
        payload = (low + high) // 2
        header = smallest_header(x, *found, payload)
        heights, z, misfit = _local_steps(x, y, sigma, payload, header)
        if z.size < 3:
            continue
        steps = PacketSteps(payload, header, (low, high), heights, z, payload / float(np.median(np.diff(x))))
        # A step holds its level until the next one; a slow size every period (alignment)
        # makes "steps" too, but a line and a step cannot follow it back down. Most boundaries must step
        # up, the typical one by a noise width or more: one large jump among flat boundaries is no staircase.
        if steps.confirmed(threshold) and np.median(misfit) <= STEP_MISFIT:
            confirmed.append(steps)
    return max(confirmed, key=lambda steps: steps.score, default=None)


def packet_steps_at(x, y, sigma, payload: int, header: int) -> PacketSteps | None:
    """The steps at a given payload and header (no search): None where fewer than three boundaries have
    sizes enough either side."""
    heights, z, _ = _local_steps(x, y, sigma, payload, header)
    return (PacketSteps(payload, header, (payload, payload), heights, z, payload / float(np.median(np.diff(x))))
            if z.size >= 3 else None)


def packet_row(x, steps: PacketSteps, height_s: float) -> dict:
    """The findings table's row of the steps: where the first one is, its height and the payloads."""
    low, high = steps.payload_interval
    first_boundary = (np.ceil((x[0] + steps.header) / steps.payload)) * steps.payload - steps.header
    first = np.searchsorted(x, first_boundary, side="right")
    return {"kind": "packet_steps", "size": x[first], "size_low": x[first - 1] if first else np.nan,
            "size_high": x[first], "magnitude": height_s, "score": steps.score,
            "period": float(steps.payload), "period_low": float(low), "period_high": float(high),
            "header": float(steps.header)}


def step_height(x, y, w, runs, packets) -> float:
    """Height of one packet step, fitted together with a line per segment (weighted least squares)."""
    design = np.column_stack([runs_design(x, runs), packets]) * np.sqrt(w)[:, None]
    return float(np.linalg.lstsq(design, y * np.sqrt(w), rcond=None)[0][-1])
