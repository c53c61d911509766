"""Anomalies of one curve: packet steps, protocol switches, alignment classes and spikes.

`detect(sizes, times)` takes what the models take (see commbench.models) and
returns one row per finding. Every decision is a significance test against the
curve's own noise, never an absolute threshold: the noise is the robust spread of
the per-size medians between sizes (see relative_noise), floored by the standard
error the samples themselves give, and every test scales up with whatever the
final model leaves unexplained. A finding needs `threshold` such standard
deviations (6 by default): with a few hundred tests per curve that keeps a clean
curve, even under heavy-tailed noise, free of findings.

The detectors run in the order in which each one's effect would confuse the next:
packet steps (regular, many), then protocol switches on the curve with the steps
taken out, then alignment classes and isolated spikes in what the structural model
leaves. An alignment class shows either way round: a few sizes slower, or (as on most
machines) every size slower but the aligned ones; a class found is levelled and the
structure fitted again, since a class's sizes at the end of a segment or among the
smallest sizes pull the first fit into switches and spikes of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from .models import (MEDIAN_EFFICIENCY, Curve, best_packets, equivalent_payloads, line_design,
                     packet_counts, predict_segments, quiet_nanmedian, reduce_curve, robust_sd, runs_design,
                     segment_curve, segment_lines, smallest_header, weighted_line)

COLUMNS = ("kind", "size", "size_low", "size_high", "magnitude", "score", "period", "period_low",
           "period_high", "modulus", "residue", "launches", "bandwidth_before_Bps", "bandwidth_after_Bps")
# Below this many sizes a curve has too little shape to call anything unusual.
MIN_SIZES = 6
# No clock or timer pins a median down better than this (relative); it keeps a
# noiseless curve from making every rounding error significant.
RELATIVE_NOISE_FLOOR = 1e-4
# Alignment is looked for modulo 4, 8, ... up to this.
MAX_MODULUS = 4096
MAX_ALIGNMENT_FINDINGS = 3
# Residual variance (in noise variances) above which line plus step does not explain a window.
STEP_MISFIT = 4.0
# Without a launch axis, a spike's samples must almost all lie on its side of the model.
SPIKE_SAMPLE_AGREEMENT = 0.9


def empty_table() -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype=object if name == "kind" else float) for name in COLUMNS})


def _table(rows: list[dict]) -> pd.DataFrame:
    if not rows:
        return empty_table()
    return pd.DataFrame([{name: row.get(name, np.nan) for name in COLUMNS} for row in rows],
                        columns=list(COLUMNS))


def tail_aware_spread(values) -> float:
    """Standard deviation judged by the MAD or by the central 95%, whichever is wider.

    Medians of a few heavy-tailed samples have heavier tails than a Gaussian; the
    central 95% then says more about the extremes a test has to survive.
    """
    values = np.asarray(values, float)
    low, high = np.percentile(values, [2.5, 97.5])
    return max(robust_sd(values), (high - low) / (2 * 1.96))


def relative_noise(curve: Curve, fit_s) -> np.ndarray:
    """Per size, the relative standard deviation of its median, as seen between sizes.

    Two estimates, each robust to what fools the other, and the smaller is kept:
    the spread of the medians around `fit_s` (a robust structural fit), which
    dense periodic effects (a slow size in every four) cannot inflate; and the
    spread of each median around the straight line through its two neighbours
    (exact for any alpha-beta curve, scaled by what the comparison adds), which a
    staircase the fit does not yet know of cannot inflate. Sizes whose own samples
    are noisier keep their own standard error. An underestimate is caught later:
    every test scales with how much the final model leaves (see detect).
    """
    x, y = curve.sizes.astype(float), curve.median_s
    left, right = x[1:-1] - x[:-2], x[2:] - x[1:-1]
    w_left, w_right = right / (left + right), left / (left + right)
    between = (y[1:-1] - (w_left * y[:-2] + w_right * y[2:])) / y[1:-1] / np.sqrt(1 + w_left ** 2 + w_right ** 2)
    around_fit = y / fit_s - 1
    level = max(min(robust_sd(between), robust_sd(around_fit)), RELATIVE_NOISE_FLOOR)
    own = np.nan_to_num(curve.median_rel_se, nan=0.0)
    return np.maximum(level, own)


# --------------------------------------------------------------------------- packet steps

@dataclass(frozen=True)
class _Steps:
    payload: int
    header: int
    payload_interval: tuple[int, int]
    heights_s: np.ndarray        # step height at each packet boundary with enough sizes on both sides
    z: np.ndarray                # each height in its standard errors

    @property
    def typical_z(self) -> float:
        """The lower median of the steps' significance: most steps must be there, not a few."""
        return float(np.sort(self.z)[(self.z.size - 1) // 2])

    @property
    def score(self) -> float:
        return self.typical_z * np.sqrt(self.z.size) / MEDIAN_EFFICIENCY


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


def _packet_steps(x, y, sigma, baselines, threshold) -> _Steps | None:
    """Steps at a regular payload: the best packet model over each of `baselines`, confirmed
    boundary by boundary; the best confirmed one.

    Two baselines are tried because each fails where the other does not: one line
    for the whole curve is pulled off by a protocol switch, a line per segment of a
    first fit has already spent its segments on the steps when they are large.
    The pooled evidence must pass `threshold`, and the typical single step (the
    lower median over boundaries) half of it, so a single jump or a spike cannot
    make a staircase out of boundaries that have none; and line plus step must
    explain the typical window about as well as the noise allows.
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
        steps = _Steps(payload, header, (low, high), heights, z)
        # A step holds its level until the next one; a slow size every period (alignment)
        # makes "steps" too, but a line and a step cannot follow it back down.
        if steps.typical_z >= threshold / 2 and steps.score >= threshold and np.median(misfit) <= STEP_MISFIT:
            confirmed.append(steps)
    return max(confirmed, key=lambda steps: steps.score, default=None)


def _packet_row(x, steps: _Steps, height_s: float) -> dict:
    low, high = steps.payload_interval
    first_boundary = (np.ceil((x[0] + steps.header) / steps.payload)) * steps.payload - steps.header
    first = np.searchsorted(x, first_boundary, side="right")
    return {"kind": "packet_steps", "size": x[first], "size_low": x[first - 1] if first else np.nan,
            "size_high": x[first], "magnitude": height_s, "score": steps.score,
            "period": float(steps.payload), "period_low": float(low), "period_high": float(high)}


def _step_height(x, y, w, runs, packets) -> float:
    """Height of one packet step, fitted together with a line per segment (weighted least squares)."""
    design = np.column_stack([runs_design(x, runs), packets]) * np.sqrt(w)[:, None]
    return float(np.linalg.lstsq(design, y * np.sqrt(w), rcond=None)[0][-1])


# --------------------------------------------------------------------------- protocol switches

def _line_cost(x, y, w, runs) -> float:
    """Weighted RSS of one line through all the points of `runs`."""
    index = np.concatenate([np.arange(first, last + 1) for first, last in runs])
    return float(weighted_line(x[index], y[index], w[index])[2])


def _significant_runs(x, y, w, runs, dispersion, threshold) -> tuple[list, list, np.ndarray]:
    """The breakpoints that pass `threshold`, with their scores, and the weights left for the fit.

    A breakpoint's evidence is how much worse one line would fit its two
    neighbouring segments (residual sum of squares, in noise variances); the
    square root of that is its score, and the weakest is dropped until all pass.
    A short segment whose two neighbours one line fits is a detour, not a switch (a
    switch changes the curve from then on): it is merged away and its sizes lose
    their weight, so it cannot tilt the line it interrupts. A segment longer than
    either neighbour is not a detour: a rendezvous switch adds a latency that
    relative errors can no longer see at the largest sizes, so one line can fit the
    sizes before the switch and the last few sizes after it.
    """
    runs, w = list(runs), w.copy()

    def score(left, right):
        gain = _line_cost(x, y, w, [left, right]) - _line_cost(x, y, w, [left]) - _line_cost(x, y, w, [right])
        return np.sqrt(max(gain, 0.0) / dispersion ** 2)

    while True:
        scores = [score(left, right) for left, right in zip(runs[:-1], runs[1:])]
        if scores and min(scores) < threshold:
            weakest = int(np.argmin(scores))
            runs[weakest:weakest + 2] = [(runs[weakest][0], runs[weakest + 1][1])]
            continue
        length = [last - first + 1 for first, last in runs]
        detours = [k for k in range(1, len(runs) - 1)
                   if length[k] <= min(length[k - 1], length[k + 1]) and score(runs[k - 1], runs[k + 1]) < threshold]
        if not detours:
            return runs, scores, w
        k = detours[0]
        w[runs[k][0]:runs[k][1] + 1] = 0
        runs[k - 1:k + 2] = [(runs[k - 1][0], runs[k + 1][1])]


def _bandwidth(slope: float) -> float:
    return 1 / slope if slope > 0 else np.inf


def _switch_rows(x, y, w, runs, scores) -> list[dict]:
    """One row per breakpoint: the jump between the two lines at its first size, and both bandwidths."""
    lines = segment_lines(x, y, w, runs)
    rows = []
    for (first, _), (a_before, b_before), (a_after, b_after), score in zip(runs[1:], lines, lines[1:], scores):
        at = x[first]
        rows.append({"kind": "protocol_switch", "size": at, "size_low": x[first - 1], "size_high": at,
                     "magnitude": (a_after + b_after * at) - (a_before + b_before * at), "score": score,
                     "bandwidth_before_Bps": _bandwidth(b_before), "bandwidth_after_Bps": _bandwidth(b_after)})
    return rows


# --------------------------------------------------------------------------- alignment

def _interleaved(members: np.ndarray) -> bool:
    """A residue class says something about alignment only if it alternates with the other sizes;
    a class that is just the small or the large sizes would be a size effect in disguise."""
    starts = members & ~np.concatenate([[False], members[:-1]])
    return starts.sum() >= 3


def _most_distinct_class(sizes, z, explained):
    """The residue class (size % m == r, m = 4, 8, ...) whose residuals sit furthest from the
    others', on either side: (score, modulus, residue, members), the score signed (below 0: the
    class is faster), or None.

    Either side, because alignment shows both ways: a few sizes slower (a residue class that
    straddles a boundary) or, as on most machines, every size slower but the aligned ones. Where
    a class and its complement split the sizes evenly (size % 8 == 0 or 4 on a 4-byte grid), both
    descriptions score the same and the first found, residue 0, is kept: the aligned sizes.
    """
    best = None
    modulus = 4
    while modulus <= min(MAX_MODULUS, sizes[-1]):
        residues = sizes % modulus
        for residue in np.unique(residues):
            members = residues == residue
            n_in, n_out = members.sum(), (~members).sum()
            if n_in < 3 or n_out < 3 or not _interleaved(members) or explained[members].all():
                continue  # too few, not interleaved, or part of a class already found
            excess = np.median(z[members]) - np.median(z[~members])
            score = excess / (MEDIAN_EFFICIENCY * np.sqrt(1 / n_in + 1 / n_out))
            if best is None or abs(score) > abs(best[0]):
                best = (score, modulus, int(residue), members)
        modulus *= 2
    return best


def _alignment_classes(sizes, z, residual_s, threshold) -> list[tuple[dict, np.ndarray]]:
    """Residue classes whose residuals sit above or below the others' (see _most_distinct_class),
    strongest first, each as its finding and its members; each class found is levelled before the
    next is looked for. The finding's magnitude is the class's median residual less the other
    sizes': below 0 where the class is faster."""
    classes, explained = [], np.zeros(sizes.size, bool)
    z = z.copy()
    for _ in range(MAX_ALIGNMENT_FINDINGS):
        best = _most_distinct_class(sizes, z, explained)
        if best is None or abs(best[0]) < threshold:
            break
        score, modulus, residue, members = best
        row = {"kind": "alignment", "size": sizes[members][0],
               "magnitude": float(np.median(residual_s[members]) - np.median(residual_s[~members])),
               "score": float(abs(score)), "modulus": float(modulus), "residue": float(residue)}
        classes.append((row, members))
        z[members] -= np.median(z[members]) - np.median(z[~members])
        explained |= members
    return classes


# --------------------------------------------------------------------------- spikes

def _launch_evidence(curve: Curve, model_s, candidates, signs, threshold) -> np.ndarray:
    """How many launches show each candidate spike on their own, with the same sign.

    Each launch's medians are compared with the model after taking out what the
    launch shifts for every size (its median relative offset); a launch shows the
    spike if it stands out by half the threshold in that launch's own noise.
    """
    relative = curve.launch_median_s / model_s[:, None] - 1
    relative = relative - quiet_nanmedian(relative, axis=0)[None, :]
    spread = robust_sd(relative, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        standing_out = relative[candidates] * signs[:, None] / spread[None, :] >= threshold / 2
    return standing_out.sum(axis=1)


def _sample_agreement(curve: Curve, model_s, candidates, signs) -> np.ndarray:
    """Fraction of each candidate's samples on the spike's side of the model."""
    samples = curve.sorted_samples_s[candidates].reshape(candidates.size, -1)
    side = np.sign(samples - model_s[candidates, None]) == signs[:, None]
    return side.sum(axis=1) / np.isfinite(samples).sum(axis=1)


def _spike_rows(curve: Curve, z, residual_s, model_s, excluded, threshold) -> list[dict]:
    """Single sizes far off the model whose neighbours are not: isolated, so no segment or class
    explains them. The size itself must be off, not only its median: with a launch axis in at
    least two launches, without one in nearly all its samples (a median of a few heavy-tailed
    samples can land far out by chance; a whole distribution rarely does)."""
    far = np.abs(z) >= threshold
    neighbour = np.full_like(z, np.inf)          # the first and last sizes have only one side to compare
    neighbour[1:-1] = np.maximum(np.abs(z[:-2]), np.abs(z[2:]))
    candidates = np.flatnonzero(far & (neighbour < threshold / 2) & ~excluded)
    if candidates.size == 0:
        return []
    signs = np.sign(z[candidates])
    launches = np.full(candidates.size, np.nan)
    if curve.has_launch_axis:
        launches = _launch_evidence(curve, model_s, candidates, signs, threshold).astype(float)
        keep = launches >= 2
    else:
        keep = _sample_agreement(curve, model_s, candidates, signs) >= SPIKE_SAMPLE_AGREEMENT
    return [{"kind": "spike", "size": curve.sizes[index], "magnitude": float(residual_s[index]),
             "score": float(abs(z[index])), "launches": seen}
            for index, seen in zip(candidates[keep], launches[keep])]


# --------------------------------------------------------------------------- all together

@dataclass(frozen=True)
class _Structure:
    """The structural model of a curve: segments with their breakpoint scores, packet steps."""

    runs: list                   # (first, last) index of every segment
    scores: list                 # each breakpoint's score
    weights: np.ndarray          # what the fit gave each size (outliers and detours at zero)
    step_height_s: float         # one packet step (0 without steps)
    dispersion: float            # what the model leaves, in noise standard deviations (>= 1)


def _fit_structure(x, y, sigma, packets, height, threshold, max_segments, min_segment_sizes) -> _Structure:
    """Segments (significant breakpoints only) of the curve less its packet steps; with steps,
    their height and the segments are fitted in turn, since each biases the other if left alone."""
    for _ in range(2 if height else 1):
        smooth = y - height * packets
        segmentation = segment_curve(x, smooth, 1 / sigma ** 2, max_segments, min_segment_sizes)
        weights = segmentation.weights
        fitted = predict_segments(x, smooth, weights, segmentation.best_bounds)
        # If the model leaves more than the noise (curvature a line cannot follow, heavier tails
        # than a Gaussian), every test scales with it; the sizes the fit left out are not counted.
        dispersion = max(1.0, tail_aware_spread(((smooth - fitted) / sigma)[weights > 0]))
        runs, scores, weights = _significant_runs(x, smooth, weights, segmentation.best_bounds,
                                                  dispersion, threshold)
        if height:
            height = _step_height(x, y, weights, runs, packets)
    return _Structure(runs, scores, weights, height, dispersion)


@dataclass(frozen=True)
class _Model:
    """What the structure of a curve explains: its findings (packet steps, switches), the model
    and the noise (seconds) at every size, and what the model leaves in noise units (>= 1)."""

    rows: list
    model_s: np.ndarray
    sigma_s: np.ndarray
    dispersion: float


def _structural_model(curve: Curve, threshold, max_segments, min_segment_sizes) -> _Model:
    """Packet steps, then segments of the curve with the steps taken out."""
    x, y = curve.sizes.astype(float), curve.median_s
    # A first structural fit with relative weights (no noise level needed for that) gives
    # the noise level and a baseline for the packet search.
    rough = segment_curve(x, y, 1 / y ** 2, max_segments, min_segment_sizes)
    sigma = relative_noise(curve, predict_segments(x, y, rough.weights, rough.best_bounds)) * y

    baselines = [line_design(x)] + ([runs_design(x, rough.best_bounds)] if rough.best > 1 else [])
    steps = _packet_steps(x, y, sigma, baselines, threshold)
    packets = packet_counts(x, steps.payload, steps.header) if steps else np.zeros_like(y)
    height = float(np.median(steps.heights_s)) if steps else 0.0
    structure = _fit_structure(x, y, sigma, packets, height, threshold, max_segments, min_segment_sizes)
    staircase = structure.step_height_s * packets
    rows = [_packet_row(x, steps, structure.step_height_s)] if steps else []
    rows += _switch_rows(x, y - staircase, structure.weights, structure.runs, structure.scores)
    model = predict_segments(x, y - staircase, structure.weights, structure.runs) + staircase
    return _Model(rows, model, sigma, structure.dispersion)


def _levelled(curve: Curve, fit: _Model, classes) -> Curve:
    """The curve with each class brought to the level of the other sizes, by a constant or in
    proportion to the time (an alignment penalty can be either), whichever leaves the class's
    sizes closer together. Each size is levelled from its own time, not from the model: where
    the model is off (a class size that starts a segment), it would carry the error over."""
    y = curve.median_s.copy()
    for _, members in classes:
        residual, relative = y - fit.model_s, y / fit.model_s - 1
        constant = np.median(residual[members]) - np.median(residual[~members])
        ratio = 1 + np.median(relative[members]) - np.median(relative[~members])
        candidates = [np.where(members, y - constant, y), np.where(members, y / ratio, y)]
        spreads = [robust_sd(((levelled - fit.model_s) / fit.sigma_s)[members]) for levelled in candidates]
        y = candidates[int(np.argmin(spreads))]
    return replace(curve, median_s=y)


def detect(sizes, times, threshold: float = 6.0, max_segments: int = 5,
           min_segment_sizes: int = 3, counts=None) -> pd.DataFrame:
    """Findings of one curve, one row each; an empty table (with the columns) when there are none.

    Columns: kind (packet_steps, protocol_switch, alignment, spike); size (bytes
    where it starts: the first size past the first packet boundary or the switch,
    the first size of the class, the spike's size) with size_low and size_high
    bracketing a switch or first step; magnitude (seconds: step height, jump at the
    switch, time of the class less that of the other sizes (below 0: the class is
    faster, as aligned sizes usually are), or the spike's extra time); score
    (significance, in noise standard deviations); period with period_low and
    period_high (packet payloads that fit the grid equally well); modulus and residue
    (alignment: the sizes with size % modulus == residue); launches (spikes: launches
    that show it, NaN without a launch axis); bandwidth_before_Bps and
    bandwidth_after_Bps (switches). Columns that do not apply to a kind are NaN.
    """
    curve = reduce_curve(sizes, times, counts)
    if curve.sizes.size < MIN_SIZES:
        return empty_table()
    options = (threshold, max_segments, min_segment_sizes)
    fit = _structural_model(curve, *options)
    classes = _alignment_classes(curve.sizes, *_standardised(curve, fit), threshold)
    if classes:
        # A class of sizes off the others pulls the structural fit where few other sizes hold
        # it (the end of a segment, the smallest sizes of a page-sized class): a switch or a
        # spike appears that is the class's doing. The structure is fitted again without it.
        fit = _structural_model(_levelled(curve, fit, classes), *options)
        classes = _alignment_classes(curve.sizes, *_standardised(curve, fit), threshold)
    z, residual = _standardised(curve, fit)
    explained = np.zeros(curve.sizes.size, bool)
    for _, members in classes:
        explained |= members
    rows = fit.rows + [row for row, _ in classes]
    rows += _spike_rows(curve, z, residual, fit.model_s, explained, threshold)
    return _table(rows)


def _standardised(curve: Curve, fit: _Model) -> tuple[np.ndarray, np.ndarray]:
    """The curve's residuals from the model, in noise units and in seconds."""
    residual = curve.median_s - fit.model_s
    return residual / fit.sigma_s / fit.dispersion, residual
