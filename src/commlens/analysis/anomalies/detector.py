"""The anomaly detector of one curve, `detect`, and the findings table it returns: the structural
model first, then alignment classes and spikes in what it leaves (see commlens.analysis.anomalies)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from commlens.analysis.anomalies.alignment import alignment_classes
from commlens.analysis.anomalies.noise import launch_levelled
from commlens.analysis.anomalies.spikes import spike_rows
from commlens.analysis.anomalies.structure import StructuralModel, fit_structural_model
from commlens.analysis.models import Curve, reduce_curve, robust_sd

COLUMNS = ("kind", "size", "size_low", "size_high", "magnitude", "score", "period", "period_low",
           "period_high", "modulus", "residue", "launches", "bandwidth_before_Bps", "bandwidth_after_Bps")
# Below this many sizes a curve has too little shape to call anything unusual.
MIN_SIZES = 6


def empty_table() -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype=object if name == "kind" else float) for name in COLUMNS})


def _table(rows: list[dict]) -> pd.DataFrame:
    if not rows:
        return empty_table()
    return pd.DataFrame([{name: row.get(name, np.nan) for name in COLUMNS} for row in rows],
                        columns=list(COLUMNS))


def _levelled(curve: Curve, fit: StructuralModel, classes) -> Curve:
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
           min_segment_sizes: int = 3, counts=None, positions=None) -> pd.DataFrame:
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
    With a launch axis, each launch is first brought to the common level (launch_levelled): the
    findings are about the curve's shape, which launches of one row share. `positions` (n_sizes,
    n_launches), where in its launch each point was measured, level each launch along that order too:
    a host that changed speed part-way through a launch.
    """
    curve = reduce_curve(sizes, launch_levelled(times, positions), counts)
    if curve.sizes.size < MIN_SIZES:
        return empty_table()
    options = (threshold, max_segments, min_segment_sizes)
    fit = fit_structural_model(curve, *options)
    classes = alignment_classes(curve.sizes, *_standardised(curve, fit), threshold)
    if classes:
        # A class of sizes off the others pulls the structural fit where few other sizes hold
        # it (the end of a segment, the smallest sizes of a page-sized class): a switch or a
        # spike appears that is the class's doing. The structure is fitted again without it.
        fit = fit_structural_model(_levelled(curve, fit, classes), *options)
        classes = alignment_classes(curve.sizes, *_standardised(curve, fit), threshold)
    z, residual = _standardised(curve, fit)
    explained = np.zeros(curve.sizes.size, bool)
    for _, members in classes:
        explained |= members
    rows = fit.rows + [row for row, _ in classes]
    rows += spike_rows(curve, z, residual, fit.model_s, explained, threshold)
    return _table(rows)


def _standardised(curve: Curve, fit: StructuralModel) -> tuple[np.ndarray, np.ndarray]:
    """The curve's residuals from the model, in noise units and in seconds."""
    residual = curve.median_s - fit.model_s
    return residual / fit.sigma_s / fit.dispersion, residual
