"""Groups of nodes that share a switch, recovered from all-pairs times with planted leaves (synthetic
ground truth): nodes assigned to leaves at random, pairs across leaves slower by what an oversubscribed
uplink costs; the groups found must be exactly the leaves, and a cluster of one switch, with or
without a slow node or link, must stay one group. On such a tree, a slow node or link is named beyond
the crossing between the groups found, and nothing where nothing else was planted."""

import re

import numpy as np
import pytest

from commlens.analysis.network import find_groups, find_slow_nodes_and_links
from commlens.data import synthetic as syn

NAMES = [f"vnode{k}" for k in range(16)]


def planted(n_nodes: int, leaves: int, seed: int) -> list[int]:
    """A leaf per node, `leaves` leaves of equal size, nodes dealt to them at random."""
    labels = np.repeat(np.arange(leaves), n_nodes // leaves)
    return np.random.default_rng(seed).permutation(labels).tolist()


def groups_of(labels) -> list[list[str]]:
    members = sorted(([k for k in range(len(labels)) if labels[k] == leaf] for leaf in set(labels)), key=min)
    return [[NAMES[k] for k in group] for group in members]


@pytest.mark.parametrize("n_nodes, leaves, repetitions", [(8, 2, 5), (8, 2, 3), (12, 3, 5), (16, 4, 5), (16, 2, 3)])
@pytest.mark.parametrize("across", [1.3, 2.5])
def test_planted_leaves_are_found_exactly(n_nodes, leaves, repetitions, across):
    for seed in range(10):
        labels = planted(n_nodes, leaves, seed)
        found = find_groups(syn.pair_times(n_nodes, repetitions, groups=labels, across=across, seed=seed),
                            NAMES[:n_nodes])
        assert found.groups == groups_of(labels), (seed, found.merges)
        # The pairs across the groups read the planted cost of crossing, within the few percent by which
        # pairs and nodes differ once and for all (their interval is the repetitions' alone).
        assert abs((1 + found.across["effect"]) / across - 1) < 0.03, (seed, found.across)


@pytest.mark.parametrize("plants", [{}, {"slow_nodes": {3: 1.6}}, {"slow_links": {(1, 5): 1.8}},
                                    {"slow_nodes": {2: 1.5, 6: 1.5}}],
                         ids=["clean", "slow-node", "slow-link", "two-slow-nodes"])
def test_one_switch_stays_one_group_whatever_else_is_slow(plants):
    """A slow node is a node effect and a slow link one pair: neither makes a group, nor does noise."""
    for seed in range(20):
        found = find_groups(syn.pair_times(8, 5, seed=seed, **plants), NAMES[:8])
        assert found.groups == [NAMES[:8]], (seed, found.merges)
        assert found.named() == "one group: no two sets of its nodes are apart"


def test_a_crossing_cost_below_min_effect_makes_no_groups_and_one_above_does():
    labels = planted(8, 2, 0)
    quiet = syn.PairNoise(relative=0.01, pair_relative=0, node_relative=0, repetition_relative=0.05)
    small = find_groups(syn.pair_times(8, 5, noise=quiet, groups=labels, across=1.05, seed=1), NAMES[:8])
    large = find_groups(syn.pair_times(8, 5, noise=quiet, groups=labels, across=1.2, seed=1), NAMES[:8])
    assert len(small.groups) == 1 and large.groups == groups_of(labels)


def test_the_groups_read_as_a_sentence():
    labels = [0, 0, 0, 0, 1, 1, 1, 1]
    found = find_groups(syn.pair_times(8, 5, groups=labels, across=2.0, seed=3), NAMES[:8])
    assert re.fullmatch(r"2 groups: vnode0 vnode1 vnode2 vnode3, vnode4 vnode5 vnode6 vnode7; pairs across groups "
                        r"(9\d|1\d\d)% slower than within \[\+\d+%, \+\d+%\] \(p = \S+\)", found.named()), found.named()


def named_on_a_tree(n_nodes, leaves, kind, seed, across=1.5, factor=1.4, groups=True):
    """A tree of `leaves` random leaves with a plant (none, a node, a link within a leaf or across two):
    the planted truth and what is named beyond the groups found in the same times (nodes, links)."""
    labels = planted(n_nodes, leaves, seed)
    rng = np.random.default_rng(1000 + seed)
    a = int(rng.integers(n_nodes))
    mates = [k for k in range(n_nodes) if k != a and (labels[k] == labels[a]) == (kind == "link within")]
    b = int(rng.choice(mates))
    plants = {"clean": {}, "node": {"slow_nodes": {a: factor}}}.get(kind, {"slow_links": {(a, b): factor}})
    times = syn.pair_times(n_nodes, 5, groups=labels, across=across, seed=seed, **plants)
    found_groups = find_groups(times, NAMES[:n_nodes])
    assert found_groups.groups == groups_of(labels), (seed, found_groups.merges)
    found = find_slow_nodes_and_links(times, NAMES[:n_nodes], groups=found_groups.groups if groups else None)
    truth = (sorted(NAMES[k] for k in plants.get("slow_nodes", {})),
             sorted(tuple(sorted((NAMES[x], NAMES[y]))) for x, y in plants.get("slow_links", {})))
    named = (sorted(found.nodes["node"][found.nodes["named"]]),
             sorted(tuple(sorted(pair)) for pair in found.links.loc[found.links["named"], ["a", "b"]].values.tolist()))
    return truth, named, found


@pytest.mark.parametrize("kind", ["clean", "node", "link within", "link across"])
@pytest.mark.parametrize("n_nodes, leaves", [(8, 2), (12, 3)])
def test_on_a_tree_exactly_the_planted_node_or_link_is_named_beyond_the_groups(kind, n_nodes, leaves):
    for seed in range(10):
        truth, named, found = named_on_a_tree(n_nodes, leaves, kind, seed)
        assert named == truth, (seed, found.nodes, found.links.sort_values("p").head())
        if kind.startswith("link"):
            row = found.links[found.links["named"]].iloc[0]
            assert abs(row["effect"] - 0.4) < 0.1 and found.named()[0].endswith(
                "beyond its nodes and the crossing between their switches"), found.named()


def test_without_its_groups_a_tree_reads_as_slow_links_across():
    """Why the groups go in: judged as one switch, the pairs that cross an uplink 50% slower are links
    beyond their nodes."""
    truth, named, _ = named_on_a_tree(8, 2, "clean", seed=0, groups=False)
    assert truth == ([], []) and len(named[1]) >= 8


def test_one_group_of_every_node_is_one_switch():
    times = syn.pair_times(8, 5, seed=2, slow_links={(1, 5): 1.5})
    alone, grouped = (find_slow_nodes_and_links(times, NAMES[:8], groups=groups) for groups in (None, [NAMES[:8]]))
    assert alone.links.equals(grouped.links) and alone.nodes.equals(grouped.nodes)


def test_a_group_of_one_node_is_refused():
    times = syn.pair_times(8, 3, seed=0)
    with pytest.raises(ValueError, match="fewer than two nodes"):
        find_slow_nodes_and_links(times, NAMES[:8], groups=[NAMES[:7], NAMES[7:8]])
    with pytest.raises(ValueError, match="nodes in no group"):
        find_slow_nodes_and_links(times, NAMES[:8], groups=[NAMES[:3], NAMES[3:6]])


@pytest.mark.parametrize("times, message", [
    (np.ones((4, 4)), "must be \\(n, n, repetitions\\)"),
    (np.ones((4, 4, 1)), "at least two repetitions"),
    (-np.ones((4, 4, 2)), "must be positive"),
])
def test_bad_input_says_what_is_wrong(times, message):
    with pytest.raises(ValueError, match=message):
        find_groups(times)
