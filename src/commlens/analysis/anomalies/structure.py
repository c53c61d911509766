"""The structural model of a curve: its packet steps, then the segments (protocol switches) of the
curve with the steps taken out, and the noise at every size that the later tests are held against."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from commlens.analysis.anomalies.noise import relative_noise, tail_aware_spread
from commlens.analysis.anomalies.steps import packet_row, packet_steps, step_height
from commlens.analysis.anomalies.switches import significant_runs, switch_rows
from commlens.analysis.models.packets import packet_steps_at
from commlens.analysis.models import Curve, line_design, packet_counts, predict_segments, runs_design, segment_curve


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
        runs, scores, weights = significant_runs(x, smooth, weights, segmentation.best_bounds,
                                                 dispersion, threshold)
        if height:
            height = step_height(x, y, weights, runs, packets)
    return _Structure(runs, scores, weights, height, dispersion)


@dataclass(frozen=True)
class StructuralModel:
    """What the structure of a curve explains: its findings (packet steps, switches), the model
    and the noise (seconds) at every size, and what the model leaves in noise units (>= 1)."""

    rows: list
    model_s: np.ndarray
    sigma_s: np.ndarray
    dispersion: float


def rough_fit(curve: Curve, max_segments: int, min_segment_sizes: int):
    """A first structural fit with relative weights (no noise level needed for that), and the noise (seconds)
    at every size it gives: what the packet search and every later test are held against."""
    x, y = curve.sizes.astype(float), curve.median_s
    rough = segment_curve(x, y, 1 / y ** 2, max_segments, min_segment_sizes)
    return rough, relative_noise(curve, predict_segments(x, y, rough.weights, rough.best_bounds)) * y


def steps_at(curve: Curve, payload: int, header: int, max_segments: int = 5, min_segment_sizes: int = 3):
    """The packet steps of `curve` at a payload and header found elsewhere (a launch, checked against
    the period its launches pooled show); None where the grid holds too few boundaries."""
    _, sigma = rough_fit(curve, max_segments, min_segment_sizes)
    return packet_steps_at(curve.sizes.astype(float), curve.median_s, sigma, payload, header)


def fit_structural_model(curve: Curve, threshold, max_segments, min_segment_sizes) -> StructuralModel:
    """Packet steps, then segments of the curve with the steps taken out."""
    x, y = curve.sizes.astype(float), curve.median_s
    rough, sigma = rough_fit(curve, max_segments, min_segment_sizes)

    baselines = [line_design(x)] + ([runs_design(x, rough.best_bounds)] if rough.best > 1 else [])
    steps = packet_steps(x, y, sigma, baselines, threshold)
    packets = packet_counts(x, steps.payload, steps.header) if steps else np.zeros_like(y)
    height = float(np.median(steps.heights_s)) if steps else 0.0
    structure = _fit_structure(x, y, sigma, packets, height, threshold, max_segments, min_segment_sizes)
    staircase = structure.step_height_s * packets
    rows = [packet_row(x, steps, structure.step_height_s)] if steps else []
    rows += switch_rows(x, y - staircase, structure.weights, structure.runs, structure.scores, structure.dispersion)
    model = predict_segments(x, y - staircase, structure.weights, structure.runs) + staircase
    return StructuralModel(rows, model, sigma, structure.dispersion)
