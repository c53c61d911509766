"""Spikes: single sizes far off the structural model whose neighbours are not, confirmed in the
launches or the samples of the size itself."""

from __future__ import annotations

import numpy as np

from commlens.analysis.models import Curve, quiet_nanmedian, robust_sd

# Without a launch axis, a spike's samples must almost all lie on its side of the model.
SPIKE_SAMPLE_AGREEMENT = 0.9


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


def spike_rows(curve: Curve, z, residual_s, model_s, excluded, threshold) -> list[dict]:
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
