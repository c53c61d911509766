"""The packet model of one curve: a step wherever a message needs one packet more, on top of an
alpha-beta line; the payload and header found by a global search over integers."""

from __future__ import annotations

from dataclasses import dataclass

from typing import Any

import numpy as np

from commlens.analysis.constants import MAD_TO_SD, MEDIAN_EFFICIENCY

from commlens.analysis.models.curves import reduce_curve
from commlens.analysis.models.lines import inverse_slope, line_design, relative_residuals


def _robust_relative_sd(values: np.ndarray) -> float:
    values = values[np.isfinite(values)]
    return float(MAD_TO_SD * np.median(np.abs(values - np.median(values)))) if values.size else np.nan


def packet_counts(sizes, payload, header=0) -> np.ndarray:
    """Packets a message needs when `header` bytes of protocol ride in it: ceil((size + header) / payload)."""
    return np.ceil((np.asarray(sizes, float) + header) / payload)


@dataclass(frozen=True)
class PacketFit:
    """T = latency + (size + overhead * ceil((size + header) / payload)) / bandwidth.

    `header_bytes` is what the protocol above adds to every message inside the
    packets (an MPI library's match header over TCP): it moves the steps to
    k * payload - header without changing their period. Every payload in
    `payload_interval_bytes` can give every measured size the same packet count
    (with some header), so on these sizes they fit equally well; `payload_bytes` is
    the middle of that interval. A dense grid over many packets narrows it to one.
    """

    latency_s: float
    bandwidth_Bps: float
    payload_bytes: int
    payload_interval_bytes: tuple[int, int]
    header_bytes: int
    overhead_bytes: float        # per packet, at the bandwidth
    step_s: float                # the time one more packet adds: overhead / bandwidth
    max_rel_residual: float
    median_rel_residual: float
    n_sizes: int

    def predict(self, sizes) -> np.ndarray:
        sizes = np.asarray(sizes, float)
        return (self.latency_s + sizes / self.bandwidth_Bps
                + self.step_s * packet_counts(sizes, self.payload_bytes, self.header_bytes))

    def variables(self) -> dict:
        scalars = ("latency_s", "bandwidth_Bps", "payload_bytes", "header_bytes", "overhead_bytes", "step_s",
                   "max_rel_residual", "median_rel_residual", "n_sizes")
        out: dict[str, tuple[tuple[str, ...], Any]] = {name: ((), getattr(self, name)) for name in scalars}
        out["payload_interval_bytes"] = (("bound",), np.array(self.payload_interval_bytes))
        return out


def payload_candidates(sizes, max_candidates: int = 2000) -> np.ndarray:
    """Integer payloads worth trying: two sizes on either side of every boundary within half a
    payload (four size-steps a packet), and at least three packet boundaries.

    Every integer when there are few enough; otherwise a geometric grid fine
    enough that, across the whole size range, a neighbouring candidate moves no
    packet boundary by more than about one grid step (refined to integers later).
    """
    sizes = np.asarray(sizes, float)
    step = np.median(np.diff(sizes)) if sizes.size > 1 else 1.0
    low = max(4.0, 4 * step)
    high = (sizes[-1] - sizes[0]) / 3
    if high < low:
        return np.array([], dtype=np.int64)
    if high - low + 1 <= max_candidates:
        return np.arange(int(np.ceil(low)), int(high) + 1)
    relative = max(step / sizes[-1], np.log(high / low) / max_candidates)
    return np.unique(np.rint(np.exp(np.arange(np.log(low), np.log(high), relative))).astype(np.int64))


def _packet_rss(x, y, w, payloads, headers, baseline=None, chunk: int = 1024):
    """Weighted RSS, and step height c, of y = baseline + c * packet_counts(x, P, h) for every (P, h).

    `baseline` holds the columns of the rest of the model (default: one line).
    Both y and the packet counts are first projected off the baseline, so for each
    pair only one coefficient is left to solve and no sum grows large enough to
    cancel (Frisch-Waugh-Lovell).
    """
    baseline = line_design(x) if baseline is None else baseline
    root_w = np.sqrt(w)
    basis, _ = np.linalg.qr(baseline * root_w[:, None])
    yw = y * root_w
    resid = yw - basis @ (basis.T @ yw)
    payloads, headers = np.asarray(payloads, float), np.asarray(headers, float)
    rss = np.empty(payloads.size)
    step = np.empty(payloads.size)
    for start in range(0, payloads.size, chunk):
        part = slice(start, start + chunk)
        counts = np.ceil((x[None, :] + headers[part, None]) / payloads[part, None]) * root_w
        counts -= (counts @ basis) @ basis.T
        norm = np.einsum("pn,pn->p", counts, counts)
        c = np.where(norm > 0, (counts @ resid) / np.where(norm > 0, norm, 1.0), 0.0)
        rss[part] = resid @ resid - c * c * norm
        step[part] = c
    return rss, step


def _best_pair(x, y, w, payloads, headers, baseline):
    rss, _ = _packet_rss(x, y, w, payloads, headers, baseline)
    best = int(np.argmin(rss))
    return int(payloads[best]), int(headers[best])


def _header_range(sizes, counts, payloads):
    """For each payload P, the headers h that give every size its count q: lowest < h <= highest,
    from (q - 1) P < size + h <= q P."""
    payloads = np.asarray(payloads, float)[:, None]
    lowest = np.max((counts[None, :] - 1) * payloads - sizes[None, :], axis=1)
    highest = np.min(counts[None, :] * payloads - sizes[None, :], axis=1)
    return lowest, highest


def equivalent_payloads(sizes, payload: int, header: int) -> tuple[int, int]:
    """The integer payloads that, with some header, give every size the packet count that
    (payload, header) gives: on these sizes nothing can tell them apart.

    They form one interval (the projection of a convex set of (payload, header)),
    whose ends are found by doubling steps and then bisection.
    """
    sizes = np.asarray(sizes, float)
    counts = packet_counts(sizes, payload, header)

    def feasible(trial: int) -> bool:
        lowest, highest = _header_range(sizes, counts, [trial])
        return trial >= 1 and bool(np.floor(highest[0]) > lowest[0])

    def edge(direction: int) -> int:
        inside, step = payload, 1
        while feasible(inside + direction * step):
            inside, step = inside + direction * step, 2 * step
        outside = inside + direction * step
        while abs(outside - inside) > 1:
            middle = (inside + outside) // 2
            inside, outside = (middle, outside) if feasible(middle) else (inside, middle)
        return inside

    return edge(-1), edge(+1)


def smallest_header(sizes, payload: int, header: int, other_payload: int) -> int:
    """The smallest header >= 0 with which `other_payload` counts packets as (payload, header) does,
    up to one packet more or less everywhere: of the headers the sizes cannot tell apart, the
    one that assumes the least protocol inside the packets."""
    sizes = np.asarray(sizes, float)
    lowest, highest = _header_range(sizes, packet_counts(sizes, payload, header), [other_payload])
    first, last = np.floor(lowest[0]) + 1, np.floor(highest[0])
    shift = np.ceil(-last / other_payload) * other_payload     # a whole packet: the same steps
    return int(max(0, first + shift))


def best_packets(x, y, w, baseline=None, max_candidates: int = 2000,
                 max_pairs: int = 8000) -> tuple[int, int] | None:
    """(payload, header) of the packet model with the smallest weighted RSS over `baseline`.

    A grid of payloads, each with the header at 0, 1/4, 1/2 and 3/4 of it (the
    header moves every step alike, so a coarse phase finds the payload's
    neighbourhood); then the integer payloads near the best with headers on a grid
    (about one size-step apart, coarser if that would exceed `max_pairs`); then
    the pairs within a few bytes of the best payload, zooming in on the header. None when the sizes cannot show
    three packet boundaries.
    """
    candidates = payload_candidates(x, max_candidates)
    if candidates.size == 0:
        return None
    phases = np.array([0, 0.25, 0.5, 0.75])
    payloads = np.repeat(candidates, phases.size)
    payload, header = _best_pair(x, y, w, payloads, np.floor(payloads * np.tile(phases, candidates.size)),
                                 baseline)
    spacing = int(np.max(np.diff(candidates))) if candidates.size > 1 else 1
    reach = max(spacing, int(np.ceil(0.02 * payload)), 2)
    near = np.unique(np.rint(np.linspace(max(candidates[0], payload - reach),
                                         min(candidates[-1], payload + reach), 129)).astype(np.int64))
    grid_step = max(1, int(np.median(np.diff(x))))
    header_step = max(grid_step, int(np.ceil(near.size * near.max() / max_pairs)))
    payloads = np.concatenate([np.full(len(range(0, p, header_step)), p) for p in near])
    headers = np.concatenate([np.arange(0, p, header_step) for p in near])
    payload, header = _best_pair(x, y, w, payloads, headers, baseline)
    # The header grid may have favoured a neighbouring payload: the pairs close by, the header
    # zoomed in to the byte (a boundary that falls on a size needs it).
    span = header_step
    while True:
        fine_step = max(1, span // 16)
        near_payloads, near_headers = np.meshgrid(np.arange(max(1, payload - 3), payload + 4),
                                                  np.arange(header - span, header + span + 1, fine_step))
        payload, header = _best_pair(x, y, w, near_payloads.ravel(), near_headers.ravel() % near_payloads.ravel(),
                                     baseline)
        if fine_step == 1:
            return payload, header
        span = fine_step


def fit_packet(sizes, times, max_candidates: int = 2000, counts=None, threshold: float = 6.0) -> PacketFit:
    """Packet payload, header, per-packet overhead, latency and bandwidth of the packet model.

    The payload is searched over integers (all of them, or a fine geometric grid
    refined to integers when the range is wide), with the header; for each pair
    the rest of the model is linear and solved exactly, so the search is global.
    A period is reported only where the curve steps at it as the anomaly detector asks of
    packet steps (PacketSteps.confirmed at `threshold`, the noise the packet model leaves):
    a straight line's best "payload" is noise (669 B, 414 B, 1571 B on three of them), and
    raises ValueError here. The payload interval holds every payload that gives each size the
    same packet count (equivalent_payloads): a dense grid can pin it to one byte.
    """
    curve = reduce_curve(sizes, times, counts)
    x, y = curve.sizes.astype(float), curve.median_s
    w = 1 / y ** 2
    found = best_packets(x, y, w, max_candidates=max_candidates) if x.size >= 6 else None
    if found is None:
        raise ValueError("fit_packet needs sizes spanning at least three packets of at least two sizes each")
    low, high = equivalent_payloads(x, *found)
    payload = (low + high) // 2
    header = smallest_header(x, *found, payload)
    counts = packet_counts(x, payload, header)
    design = np.stack([np.ones(x.size), x / x[-1], counts], axis=1)
    root_w = np.sqrt(w)
    a, b, c = np.linalg.lstsq(design * root_w[:, None], y * root_w, rcond=None)[0] / [1, x[-1], 1]
    fitted = a + b * x + c * counts
    sigma = np.maximum(_robust_relative_sd(y / fitted - 1), np.nan_to_num(curve.median_rel_se)) * y
    steps = packet_steps_at(x, y, sigma, payload, header)
    if steps is None or not steps.confirmed(threshold) or c <= 0:
        raise ValueError(f"no packet steps: the curve does not step at its best payload ({payload} B) beyond its "
                         f"noise at most boundaries")
    bandwidth = float(inverse_slope(np.array(b)))
    max_rel, median_rel = relative_residuals(y, a + b * x + c * counts)
    return PacketFit(latency_s=float(a), bandwidth_Bps=bandwidth, payload_bytes=payload,
                     payload_interval_bytes=(low, high), header_bytes=header,
                     overhead_bytes=float(c * bandwidth), step_s=float(c), max_rel_residual=max_rel,
                     median_rel_residual=median_rel, n_sizes=int(x.size))


# ----------------------------------------------------------------------------- the steps themselves

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


def local_steps(x, y, sigma, payload, header) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def packet_steps_at(x, y, sigma, payload: int, header: int) -> PacketSteps | None:
    """The steps at a given payload and header (no search): None where fewer than three boundaries have
    sizes enough either side."""
    heights, z, _ = local_steps(x, y, sigma, payload, header)
    return (PacketSteps(payload, header, (payload, payload), heights, z, payload / float(np.median(np.diff(x))))
            if z.size >= 3 else None)


