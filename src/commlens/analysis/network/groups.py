"""Groups of nodes that share a switch, from a matrix of pair times.

Nodes behind one leaf switch reach each other without crossing an uplink; pairs on different leaves
cross it, and where the uplink is slower than the links (an oversubscribed tree), they take longer.
Once every node's own effect is taken out (the model of commlens.analysis.network.pairs:
log t_ij = m + u_i + u_j + r_ij, fitted to each repetition by least squares), what the pairs leave,
r_ij, is lower within a group than across groups.

The nodes are joined bottom-up by average linkage on the repetitions' mean residuals (made symmetric),
so that the nodes of a leaf join one another before any other leaf's. Each join of two groups is then
tested, from the bottom of the tree up: they stay apart when the pairs between them are slower than the
pairs within each by more than `min_effect`, significantly over the repetitions (a one-sided t test of
each repetition's difference of median residuals, against that margin, at `confidence`); a join above two
groups that stayed apart is not tested (its pairs within are not one group's). Within groups of equal
size every node has the same mix of pairs within and across, so least squares leaves the whole cost of
crossing in the pairs, none in the nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from commlens.analysis.network.pairs import node_and_pair_effects
from commlens.data.samples import quiet_nanmean


@dataclass(frozen=True)
class NodeGroups:
    """The groups found (lists of node names, in node order); `across`: how much slower the pairs across
    groups are than the pairs within them (effect, low, high, p; NaN for one group); and every merge of
    two groups tested, one row each (first, second: the two, then the same for them, and whether they
    stayed apart)."""

    groups: list[list[str]]
    across: dict
    merges: pd.DataFrame
    repetitions: int
    confidence: float
    min_effect: float

    @property
    def for_links(self) -> list[list[str]] | None:
        """The groups that slow links are judged beyond (find_slow_nodes_and_links' `groups`): None where
        there is one group, or a group of one node (its crossings and its own effect are one)."""
        return self.groups if len(self.groups) > 1 and all(len(group) > 1 for group in self.groups) else None

    def named(self) -> str:
        """The groups in words, with what sets them apart."""
        if len(self.groups) < 2:
            return "one group: no two sets of its nodes are apart"
        a = self.across
        return (f"{len(self.groups)} groups: {', '.join(_span(group) for group in self.groups)}; pairs across "
                f"groups {a['effect'] * 100:.0f}% slower than within [{a['low'] * 100:+.0f}%, "
                f"{a['high'] * 100:+.0f}%] (p = {a['p']:.2g})")


def _span(names: list[str]) -> str:
    return " ".join(names)


def find_groups(times, nodes=None, *, confidence: float = 0.95, min_effect: float = 0.10) -> NodeGroups:
    """Groups of the nodes of pair times `times` shaped (n, n, repetitions): source, destination,
    repetition, NaN where a pair was not measured (the diagonal)."""
    times = np.asarray(times, dtype=float)
    if times.ndim != 3 or times.shape[0] != times.shape[1]:
        raise ValueError(f"times must be (n, n, repetitions), got shape {times.shape}")
    n, _, repetitions = times.shape
    if repetitions < 2:
        raise ValueError("groups need at least two repetitions (launches or rounds) to test their joins")
    if np.any(times[np.isfinite(times)] <= 0):
        raise ValueError("pair times must be positive")
    names = [str(name) for name in (nodes if nodes is not None else range(n))]
    if len(names) != n:
        raise ValueError(f"{len(names)} node names for {n} nodes")
    # Least squares, not the biweight: with two switches the pairs across them are half the pairs or more,
    # and the biweight took one switch's pairs within as outliers and its nodes as slow.
    residuals = np.array([node_and_pair_effects(np.log(times[:, :, r]), robust=False)[1]
                          for r in range(repetitions)])
    # Both directions of a pair together (the mean of those measured), per repetition: (R, n, n).
    both = quiet_nanmean(np.stack([residuals, residuals.transpose(0, 2, 1)]), axis=0)
    groups: list[list[int]] = []
    rows = []

    def one_group(branch) -> bool:
        """Whether the nodes under `branch` are one group; the largest groups below it are kept in `groups`
        where they are not."""
        if branch.is_leaf():
            return True
        children = (branch.get_left(), branch.get_right())
        whole = [one_group(child) for child in children]
        if all(whole):
            halves = [sorted(child.pre_order()) for child in children]
            row = _test(both, halves, confidence, min_effect)
            rows.append({"first": [names[k] for k in halves[0]], "second": [names[k] for k in halves[1]], **row})
            if not row["apart"]:
                return True
        groups.extend(sorted(child.pre_order()) for child, is_group in zip(children, whole) if is_group)
        return False

    tree = _tree(both)
    if one_group(tree):
        groups.append(sorted(tree.pre_order()))
    groups.sort(key=min)
    merges = pd.DataFrame(rows, columns=["first", "second", "effect", "low", "high", "p", "apart"])
    across = (_test(both, groups, confidence, min_effect) if len(groups) > 1
              else dict.fromkeys(("effect", "low", "high", "p"), np.nan) | {"apart": False})
    return NodeGroups([[names[k] for k in group] for group in groups], across, merges, repetitions, confidence,
                      min_effect)


def _tree(both: np.ndarray):
    """The nodes joined bottom-up by average linkage on their mean residuals (made symmetric: low within
    a group, high across), a scipy ClusterNode: every leaf switch is joined whole before any of its nodes
    meets another leaf's, so each split of the tree keeps a leaf's nodes together."""
    from scipy.cluster.hierarchy import linkage, to_tree
    from scipy.spatial.distance import squareform

    mean = quiet_nanmean(both, axis=0)
    np.fill_diagonal(mean, np.nan)
    distance = np.nan_to_num(mean - np.nanmin(mean), nan=0.0)
    np.fill_diagonal(distance, 0.0)
    return to_tree(linkage(squareform((distance + distance.T) / 2, checks=False), method="average"))


def _test(both: np.ndarray, groups: list[list[int]], confidence: float, min_effect: float) -> dict:
    """How much slower the pairs across `groups` (a partition of some nodes) are than the pairs within
    them, per repetition on the log scale, and whether that is beyond `min_effect`."""
    nodes = [k for group in groups for k in group]
    label = {k: g for g, group in enumerate(groups) for k in group}
    same = np.array([[label[a] == label[b] for b in nodes] for a in nodes])
    block = both[:, nodes][:, :, nodes]
    off_diagonal = ~np.eye(len(nodes), dtype=bool)
    if not (same & off_diagonal).any():      # single nodes: no pair within to hold them apart by
        return dict.fromkeys(("effect", "low", "high", "p"), np.nan) | {"apart": False}
    # Medians of the pairs, not means: one slow link within a leaf of four (a pair in three of a node's)
    # pulled the node's mean pair 13% up and split it from its leaf; a crossing slows every pair across.
    across = np.nanmedian(block[:, ~same], axis=1)
    within = np.nanmedian(block[:, same & off_diagonal], axis=1)
    difference = across - within
    repetitions = difference.size
    mean, se = difference.mean(), difference.std(ddof=1) / np.sqrt(repetitions)
    se = max(se, np.finfo(float).tiny)
    p = float(scipy_stats.t.sf((mean - np.log1p(min_effect)) / se, df=repetitions - 1))
    half = scipy_stats.t.ppf(0.5 + confidence / 2, df=repetitions - 1) * se
    return {"effect": float(np.expm1(mean)), "low": float(np.expm1(mean - half)),
            "high": float(np.expm1(mean + half)), "p": p, "apart": p <= 1 - confidence}
