"""The report's figures of all-pairs kernels (allpairs.*): a heatmap of every pair's bandwidth per
library, placement and kernel at its largest size, captioned with the slow nodes and links the
campaign's launches name (commlens.analysis.network)."""

from __future__ import annotations

import hvplot.pandas  # noqa: F401  (registers DataFrame.hvplot)
import numpy as np
import pandas as pd

from commlens.analysis.network import MIN_NODES, find_groups, find_slow_nodes_and_links, node_pair_times
from commlens.data.kernels import kernel_tags
from commlens.data.samples import quiet_nanmedian
from commlens.report.analysis_table import ReportData
from commlens.report.elements import Figure, Skipped
from commlens.units import format_size

WHY = "needs an all-pairs kernel (allpairs.*)"


def _matrix_rows(times: np.ndarray, nodes: list[str], size: int) -> pd.DataFrame:
    """One row per node pair: its bandwidth (MB/s) from the median over launches (NaN: not measured)."""
    median = quiet_nanmedian(times, axis=2)
    # Every cell, the diagonal's and unmeasured pairs' empty: the axes then keep the nodes' order.
    rows = [{"source": nodes[a], "destination": nodes[b], "bandwidth_MBps": size / median[a, b] / 1e6}
            for a in range(len(nodes)) for b in range(len(nodes))]
    return pd.DataFrame(rows)


def _groups(times: np.ndarray, nodes: list[str]):
    """The groups of nodes that share a switch (a NodeGroups), where two or more are found."""
    if times.shape[2] < 2 or len(nodes) < 4:
        return None
    found = find_groups(times, nodes)
    return found if len(found.groups) >= 2 else None


def _groups_sentence(groups) -> str:
    """The groups as the caption says them, and what the slow links below are judged beyond."""
    if groups is None:
        return ""
    judged = ("slow links below are named beyond the crossing between them" if groups.for_links
              else "a node alone in its group: slow links below are named as if on one switch")
    return (f" Nodes that share a switch, from the matrix ({1 - groups.confidence:.0%} level, beyond "
            f"{groups.min_effect:.0%}): {groups.named()}; {judged}.")


def _findings(times: np.ndarray, nodes: list[str], groups=None) -> str:
    """What the launches name, as the caption says it: links beyond the crossing between `groups` where
    each has two nodes or more."""
    if len(nodes) < MIN_NODES or times.shape[2] < 2:
        return (f" Slow nodes and links are named from {MIN_NODES} nodes and two launches on; this has "
                f"{len(nodes)} nodes and {times.shape[2]} launch(es).")
    found = find_slow_nodes_and_links(times, nodes, groups=groups.for_links if groups else None)
    named = found.named()
    return (f" Named over its {found.repetitions} launches (changes significantly beyond {found.min_effect:.0%}, "
            f"{1 - found.confidence:.0%} false discovery rate): "
            + ("; ".join(named) if named else "no node or link") + ".")


def pair_matrices(data: ReportData) -> list:
    ds = data.ds
    if "pair_time" not in ds:
        return [Skipped("pair-matrices", "Every pair's bandwidth", WHY)]
    figures = []
    tags = kernel_tags(ds)     # fan.in, fan.out, bisection time some pairs only: no matrix of every pair
    for kernel in (kernel for kernel in ds["pair_kernel"].values.tolist() if "pairs" in tags.get(kernel, ())):
        for library in ds["library"].values.tolist():
            for placement in ds["placement"].values.tolist():
                measured = ds["pair_time"].sel(library=library, placement=placement, pair_kernel=kernel)
                sizes = [int(s) for s in ds["size"].values if np.isfinite(measured.sel(size=s)).any()]
                if not sizes:
                    continue
                size = max(sizes)
                times, nodes = node_pair_times(ds, library, placement, kernel, size)
                rows = _matrix_rows(times, nodes, size)
                groups = _groups(times, nodes)
                title = f"{kernel}, {library}, {placement}: every pair's bandwidth"
                caption = (f"Bandwidth from each source node (rows) to each destination node (columns) at "
                           f"{format_size(size)}, the median over the launches of each pair's median message time "
                           f"({data.ds['metric'].sel(kernel=kernel).item().split(';')[0]})."
                           + _groups_sentence(groups) + _findings(times, nodes, groups) + data.window_note([kernel]))

                def build(rows=rows, title=title):
                    # hvPlot gives each backend (Bokeh's hover, matplotlib's static copy) its own options.
                    return rows.hvplot.heatmap(x="destination", y="source", C="bandwidth_MBps", title=title,
                                               cmap="viridis", clabel="bandwidth (MB/s)", colorbar=True,
                                               flip_yaxis=True)

                figures.append(Figure(f"pairs-{kernel}-{library}-{placement}", title, caption, build))
    return figures or [Skipped("pair-matrices", "Every pair's bandwidth", WHY)]
