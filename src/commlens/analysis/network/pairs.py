"""Slow nodes and slow links from a matrix of pair times.

Every ordered pair (source i, destination j) of nodes has a time t_ij per repetition (a launch or a
round: the experimental unit). On the log scale a pair's time is modelled as

    log t_ij = m + u_i + u_j + r_ij

where u_k is node k's effect on every pair through it (a slow node slows its row and its column
alike: its link, its NIC, its CPU) and r_ij is what the two nodes do not explain (a slow link or
path between them). On a tree of switches, with the groups of nodes that share one given
(commlens.analysis.network.groups), the model has a term more, c_gh, for every pair of nodes in
groups g and h (g != h): what crossing between those switches costs, which no link is to blame
for. The model is fitted to each repetition on its own, robustly (Tukey's biweight:
a slow link must not pass for a slow node), node effects are measured against the median node, and
the repetitions' spread gives each effect its interval, as compare treats launches. A node or link
is named when its effect is significantly larger than `min_effect`, either way, after false
discovery control over all nodes (and over all links).

Bandwidths go in as their reciprocal (time per byte): slower is always larger.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from commlens.analysis.compare import benjamini_hochberg
from commlens.analysis.constants import MAD_TO_SD
from commlens.analysis.moderated import fit_prior, squeeze

# Tukey's biweight constant: 95% efficiency on Gaussian residuals.
BIWEIGHT_C = 4.685
ROBUST_ITERATIONS = 50
# With 4 nodes a slow link is as well explained by its two nodes being slow and the other link fast:
# none of 40 planted 30% links was found (synthetic, 5 repetitions); with 5 nodes 30 of 40, 6 all.
MIN_NODES = 5


@dataclass(frozen=True)
class PairFindings:
    """Node and link effects with intervals, q values and which are named.

    nodes: one row per node (node, effect, low, high, p, q, named); effect is the relative change
    of every pair through it against the median node (0.41: 41% slower). links: one row per
    unordered pair (a, b, effect, low, high, p, q, named), the pair's time beyond its nodes'
    effects, both directions together where both were measured.
    """

    nodes: pd.DataFrame
    links: pd.DataFrame
    repetitions: int
    confidence: float
    min_effect: float
    groups: list[list[str]] | None = None     # the switches' groups the links were judged beyond

    def named(self) -> list[str]:
        """One sentence per named node or link, nodes first."""
        lines = []
        for _, row in self.nodes[self.nodes["named"]].iterrows():
            lines.append(f"{row['node']}: every pair through it {_describe(row)}")
        for _, row in self.links[self.links["named"]].iterrows():
            beyond = ("its nodes and the crossing between their switches" if self.groups and len(self.groups) > 1
                      else "its nodes")
            lines.append(f"{row['a']} - {row['b']}: {_describe(row)} beyond {beyond}")
        return lines


def _describe(row) -> str:
    way = "slower" if row["effect"] > 0 else "faster"
    return (f"{abs(row['effect']) * 100:.0f}% {way} "
            f"[{row['low'] * 100:+.0f}%, {row['high'] * 100:+.0f}%] (q = {row['q']:.2g})")


def _biweight_fit(y: np.ndarray, design: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Coefficients of y ~ design by iteratively reweighted least squares with Tukey's biweight, from
    `start`. The biweight is not convex and settles near where it starts, so the start must already
    be robust: least squares would share a slow link's time out among its two nodes."""
    coefficients = start
    for _ in range(ROBUST_ITERATIONS):
        residual = y - design @ coefficients
        scale = MAD_TO_SD * np.median(np.abs(residual - np.median(residual)))
        if scale <= 0:
            break
        u = residual / (BIWEIGHT_C * scale)
        weights = np.where(np.abs(u) < 1, (1 - u ** 2) ** 2, 0.0)
        root = np.sqrt(weights)
        updated = np.linalg.lstsq(design * root[:, None], y * root, rcond=None)[0]
        if np.allclose(updated, coefficients, rtol=0, atol=1e-10):
            coefficients = updated
            break
        coefficients = updated
    return coefficients


def _crossings(labels: np.ndarray, sources: np.ndarray, destinations: np.ndarray) -> np.ndarray:
    """(pairs, crossings): for each pair of distinct groups (g < h), which of the pairs run between them."""
    count = int(labels.max()) + 1
    low = np.minimum(labels[sources], labels[destinations])
    high = np.maximum(labels[sources], labels[destinations])
    columns = [(low == g) & (high == h) for g in range(count) for h in range(g + 1, count)]
    return np.column_stack(columns).astype(float) if columns else np.zeros((sources.size, 0))


def node_and_pair_effects(log_times: np.ndarray, robust: bool = True,
                           labels: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """One repetition (n, n) of log times, NaN where not measured: node effects against the median
    node (n,) and what each pair leaves (n, n) once m, both nodes' effects and (with `labels`, each
    node's group) the cost of crossing between their groups are taken out. `robust`: Tukey's biweight
    (one slow link must not pass for its nodes); else least squares, which takes a block of slow pairs
    (every pair across two switches) as the block, not as some nodes' effects."""
    n = log_times.shape[0]
    sources, destinations = np.nonzero(np.isfinite(log_times))
    crossings = (np.zeros((sources.size, 0)) if labels is None
                 else _crossings(np.asarray(labels), sources, destinations))
    design = np.zeros((sources.size, n + 1))
    design[:, 0] = 1
    design[np.arange(sources.size), 1 + sources] += 1
    design[np.arange(sources.size), 1 + destinations] += 1
    design = np.hstack([design, crossings])
    # The node effects are defined up to a constant that m takes: pin them to sum zero.
    design = np.vstack([design, np.r_[0.0, np.ones(n), np.zeros(crossings.shape[1])]])
    y = np.r_[log_times[sources, destinations], 0.0]
    # The start: each node's median pair (both directions) against the median node (m + u_k + the
    # median other node's u), which one slow link among a node's n - 1 pairs cannot move; each crossing
    # the median of its pairs beyond that. (A node's median pair mixes pairs within its group and across:
    # the biweight takes it on from there.)
    through = np.array([np.nanmedian(np.r_[log_times[k], log_times[:, k]]) for k in range(n)])
    start_nodes = through - np.median(through)
    start_nodes -= start_nodes.mean()
    left = log_times[sources, destinations] - start_nodes[sources] - start_nodes[destinations]
    within = ~crossings.any(axis=1)
    start_level = np.median(left[within]) if within.any() else np.median(left)
    start_crossings = [np.median(left[column > 0]) - start_level if (column > 0).any() else 0.0
                       for column in crossings.T]
    coefficients = (_biweight_fit(y, design, np.r_[start_level, start_nodes, start_crossings]) if robust
                    else np.linalg.lstsq(design, y, rcond=None)[0])
    fitted = design[:-1] @ coefficients
    nodes = coefficients[1:n + 1]
    residual = np.full((n, n), np.nan)
    residual[sources, destinations] = log_times[sources, destinations] - fitted
    return nodes - np.median(nodes), residual


def _effects_table(per_repetition: np.ndarray, confidence: float, min_effect: float) -> pd.DataFrame:
    """(k, R) log effects per repetition -> effect, interval, p and q (relative, not log). Each
    effect's variance between repetitions is moderated across the k effects (limma's empirical
    Bayes, as compare does across sizes): five repetitions alone give a t with 4 degrees of freedom,
    too few to tell a link from 28 others."""
    repetitions = per_repetition.shape[1]
    if repetitions < 2:
        raise ValueError("pair effects need at least two repetitions (launches or rounds) for their intervals")
    mean = per_repetition.mean(axis=1)
    variance = per_repetition.var(axis=1, ddof=1)
    own_dof = np.full(variance.shape, repetitions - 1.0)
    log_variance = np.log(np.where(variance > 0, variance, np.nan))
    variance, dof = squeeze(variance, own_dof, *fit_prior(log_variance, own_dof))
    se = np.sqrt(np.maximum(variance, np.finfo(float).tiny) / repetitions)
    # Tested against the smallest change worth naming, not against none: a clean cluster of 56 pairs
    # has a few pairs 5-10% off by chance, and a node drained for nothing costs more than a late one.
    margin = np.log1p(min_effect)
    p = np.minimum(1.0, 2 * scipy_stats.t.sf((np.abs(mean) - margin) / se, df=dof))
    q = benjamini_hochberg(p)
    half = scipy_stats.t.ppf(0.5 + confidence / 2, df=dof) * se
    effect = np.expm1(mean)
    return pd.DataFrame({"effect": effect, "low": np.expm1(mean - half), "high": np.expm1(mean + half),
                         "p": p, "q": q, "named": q <= 1 - confidence})


def find_slow_nodes_and_links(times, nodes=None, *, groups=None, confidence: float = 0.95,
                              min_effect: float = 0.10) -> PairFindings:
    """Slow (or fast) nodes and links of pair times `times` shaped (n, n, repetitions): source,
    destination, repetition, NaN where a pair was not measured (the diagonal).

    `groups`: the nodes (names) on each switch of a tree (NodeGroups.groups), two nodes to a group at
    least; a link is then named for what it costs beyond its nodes and the crossing between its
    groups. Without them the nodes are taken to share one switch, and every pair across an
    oversubscribed uplink reads as a slow link.

    `min_effect` (0.10: 10%) is the smallest change named: virtual and real nodes differ by a few
    percent for reasons nobody would call a fault (which core a rank got, its distance to the NIC).
    """
    times = np.asarray(times, dtype=float)
    if times.ndim != 3 or times.shape[0] != times.shape[1]:
        raise ValueError(f"times must be (n, n, repetitions), got shape {times.shape}")
    n, _, repetitions = times.shape
    if n < MIN_NODES:
        raise ValueError(f"telling a slow link from slow nodes needs at least {MIN_NODES} nodes, got {n}")
    if np.any(times[np.isfinite(times)] <= 0):
        raise ValueError("pair times must be positive")
    names = [str(name) for name in (nodes if nodes is not None else range(n))]
    if len(names) != n:
        raise ValueError(f"{len(names)} node names for {n} nodes")
    labels = None if groups is None else _group_labels(groups, names)
    node_effects, pair_residuals = [], []
    for r in range(repetitions):
        effects, residual = node_and_pair_effects(np.log(times[:, :, r]), labels=labels)
        node_effects.append(effects)
        pair_residuals.append(residual)
    node_table = _effects_table(np.array(node_effects).T, confidence, min_effect)
    node_table.insert(0, "node", names)

    residuals = np.array(pair_residuals)                       # (R, n, n)
    a, b = np.triu_indices(n, k=1)
    # A link carries both directions: its effect is the mean of the two where both were measured.
    link = np.nanmean(np.stack([residuals[:, a, b], residuals[:, b, a]]), axis=0)   # (R, links)
    measured = np.isfinite(link).all(axis=0)
    link_table = _effects_table(link[:, measured].T, confidence, min_effect)
    link_table.insert(0, "b", [names[k] for k in b[measured]])
    link_table.insert(0, "a", [names[k] for k in a[measured]])
    return PairFindings(node_table, link_table, repetitions, confidence, min_effect,
                        None if groups is None else [[str(name) for name in group] for group in groups])


def _group_labels(groups, names: list[str]) -> np.ndarray:
    """Each node's group, from lists of node names; every node in one group of two or more (a node alone
    on its switch has every pair through the crossing: its own effect and the crossing's are one)."""
    labels = np.full(len(names), -1)
    for g, group in enumerate(groups):
        members = [str(name) for name in group]
        if len(members) < 2:
            raise ValueError(f"group {members} has fewer than two nodes: its crossing cannot be told from its node")
        for name in members:
            if name not in names:
                raise ValueError(f"group node {name!r} is not one of the nodes {names}")
            if labels[names.index(name)] >= 0:
                raise ValueError(f"node {name!r} is in two groups")
            labels[names.index(name)] = g
    if (labels < 0).any():
        raise ValueError(f"nodes in no group: {[names[k] for k in np.flatnonzero(labels < 0)]}")
    return labels
