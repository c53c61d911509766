"""The launch-level tests of compare's cells: paired by round where both rows have rounds, unpaired
otherwise, each with its variance moderated across the curve (commlens.analysis.moderated).

A campaign that runs in rounds (round r runs every cell once, in a random order) measures both rows
of a comparison in every round, close together in time. Whatever drifted between rounds (another job
on the node, a frequency or thermal change, a filling page cache) moves both rows' launches of that
round alike, so the per-round log ratio (candidate minus baseline log value of the same round) is
free of it, and the test of its mean has the round-to-round variation of the ratio only. Without
rounds (two campaigns, datasets from before rounds, a row with a failed launch in every round) the
launches of each row are two independent samples, and the drift stays in their variance.

Arrays are (curves, sizes, launches): a curve is one of the compared cells' curves (every dim but
size and launch), log values, NaN where a launch did not measure the cell.
"""

from __future__ import annotations

import warnings

import numpy as np

from commlens.analysis.moderated import cell_variances


def by_round(base: np.ndarray, base_round: np.ndarray, cand: np.ndarray, cand_round: np.ndarray) -> np.ndarray:
    """Per-round log ratios (curves, sizes, rounds): candidate minus baseline value of the launch each ran
    in that round, NaN where either did not run or measure the cell; rounds are the integers the
    `*_round` arrays (same shape as the values, NaN where unknown) hold."""
    known = np.concatenate([base_round[np.isfinite(base_round)], cand_round[np.isfinite(cand_round)]])
    rounds = int(known.max()) + 1 if known.size else 0
    sides = []
    for values, rounds_of in ((base, base_round), (cand, cand_round)):
        placed = np.full(values.shape[:2] + (rounds,), np.nan)
        curve, size, launch = np.nonzero(np.isfinite(values) & np.isfinite(rounds_of))
        placed[curve, size, rounds_of[curve, size, launch].astype(int)] = values[curve, size, launch]
        sides.append(placed)
    return sides[1] - sides[0]


def paired_test(ratios: np.ndarray, moderate: bool = True, noise_groups: np.ndarray | None = None) -> dict:
    """Mean per-round log ratio of each cell, its squared standard error and degrees of freedom;
    `noise_groups` (curves,): the curves of like noise (commlens.analysis.moderated.cell_variances)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        n = np.isfinite(ratios).sum(-1)
        variance = cell_variances(ratios, np.zeros(ratios.shape[-1], int), moderate, noise_groups)
        return {"diff": np.nanmean(ratios, -1), "se2": variance["var"] / n, "dof": variance["dof"], "n": n}


def unpaired_test(base: np.ndarray, cand: np.ndarray, moderate: bool = True,
                  noise_groups: np.ndarray | None = None) -> dict:
    """Difference of the two rows' mean log values per cell, its squared standard error (one launch
    variance for both rows, as limma's two-group model has it) and degrees of freedom."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        n_b, n_c = np.isfinite(base).sum(-1), np.isfinite(cand).sum(-1)
        units = np.concatenate([base, cand], axis=-1)
        group = np.repeat([0, 1], [base.shape[-1], cand.shape[-1]])
        variance = cell_variances(units, group, moderate, noise_groups)
        diff = np.nanmean(cand, -1) - np.nanmean(base, -1)
        return {"diff": diff, "se2": variance["var"] * (1 / n_b + 1 / n_c), "dof": variance["dof"]}
