"""Slow nodes and slow links named from all-pairs times with planted faults (synthetic ground truth).

Each case plants its fault at random (node, link, both, or none) into times that vary as real pair
measurements do: whole repetitions by 20%, every pair and node a little once and for all, every
measurement by 5%. What is named must be exactly what was planted.
"""

import numpy as np
import pytest

from commlens.analysis.network import find_slow_nodes_and_links
from commlens.data import synthetic as syn

NAMES = [f"vnode{k}" for k in range(16)]


EXACT = syn.PairNoise(pair_relative=0, node_relative=0)   # nothing persistent: the plant is the whole truth


def planted_and_named(n_nodes, repetitions, kind, factor, seed, noise=syn.PairNoise()):
    rng = np.random.default_rng(seed)
    a, b, c = (int(k) for k in rng.choice(n_nodes, 3, replace=False))
    plants = {"clean": {}, "node": {"slow_nodes": {a: factor}}, "link": {"slow_links": {(a, b): factor}},
              "both": {"slow_nodes": {c: factor}, "slow_links": {(a, b): factor}}}[kind]
    times = syn.pair_times(n_nodes, repetitions, noise=noise, seed=seed, **plants)
    found = find_slow_nodes_and_links(times, NAMES[:n_nodes])
    truth = (sorted(NAMES[k] for k in plants.get("slow_nodes", {})),
             sorted(tuple(sorted((NAMES[x], NAMES[y]))) for x, y in plants.get("slow_links", {})))
    named = (sorted(found.nodes["node"][found.nodes["named"]]),
             sorted(tuple(sorted(pair)) for pair in found.links.loc[found.links["named"], ["a", "b"]].values.tolist()))
    return truth, named, found


@pytest.mark.parametrize("kind", ["clean", "node", "link", "both"])
@pytest.mark.parametrize("factor", [1.3, 0.75], ids=["slower", "faster"])
def test_eight_nodes_five_repetitions_name_exactly_what_was_planted(kind, factor):
    for seed in range(20):
        truth, named, found = planted_and_named(8, 5, kind, factor, seed)
        assert named == truth, (seed, found.nodes, found.links.sort_values("p").head())


@pytest.mark.parametrize("factor", [2.0, 0.5])
def test_a_node_twice_as_slow_on_quiet_links_reads_its_factor(factor):
    """Quiet links (1% noise, as between virtual nodes) and a large effect: the fit must not give up a
    node's every pair as outliers, which leaves its effect undetermined."""
    quiet = syn.PairNoise(relative=0.01, pair_relative=0, node_relative=0, repetition_relative=0.05)
    for seed in range(10):
        found = find_slow_nodes_and_links(syn.pair_times(6, 3, noise=quiet, seed=seed, slow_nodes={seed % 6: factor}),
                                          NAMES[:6])
        assert list(found.nodes["node"][found.nodes["named"]]) == [NAMES[seed % 6]] and not found.links["named"].any()
        assert found.nodes.loc[seed % 6, "effect"] == pytest.approx(factor - 1, abs=0.02)


def test_sixteen_nodes_and_three_repetitions_also_name_a_planted_node_and_link():
    for seed in range(10):
        for n_nodes, repetitions in ((16, 5), (8, 3)):
            truth, named, _ = planted_and_named(n_nodes, repetitions, "both", 1.5, seed)
            assert named == truth, (n_nodes, repetitions, seed)


def test_a_named_fault_reads_its_planted_size_within_its_interval():
    hits = 0
    for seed in range(20):
        _, _, found = planted_and_named(8, 5, "both", 1.4, seed, noise=EXACT)
        named = found.nodes[found.nodes["named"]].iloc[0], found.links[found.links["named"]].iloc[0]
        hits += sum(row["low"] <= 0.4 <= row["high"] for row in named)
        assert all(abs(row["effect"] - 0.4) < 0.1 for row in named)
    assert hits >= 36          # 95% intervals: at least 36 of 40 hold the truth (expected 38)


def test_a_change_smaller_than_min_effect_is_not_named_and_a_larger_one_is():
    times = syn.pair_times(8, 5, noise=EXACT, seed=3, slow_nodes={2: 1.06}, slow_links={(4, 6): 1.06})
    found = find_slow_nodes_and_links(times, NAMES[:8])
    assert not found.nodes["named"].any() and not found.links["named"].any()
    found = find_slow_nodes_and_links(times, NAMES[:8], min_effect=0.02)
    assert list(found.nodes["node"][found.nodes["named"]]) == ["vnode2"]


def test_findings_read_as_sentences_with_the_interval():
    times = syn.pair_times(8, 5, noise=EXACT, seed=1, slow_nodes={3: 1.41})
    lines = find_slow_nodes_and_links(times, NAMES[:8]).named()
    assert len(lines) == 1 and lines[0].startswith("vnode3: every pair through it 4")
    assert "% slower [+" in lines[0]


@pytest.mark.parametrize("times, message", [
    (np.ones((8, 8)), r"must be \(n, n, repetitions\)"),
    (np.ones((4, 4, 5)), "at least 5 nodes"),
    (np.ones((8, 8, 1)), "at least two repetitions"),
    (-np.ones((8, 8, 5)), "must be positive"),
])
def test_bad_input_says_what_is_wrong(times, message):
    with pytest.raises(ValueError, match=message):
        find_slow_nodes_and_links(times)
