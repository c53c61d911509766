"""Pair times of the kernels that time every pair of ranks (allpairs.*) in the campaign dataset.

A point of such a kernel holds, per sample, a matrix of seconds per message from each source rank to
each destination. The dataset keeps each point's matrix of medians over its samples, on dims of their
own: `pair_time(library, placement, pair_kernel, size, launch, source_rank, destination_rank)`, where
`pair_kernel` lists only the kernels that timed pairs (a campaign's other kernels cost nothing) and
source and destination are ranks (each rank's node: the launch's `hosts`, one per rank).
"""

from __future__ import annotations

import numpy as np

from commlens.data.samples import quiet_nanmedian

PAIR_DIMS = ("library", "placement", "pair_kernel", "size", "launch", "source_rank", "destination_rank")


def rank_hosts(hosts) -> list[str]:
    """Each rank's node, from one launch's `hosts` (comma-separated, one per rank; empty: none recorded)."""
    return [host for host in str(hosts).split(",") if host]


def pair_medians(pair_times_s: np.ndarray) -> np.ndarray:
    """(samples, ranks, ranks) -> (ranks, ranks): each pair's median, NaN where it was never timed."""
    return quiet_nanmedian(pair_times_s, axis=0)


def pair_variables(medians: dict, kernels: list[str], sizes: list[int], run_shape: tuple) -> tuple[dict, dict]:
    """Coordinates and the `pair_time` variable from {(library, placement, kernel, launch) index cell,
    size: (ranks, ranks) medians}; nothing when no point timed pairs."""
    if not medians:
        return {}, {}
    pair_kernels = sorted({cell[2] for cell, _ in medians})
    ranks = max(matrix.shape[0] for matrix in medians.values())
    size_index = {size: i for i, size in enumerate(sizes)}
    times = np.full((run_shape[0], run_shape[1], len(pair_kernels), len(sizes), run_shape[3], ranks, ranks), np.nan)
    for (cell, size), matrix in medians.items():
        n = matrix.shape[0]
        times[cell[0], cell[1], pair_kernels.index(cell[2]), size_index[size], cell[3], :n, :n] = matrix
    coords = {"pair_kernel": ("pair_kernel", [kernels[k] for k in pair_kernels],
                              {"long_name": "the kernels that timed every pair of ranks"}),
              "source_rank": ("source_rank", np.arange(ranks), {"long_name": "sending rank"}),
              "destination_rank": ("destination_rank", np.arange(ranks), {"long_name": "receiving rank"})}
    variables = {"pair_time": (PAIR_DIMS, times,
                               {"units": "s", "long_name": "seconds per message from source to destination rank, the "
                                                           "median over the point's samples (NaN: not timed)"})}
    return coords, variables
