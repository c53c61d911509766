"""Node-by-node pair times of one all-pairs curve point, from a campaign dataset's `pair_time`."""

from __future__ import annotations

import numpy as np
import xarray as xr

from commlens.data.kernels import kernel_tags
from commlens.data.pairs import rank_hosts
from commlens.data.samples import quiet_nanmedian


def node_pair_times(ds: xr.Dataset, library: str, placement: str, kernel: str, size: int
                    ) -> tuple[np.ndarray, list[str]]:
    """(nodes, nodes, launches) seconds per message between nodes, and the nodes' names, of the launches
    that measured the point. A node pair's time is the median over its rank pairs; pairs of ranks on one
    node are left out (shared memory says nothing of the network). Ranks are placed on nodes by each
    launch's own record of its hosts (one per rank), so launches that placed ranks differently still
    agree on what a node is."""
    if "pair_time" not in ds:
        raise ValueError("this dataset has no pair times: no kernel of it timed every pair (allpairs.*)")
    if kernel not in ds["pair_kernel"].values:
        raise ValueError(f"kernel {kernel!r} timed no pairs here; these did: "
                         f"{', '.join(map(str, ds['pair_kernel'].values))}")
    if "pairs" not in kernel_tags(ds).get(kernel, ()):
        raise ValueError(f"kernel {kernel!r} times some pairs of ranks, not every pair: its pair times are "
                         f"ds['pair_time'].sel(pair_kernel={kernel!r})")
    point = ds["pair_time"].sel(library=library, placement=placement, pair_kernel=kernel, size=size)
    hosts = ds["hosts"].sel(library=library, placement=placement, kernel=kernel)
    per_launch, names = [], []
    for launch in ds["launch"].values:
        matrix = point.sel(launch=launch).values
        ranks = rank_hosts(hosts.sel(launch=launch).values)
        if not ranks or not np.isfinite(matrix).any():
            continue
        for host in ranks:
            if host not in names:
                names.append(host)
        per_launch.append((ranks, matrix))
    if not per_launch:
        raise ValueError(f"no launch of {library} / {placement} / {kernel} measured pair times at {size} B")
    index = {name: i for i, name in enumerate(names)}
    times = np.full((len(names), len(names), len(per_launch)), np.nan)
    for r, (ranks, matrix) in enumerate(per_launch):
        node = np.array([index[host] for host in ranks])
        for a in range(len(names)):
            for b in range(len(names)):
                if a != b:
                    block = matrix[np.ix_(node == a, node == b)]
                    times[a, b, r] = quiet_nanmedian(block, axis=None) if block.size else np.nan
    return times, names
